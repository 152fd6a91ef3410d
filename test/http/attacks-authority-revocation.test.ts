/**
 * Attacks through dead authority: a chain through a revoked, expired or not-yet-valid edge or principal
 * anywhere above; a revocation recorded by a replica whose clock is ahead; a principal revoked and
 * registered again under its id; cycles; a graph made wide to make someone else's decisions fail.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ManualClock } from '../../src/clock.js';
import { applyManifest } from '../../src/service/index.js';
import { REPO, startHarness, type Harness } from '../support/harness.js';

let h: Harness;
let clock: ManualClock;
beforeEach(async () => {
  h = await startHarness();
  clock = h.clock as ManualClock;
});
afterEach(async () => h?.close());

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const revision = async () => (await h.ctx.graph.current()).revision;
const ask = (principal: string, body: Record<string, unknown>) => h.call(principal, { method: 'POST', url: '/v1/decisions', payload: body });
const read = { actions: ['read_post'], resources: ['wp:post:*'], environments: ['production'], fields: ['*'], risk_max: 0 };
const readPost = { action: 'read_post', resource: 'wp:post:1', environment: 'production' };

async function delegate(principal: string, payload: Record<string, unknown>) {
  const before = await revision();
  const r = await h.call(principal, { method: 'POST', url: '/v1/delegations', payload: { reason: 'attack', max_depth: 0, ...payload } });
  return { ...r, moved: (await revision()) !== before };
}

describe('a revocation recorded ahead of this replica\'s clock still counts', () => {
  // Replicas share the graph, not a clock: one whose clock is a minute ahead records the revocation at
  // its time; this one, behind, then reads a revoked_at later than its `now`.
  it('an edge revoked "in the future" supports no delegation', async () => {
    const rev = await h.call('governance', { method: 'DELETE', url: '/v1/edges/g-orchestrator', payload: { reason: 'compromised' } });
    expect(rev.status).toBe(200);
    clock.advance(-MINUTE);
    const r = await delegate('orchestrator', { from: 'orchestrator', to: 'content-agent-3', scope: read });
    expect([r.status, r.body.code], JSON.stringify(r.body)).toEqual([403, 'ATTENUATION_VIOLATION']);
    expect(r.moved).toBe(false);
    expect((await ask('orchestrator', readPost)).body.allow).toBe(false);
  });

  it('the policy counts it too: explain shows the chain through an edge revoked "in the future" as revoked, as decide does', async () => {
    const update = { action: 'update_post', resource: 'wp:post:1024', environment: 'production', fields: ['title'] };
    expect((await h.call('governance', { method: 'DELETE', url: '/v1/edges/d-orch-seo', payload: { reason: 'compromised' } })).status).toBe(200);
    clock.advance(-MINUTE);
    expect((await ask('seo-agent-7', update)).body.allow).toBe(false);
    const ex = await h.call('governance', { method: 'POST', url: '/v1/explain', payload: { principal: 'seo-agent-7', ...update } });
    expect(ex.status, JSON.stringify(ex.body)).toBe(200);
    expect(ex.body.allow).toBe(false);
    const through = ex.body.chains.filter((c: { edges: { id: string }[] }) => c.edges.some((e) => e.id === 'd-orch-seo'));
    expect(through.length).toBeGreaterThan(0);
    for (const c of through) {
      expect(c.verdict.ok).toBe(false);
      expect(JSON.stringify(c.verdict.edges)).toMatch(/d-orch-seo[^"]*" was revoked at|was revoked at/);
    }
  });

  it('a principal revoked "in the future" above the delegator supports no delegation', async () => {
    expect((await delegate('orchestrator', { id: 'd-op', from: 'orchestrator', to: 'publisher', max_depth: 1, scope: read })).status).toBe(201);
    const rev = await h.call('governance', { method: 'DELETE', url: '/v1/principals/orchestrator', payload: { reason: 'compromised' } });
    expect(rev.status).toBe(200);
    clock.advance(-MINUTE);
    const r = await delegate('publisher', { from: 'publisher', to: 'content-agent-3', scope: read });
    expect([r.status, r.body.code], JSON.stringify(r.body)).toEqual([403, 'ATTENUATION_VIOLATION']);
    expect(r.moved).toBe(false);
    expect((await ask('publisher', readPost)).body.allow).toBe(false);
  });
});

describe('a principal revoked on a replica whose clock is ahead', () => {
  it('cannot authenticate on this one, behind it: no edge revocation, no read, no decision', async () => {
    const d = await delegate('editor-alice', { id: 'd-alice-c3', from: 'editor-alice', to: 'content-agent-3', scope: read });
    expect(d.status).toBe(201);
    expect((await h.call('governance', { method: 'DELETE', url: '/v1/principals/editor-alice', payload: { reason: 'left' } })).status).toBe(200);
    clock.advance(-MINUTE);
    const before = await revision();
    const revoke = await h.call('editor-alice', { method: 'DELETE', url: '/v1/edges/d-alice-c3', payload: { reason: 'on my way out' } });
    expect([revoke.status, revoke.body.code], JSON.stringify(revoke.body)).toEqual([401, 'UNAUTHENTICATED']);
    expect(await revision()).toBe(before);
    expect((await h.call('editor-alice', { method: 'GET', url: '/v1/edges/d-alice-c3' })).status).toBe(401);
    expect((await ask('editor-alice', readPost)).status).toBe(401);
  });
});

describe('AuthZEN subject search after a revocation recorded ahead of this clock', () => {
  it('does not list the revoked principal as one who may do it', async () => {
    const search = () => h.call('governance', {
      method: 'POST', url: '/access/v1/search/subject',
      payload: { subject: { type: 'agent' }, action: { name: 'update_post' }, resource: { type: 'wp:post', id: 'wp:post:1', properties: { environment: 'production', fields: ['title'] } } },
    });
    const before = await search();
    expect(before.status, JSON.stringify(before.body)).toBe(200);
    expect(before.body.results.map((r: { id: string }) => r.id)).toContain('seo-agent-7');
    expect((await h.call('governance', { method: 'DELETE', url: '/v1/principals/seo-agent-7', payload: { reason: 'gone' } })).status).toBe(200);
    clock.advance(-MINUTE);
    const after = await search();
    expect(after.body.results.map((r: { id: string }) => r.id)).not.toContain('seo-agent-7');
  });
});

describe('dead authority above', () => {
  it('a delegation cannot be written from a grant that has expired or is not valid yet', async () => {
    for (const [id, window] of [
      ['g-later', { not_before: new Date(clock.now() + HOUR).toISOString() }],
      ['g-over', { expires_at: new Date(clock.now() + MINUTE).toISOString() }],
    ] as const) {
      const g = await h.call('governance', { method: 'POST', url: '/v1/grants', payload: { id, to: 'publisher', reason: 'window', max_depth: 1, ...window, scope: read } });
      expect(g.status, JSON.stringify(g.body)).toBe(201);
    }
    clock.advance(2 * MINUTE);
    const r = await delegate('publisher', { from: 'publisher', to: 'content-agent-3', scope: read });
    expect([r.status, r.body.code], JSON.stringify(r.body)).toEqual([403, 'ATTENUATION_VIOLATION']);
    expect(r.moved).toBe(false);
    expect((await ask('publisher', readPost)).body.allow).toBe(false);
  });

  it('a delegation written while its parent was live dies with the parent\'s expiry, and does not come back with a new grant of the same scope under another id', async () => {
    const g = await h.call('governance', { method: 'POST', url: '/v1/grants', payload: { id: 'g-pub-read', to: 'publisher', reason: 'r', max_depth: 1, expires_at: new Date(clock.now() + HOUR).toISOString(), scope: read } });
    expect(g.status).toBe(201);
    expect((await delegate('publisher', { id: 'd-pub', from: 'publisher', to: 'content-agent-3', expires_at: new Date(clock.now() + HOUR).toISOString(), scope: read })).status).toBe(201);
    expect((await ask('content-agent-3', readPost)).body.allow).toBe(true);
    clock.advance(HOUR);
    expect((await ask('content-agent-3', readPost)).body.allow).toBe(false);
  });

  it('a principal revoked and registered again under its id stays revoked: refused or a no-op, never a fresh principal', async () => {
    const before = await h.call('governance', { method: 'GET', url: '/v1/principals/seo-agent-7' });
    expect(before.status).toBe(200);
    expect((await h.call('governance', { method: 'DELETE', url: '/v1/principals/seo-agent-7', payload: { reason: 'gone' } })).status).toBe(200);
    const { id, kind, priority_class, attributes, keys } = before.body.principal ?? before.body;
    const again = await h.call('governance', { method: 'POST', url: '/v1/principals', payload: { id, kind, priority_class, attributes, keys } });
    expect(again.status).toBeLessThan(500);
    const other = await h.call('governance', { method: 'POST', url: '/v1/principals', payload: { id, kind: 'human', keys } });
    expect([other.status, other.body.code]).toEqual([409, 'ALREADY_EXISTS']);
    const p = (await h.ctx.graph.current()).principal('seo-agent-7')!;
    expect(p.revoked_at).not.toBeNull();
    const r = await ask('seo-agent-7', { action: 'update_post', resource: 'wp:post:1', environment: 'production', fields: ['title'] });
    expect(r.body.allow ?? false).toBe(false);
    // A new grant to the revoked id is refused.
    const g = await h.call('governance', { method: 'POST', url: '/v1/grants', payload: { to: 'seo-agent-7', reason: 'r', scope: read } });
    expect(g.status).toBe(422);
  });

  it('a cycle with no root left holds nothing, and is judged quickly', async () => {
    const body = { actions: ['update_post'], resources: ['wp:post:*'], environments: ['production'], fields: ['body'], risk_max: 1 };
    expect((await delegate('orchestrator', { id: 'd-oa', from: 'orchestrator', to: 'editor-alice', max_depth: 1, scope: body })).status).toBe(201);
    expect((await delegate('editor-alice', { id: 'd-ao', from: 'editor-alice', to: 'orchestrator', max_depth: 0, scope: body })).status).toBe(201);
    for (const g of ['g-orchestrator', 'g-editor-alice']) {
      expect((await h.call('governance', { method: 'DELETE', url: `/v1/edges/${g}`, payload: { reason: 'cut the roots' } })).status).toBe(200);
    }
    const req = { action: 'update_post', resource: 'wp:post:1', environment: 'production', fields: ['body'] };
    for (const p of ['orchestrator', 'editor-alice', 'content-agent-3']) {
      const r = await ask(p, req);
      expect(r.status).toBe(200);
      expect(r.body.allow, p).toBe(false);
    }
    // Nor can either re-delegate from the cycle.
    const d = await delegate('orchestrator', { from: 'orchestrator', to: 'publisher', scope: body });
    expect([d.status, d.body.code]).toEqual([403, 'ATTENUATION_VIOLATION']);
  });
});

describe('budgets: a wide graph made by someone else', () => {
  // Anyone who may delegate may delegate to anyone, without the delegate's consent, and each such edge is
  // searched by every resolution of the delegate. So the delegations one principal may give another that
  // have not ended are bounded when written (WRIT_MAX_DELEGATIONS_BETWEEN, 16). How many principals
  // delegate to one is not bounded: a resolution's fan-out bound (64 delegators into one principal) let
  // 65 of them deny it every decision; the work is bounded by the edges examined (maxVisited) instead.
  // The delegations a principal wrote while it could stay in the graph when the grant that allowed them
  // is revoked (writ orphans lists them), and each made a live, covering candidate path through any
  // other grant that principal keeps, invalid there (that grant allows no further delegation, or less
  // depth than they keep). Candidates are ordered live first, then shorter, then by edge ids, and 16 are
  // judged (maxChains): 17 such leftovers whose grant id sorts before g-orchestrator pushed seo-agent-7's
  // own valid chain out, and its decision was a plain deny. Decide-mode resolution now drops a path whose
  // edge is wider than the next one on it (narrowsTo: exactly the policy's narrowing rules, depth
  // included), as it drops dead edges. A delegator may now leave at most 16 such delegations into one
  // principal (WRIT_MAX_DELEGATIONS_BETWEEN); these tests raise the bound to show the pruning alone.
  const raiseBound = async () => {
    await h.close();
    h = await startHarness({ config: { maxDelegationsBetween: 100 } });
  };
  it('seo-agent-7 is still allowed through its own chain when 17 leftover delegations into it are invalid', async () => {
    await raiseBound();
    const title = { actions: ['update_post'], resources: ['wp:post:*'], environments: ['production'], fields: ['title'], risk_max: 1 };
    for (const [id, depth] of [['g-a0', 0], ['g-pub-temp', 1]] as const) {
      const g = await h.call('governance', { method: 'POST', url: '/v1/grants', payload: { id, to: 'publisher', reason: 'titles', max_depth: depth, scope: title } });
      expect(g.status, JSON.stringify(g.body)).toBe(201);
    }
    for (let i = 0; i < 17; i++) {
      const r = await delegate('publisher', { id: `left-${String(i).padStart(2, '0')}`, from: 'publisher', to: 'seo-agent-7', scope: title });
      expect(r.status, JSON.stringify(r.body)).toBe(201);
    }
    expect((await h.call('governance', { method: 'DELETE', url: '/v1/edges/g-pub-temp', payload: { reason: 'no more re-delegation' } })).status).toBe(200);
    const r = await ask('seo-agent-7', { action: 'update_post', resource: 'wp:post:1', environment: 'production', fields: ['title'] });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.allow, JSON.stringify(r.body.reasons)).toBe(true);
  }, 120_000);

  it('seo-agent-7 is still allowed when 17 leftovers keep more depth than the grant left to them allows', async () => {
    await raiseBound();
    const title = { actions: ['update_post'], resources: ['wp:post:*'], environments: ['production'], fields: ['title'], risk_max: 1 };
    for (const [id, depth] of [['g-a1', 1], ['g-pub-temp', 2]] as const) {
      const g = await h.call('governance', { method: 'POST', url: '/v1/grants', payload: { id, to: 'publisher', reason: 'titles', max_depth: depth, scope: title } });
      expect(g.status, JSON.stringify(g.body)).toBe(201);
    }
    for (let i = 0; i < 17; i++) {
      const r = await delegate('publisher', { id: `left-${String(i).padStart(2, '0')}`, from: 'publisher', to: 'seo-agent-7', max_depth: 1, scope: title });
      expect(r.status, JSON.stringify(r.body)).toBe(201);
    }
    expect((await h.call('governance', { method: 'DELETE', url: '/v1/edges/g-pub-temp', payload: { reason: 'no more re-delegation' } })).status).toBe(200);
    const r = await ask('seo-agent-7', { action: 'update_post', resource: 'wp:post:1', environment: 'production', fields: ['title'] });
    expect(r.body.allow, JSON.stringify(r.body.reasons)).toBe(true);
  }, 120_000);

  it('editor-alice may give content-agent-3 16 delegations, not a 17th; content-agent-3 is still allowed through its own chain', async () => {
    const body = { actions: ['update_post'], resources: ['wp:post:*'], environments: ['production'], fields: ['body'], risk_max: 1 };
    for (let i = 0; i < 16; i++) {
      const r = await delegate('editor-alice', { id: `flood-${i}`, from: 'editor-alice', to: 'content-agent-3', scope: body });
      expect(r.status).toBe(201);
    }
    const more = await delegate('editor-alice', { id: 'flood-16', from: 'editor-alice', to: 'content-agent-3', scope: body });
    expect([more.status, more.body.code, more.moved]).toEqual([409, 'TOO_MANY_DELEGATIONS', false]);
    expect(more.body.detail).toContain('WRIT_MAX_DELEGATIONS_BETWEEN=16');
    // Proposed to impact analysis, it is refused as it would be written.
    const proposed = await h.call('editor-alice', { method: 'POST', url: '/v1/impact', payload: { delegate: { id: 'flood-16', from: 'editor-alice', to: 'content-agent-3', reason: 'what if', scope: body } } });
    expect([proposed.status, proposed.body.code]).toEqual([409, 'TOO_MANY_DELEGATIONS']);
    // Others still may; an ended one frees its place.
    expect((await delegate('orchestrator', { id: 'd-other', from: 'orchestrator', to: 'content-agent-3', scope: body })).status).toBe(201);
    expect((await h.call('editor-alice', { method: 'DELETE', url: '/v1/edges/flood-0', payload: { reason: 'make room' } })).status).toBe(200);
    expect((await delegate('editor-alice', { id: 'flood-16', from: 'editor-alice', to: 'content-agent-3', scope: body })).status).toBe(201);
    const r = await ask('content-agent-3', { action: 'update_post', resource: 'wp:post:1', environment: 'production', fields: ['body'] });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.allow).toBe(true);
  }, 120_000);

  it('content-agent-3 is still allowed through its own chain after 65 unsolicited delegations (the bound raised): they count as one delegator', async () => {
    await raiseBound();
    const body = { actions: ['update_post'], resources: ['wp:post:*'], environments: ['production'], fields: ['body'], risk_max: 1 };
    for (let i = 0; i < 65; i++) {
      const r = await delegate('editor-alice', { id: `flood-${i}`, from: 'editor-alice', to: 'content-agent-3', scope: body });
      expect(r.status).toBe(201);
    }
    const r = await ask('content-agent-3', { action: 'update_post', resource: 'wp:post:1', environment: 'production', fields: ['body'] });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.allow).toBe(true);
    const explained = await h.call('content-agent-3', { method: 'POST', url: '/v1/explain', payload: { action: 'update_post', resource: 'wp:post:1', environment: 'production', fields: ['body'] } });
    expect(explained.status, JSON.stringify(explained.body)).toBe(200);
  }, 120_000);

  it('an agent 70 principals delegate to is allowed, through its own chain when theirs do not cover the act; writ can and explain answer', async () => {
    // With a fan-out bound of 64 delegators into one principal, every decision of seo-agent-7 was
    // BUDGET_EXCEEDED (503) once 65 principals holding a chain had each delegated to it.
    const scope = (fields: string[]) => ({ actions: ['update_post'], resources: ['wp:post:*'], environments: ['production'], fields, risk_max: 1 });
    const crowd = Array.from({ length: 70 }, (_, i) => `crowd-${String(i).padStart(2, '0')}`);
    await applyManifest(h.ctx, 'governance', {
      principals: crowd.map((id) => ({ id, kind: 'agent' as const })),
      grants: crowd.map((id) => ({ id: `g-${id}`, to: id, reason: 'crowd', max_depth: 1, scope: scope(['body']) })),
      delegations: crowd.map((id) => ({ id: `d-${id}`, from: id, to: 'seo-agent-7', reason: 'crowd', max_depth: 0, scope: scope(['body']) })),
    }, REPO);
    const ownField = await ask('seo-agent-7', { action: 'update_post', resource: 'wp:post:1', environment: 'production', fields: ['title'] });
    expect(ownField.status, JSON.stringify(ownField.body)).toBe(200);
    expect(ownField.body.allow, JSON.stringify(ownField.body.reasons)).toBe(true);
    expect(ownField.body.chain).toEqual(['g-orchestrator', 'd-orch-seo']);
    const theirs = await ask('seo-agent-7', { action: 'update_post', resource: 'wp:post:1', environment: 'production', fields: ['body'] });
    expect([theirs.status, theirs.body.allow], JSON.stringify(theirs.body)).toEqual([200, true]);
    expect(theirs.body.chain).toEqual(['g-crowd-00', 'd-crowd-00']);
    const explained = await h.call('seo-agent-7', { method: 'POST', url: '/v1/explain', payload: { action: 'update_post', resource: 'wp:post:1', environment: 'production', fields: ['title'] } });
    expect(explained.status, JSON.stringify(explained.body)).toBe(200);
    // Explain gives the verdict decide gives: the crowd's 70 chains (which do not cover title) sort before
    // seo-agent-7's own, and 16 of them alone would say deny.
    expect(explained.body.allow, JSON.stringify(explained.body.reasons)).toBe(true);
    const can = await h.call('governance', { method: 'GET', url: '/v1/principals/seo-agent-7/capabilities' });
    expect(can.status, JSON.stringify(can.body)).toBe(200);
    expect(JSON.stringify(can.body)).toContain('d-orch-seo');
  }, 120_000);

  it('seo-agent-7 is still allowed through its own chain when a third party gives it 16 delegations too low in risk_max for the act', async () => {
    // editor-alice's grant id sorts before g-orchestrator, so her chains came first among equally long ones;
    // each covers the request and narrows, and the policy rejects each for risk (update_post is risk 1,
    // risk_max 0): 16 of them filled maxChains and seo-agent-7's own chain was never judged (a deny).
    const title = { actions: ['update_post'], resources: ['wp:post:*'], environments: ['production'], fields: ['title'], risk_max: 0 };
    for (let i = 0; i < 16; i++) {
      const r = await delegate('editor-alice', { id: `low-${String(i).padStart(2, '0')}`, from: 'editor-alice', to: 'seo-agent-7', scope: title });
      expect(r.status, JSON.stringify(r.body)).toBe(201);
    }
    const req = { action: 'update_post', resource: 'wp:post:1', environment: 'production', fields: ['title'] };
    const r = await ask('seo-agent-7', req);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.allow, JSON.stringify(r.body.reasons)).toBe(true);
    // A declared risk above what the own chain allows is still denied, and the reasons name a risk.
    const high = await ask('seo-agent-7', { ...req, context: { risk: 2 } });
    expect(high.body.allow).toBe(false);
    expect(JSON.stringify(high.body.reasons)).toMatch(/risk: 2 exceeds the risk_max/);
  }, 120_000);
});
