/**
 * POST /v1/impact tells a caller no more than it may know: not whether an edge id it may not read is
 * taken, nothing below an edge that gives no capability, and of the principals it knows only as the
 * other ends of its own edges only what comes through those edges.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ManualClock } from '../../src/clock.js';
import { GOVERNANCE_ID } from '../../src/graph/model.js';
import { formatImpact } from '../../src/cli/format.js';
import { analyseImpact, createApproval, createDelegation, createGrant, createPreemption, registerPrincipal } from '../../src/service/index.js';
import { decideOk, leaseOk } from '../support/agent.js';
import { startHarness, type Harness } from '../support/harness.js';

const update = (fields: string[]) => ({ actions: ['update_post'], resources: ['wp:post:*'], environments: ['production'], fields, risk_max: 1 });

function harnessed() {
  const ref: { h: Harness } = {} as never;
  beforeAll(async () => {
    ref.h = await startHarness();
  });
  afterAll(async () => ref.h?.close());
  return ref;
}

describe('delegate.id: an id taken by an edge the caller may not read is judged as a free one, as POST /v1/delegations judges it', () => {
  const t = harnessed();
  const impact = (principal: string, change: object) => t.h.call(principal, { method: 'POST', url: '/v1/impact', payload: change });
  const toPublisher = (id: string, scope = update(['title'])) => ({ delegate: { id, from: 'editor-alice', to: 'publisher', reason: 'cover', max_depth: 0, scope } });

  it('d-orch-seo (orchestrator → seo-agent-7), which editor-alice may not read: refused only as writing it would be, saying the id is taken and nothing of the edge', async () => {
    expect((await t.h.call('editor-alice', { method: 'GET', url: '/v1/edges/d-orch-seo' })).body.code).toBe('UNKNOWN_EDGE');
    const free = await impact('editor-alice', toPublisher('d-free-1'));
    expect(free.status, JSON.stringify(free.body)).toBe(200);
    const taken = await impact('editor-alice', toPublisher('d-orch-seo'));
    expect(taken.status, JSON.stringify(taken.body)).toBe(409);
    expect(taken.body.code).toBe('ALREADY_EXISTS');
    expect(taken.body.detail).toBe('edge id "d-orch-seo" is taken: choose another id, or omit id and Writ makes one up');
    expect(taken.raw).not.toMatch(/orchestrator|seo-agent-7/);
    // What POST /v1/delegations answers for the same body.
    const written = await t.h.call('editor-alice', { method: 'POST', url: '/v1/delegations', payload: toPublisher('d-orch-seo').delegate });
    expect({ status: written.status, code: written.body.code, detail: written.body.detail }).toEqual({ status: 409, code: 'ALREADY_EXISTS', detail: taken.body.detail });
  });

  it('a refusal is the same too (ATTENUATION_VIOLATION)', async () => {
    const taken = await impact('editor-alice', toPublisher('d-orch-seo', { ...update(['title']), actions: ['deploy'] }));
    const free = await impact('editor-alice', toPublisher('d-free-1', { ...update(['title']), actions: ['deploy'] }));
    expect(taken.body.code, JSON.stringify(taken.body)).toBe('ATTENUATION_VIOLATION');
    expect(taken.body).toEqual(free.body);
  });

  it('an edge it may read keeps ALREADY_EXISTS: one it holds, one it gives, and any for governance', async () => {
    expect(await impact('editor-alice', toPublisher('g-editor-alice'))).toMatchObject({ status: 409, body: { code: 'ALREADY_EXISTS' } });
    const own = { delegate: { id: 'd-orch-content', from: 'orchestrator', to: 'publisher', reason: 'x', max_depth: 0, scope: update(['title']) } };
    expect(await impact('orchestrator', own)).toMatchObject({ status: 409, body: { code: 'ALREADY_EXISTS' } });
    const asGovernance = { delegate: { ...toPublisher('d-orch-seo').delegate } };
    expect(await impact(GOVERNANCE_ID, asGovernance)).toMatchObject({ status: 409, body: { code: 'ALREADY_EXISTS' } });
  });
});

describe('an edge that gives no capability: nothing below it is examined', () => {
  const t = harnessed();
  const impact = (principal: string, change: object) => t.h.call(principal, { method: 'POST', url: '/v1/impact', payload: change });

  beforeAll(async () => {
    // content-agent-3 approves and may preempt the orchestrator, whose delegates are seo-agent-7 and content-agent-3.
    await createApproval(t.h.ctx, GOVERNANCE_ID, { id: 'a-content-orch', from: 'content-agent-3', to: 'orchestrator', reason: 'reviews', scope: update(['*']) });
    await createPreemption(t.h.ctx, GOVERNANCE_ID, { id: 'p-content-orch', from: 'content-agent-3', to: 'orchestrator', reason: 'takes over' });
  });

  it('revoking an approval of its own: the approval ends, nobody loses anything, nobody is examined', async () => {
    const r = await impact('content-agent-3', { revoke: { edge: 'a-content-orch' } });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body).toMatchObject({ principals_examined: 0, lost: [], gained: [], leases_ending: [], orphaned_delegations: [] });
    expect(r.body.approvals_ending.map((a: { edge: { id: string } }) => a.edge.id)).toEqual(['a-content-orch']);
    expect(r.raw).not.toContain('seo-agent-7');
  });

  it('revoking a preemption of its own: nothing changes, nobody is examined', async () => {
    const r = await impact('content-agent-3', { revoke: { edge: 'p-content-orch' } });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body).toMatchObject({ principals_examined: 0, lost: [], gained: [], leases_ending: [], orphaned_delegations: [], approvals_ending: [] });
  });

  it('revoking an ownership of its own: nobody is examined', async () => {
    const r = await impact('seo-control-plane', { revoke: { edge: 'o-seo-metadata' } });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body).toMatchObject({ principals_examined: 0, lost: [], gained: [] });
  });

  it('governance asking the same sees the same (no capability changes)', async () => {
    const r = await impact(GOVERNANCE_ID, { revoke: { edge: 'a-content-orch' } });
    expect(r.body).toMatchObject({ principals_examined: 0, lost: [], gained: [] });
  });
});

describe('the other ends of its own edges: only what comes through the change\'s own edges', () => {
  const t = harnessed();
  const impact = (principal: string, change: object) => t.h.call(principal, { method: 'POST', url: '/v1/impact', payload: change });

  it('a delegation to a principal that holds it already: gained is what the delegation gives, not what the delegate lacks', async () => {
    // publisher holds publish_post on wp:post:* in production for status through g-publisher.
    const change = { delegate: { from: 'editor-alice', to: 'publisher', reason: 'cover', max_depth: 0, scope: { ...update(['status']), actions: ['publish_post'], risk_max: 2 } } };
    const r = await impact('editor-alice', change);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.through_change_only).toEqual(['publisher']);
    expect(r.body.gained).toEqual([{ principal: 'publisher', capabilities: [{ action: 'publish_post', resource: 'wp:post:*', environment: 'production', fields: ['status'], via: [['g-editor-alice', expect.stringMatching(/^impact-/)]] }] }]);
    // Governance sees what publisher would really gain: nothing.
    const g = await impact(GOVERNANCE_ID, change);
    expect(g.body).toMatchObject({ through_change_only: [], gained: [] });
  });

  it('revoking an edge of its own to a principal that holds some of it otherwise: lost is all the edge gave', async () => {
    await createGrant(t.h.ctx, GOVERNANCE_ID, { id: 'g-seo-titles', to: 'seo-agent-7', reason: 'titles', scope: update(['title']) });
    const r = await impact('orchestrator', { revoke: { edge: 'd-orch-seo' } });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.through_change_only).toEqual(['seo-agent-7']);
    expect(r.body.lost).toEqual([{ principal: 'seo-agent-7', capabilities: [{ action: 'update_post', resource: 'wp:post:*', environment: 'production', fields: ['meta_description', 'title'], via: [['g-orchestrator', 'd-orch-seo']] }] }]);
    const g = await impact(GOVERNANCE_ID, { revoke: { edge: 'd-orch-seo' } });
    expect(g.body).toMatchObject({ through_change_only: [], lost: [{ principal: 'seo-agent-7', capabilities: [{ fields: ['meta_description'] }] }] });
    // Printed as the CLI prints a report.
    expect(formatImpact(await analyseImpact(t.h.ctx, 'orchestrator', { revoke: { edge: 'd-orch-seo' } }))).toContain("ONLY THROUGH THE CHANGE'S OWN EDGES: what seo-agent-7 would lose or gain counts only the chains ending in the edges the change makes or ends");
    expect(formatImpact(await analyseImpact(t.h.ctx, GOVERNANCE_ID, { revoke: { edge: 'd-orch-seo' } }))).not.toContain('ONLY THROUGH');
  });

  it('its own revocation, when a delegate of its own also holds through another\'s edge that would be orphaned: FORBIDDEN', async () => {
    // orchestrator → relay-1 → seo-agent-7: relay-1's delegation is relay-1's, which the orchestrator may not read.
    await registerPrincipal(t.h.ctx, GOVERNANCE_ID, { id: 'relay-1', kind: 'agent', keys: [] });
    await createDelegation(t.h.ctx, 'orchestrator', { id: 'd-orch-relay', from: 'orchestrator', to: 'relay-1', reason: 'relay', max_depth: 1, scope: update(['canonical']) });
    await createDelegation(t.h.ctx, 'relay-1', { id: 'd-relay-seo', from: 'relay-1', to: 'seo-agent-7', reason: 'relay', max_depth: 0, scope: update(['canonical']) });
    expect((await t.h.call('orchestrator', { method: 'GET', url: '/v1/edges/d-relay-seo' })).body.code).toBe('UNKNOWN_EDGE');
    const r = await impact('orchestrator', { revoke: { principal: 'orchestrator' } });
    expect(r.status, JSON.stringify(r.body)).toBe(403);
    expect(r.body.code).toBe('FORBIDDEN');
    expect(r.raw).not.toMatch(/relay|seo-agent-7/);
    // Governance sees it all.
    const g = await impact(GOVERNANCE_ID, { revoke: { principal: 'orchestrator' } });
    expect(g.body.orphaned_delegations.map((o: { edge: { id: string } }) => o.edge.id)).toContain('d-relay-seo');
  });

  it('its own revocation, when a lease of a delegate of its own was taken through another\'s edge: FORBIDDEN', async () => {
    // relay-1 also holds canonical through spare-1 (so d-relay-seo stays valid), but seo-agent-7's
    // decision took the chain through the orchestrator (g-orchestrator sorts before g-zz-spare).
    await registerPrincipal(t.h.ctx, GOVERNANCE_ID, { id: 'spare-1', kind: 'agent', keys: [] });
    await createGrant(t.h.ctx, GOVERNANCE_ID, { id: 'g-zz-spare', to: 'spare-1', reason: 'spare', max_depth: 2, scope: update(['canonical']) });
    await createDelegation(t.h.ctx, 'spare-1', { id: 'd-spare-relay', from: 'spare-1', to: 'relay-1', reason: 'relay', max_depth: 1, scope: update(['canonical']) });
    const d = await decideOk(t.h, 'seo-agent-7', { resource: 'wp:post:55', fields: ['canonical'] });
    expect(d.body.chain).toEqual(['g-orchestrator', 'd-orch-relay', 'd-relay-seo']);
    await leaseOk(t.h, 'seo-agent-7', [d.token]);
    const g = await impact(GOVERNANCE_ID, { revoke: { principal: 'orchestrator' } });
    expect(g.body.orphaned_delegations.map((o: { edge: { id: string } }) => o.edge.id)).not.toContain('d-relay-seo');
    expect(g.body.leases_ending.map((l: { holder: string }) => l.holder)).toEqual(['seo-agent-7']);
    const r = await impact('orchestrator', { revoke: { principal: 'orchestrator' } });
    expect(r.status, JSON.stringify(r.body)).toBe(403);
    expect(r.raw).not.toMatch(/relay|seo-agent-7|wp:post:55/);
  });
});

describe('its own revocation: a neighbour reached only further below, through another\'s edge, is below it', () => {
  const t = harnessed();
  const impact = (principal: string, change: object) => t.h.call(principal, { method: 'POST', url: '/v1/impact', payload: change });

  it('publisher, which approves the orchestrator, below seo-agent-7 by seo-agent-7\'s own delegation: FORBIDDEN, as anyone else below would be', async () => {
    // seo-agent-7 may pass titles on (g-seo-passes); publisher approves the orchestrator, so is a neighbour of it.
    await createGrant(t.h.ctx, GOVERNANCE_ID, { id: 'g-seo-passes', to: 'seo-agent-7', reason: 'passes titles on', max_depth: 1, scope: update(['title']) });
    await createApproval(t.h.ctx, GOVERNANCE_ID, { id: 'a-publisher-orch', from: 'publisher', to: 'orchestrator', reason: 'reviews', scope: update(['*']) });
    const alone = await impact('orchestrator', { revoke: { principal: 'orchestrator' } });
    expect(alone.status, JSON.stringify(alone.body)).toBe(200);
    expect(alone.body.through_change_only).toEqual(['content-agent-3', 'seo-agent-7']);
    // seo-agent-7's delegation to publisher, which the orchestrator may not read (nor find on a chain of its
    // own), put publisher in the report (through_change_only, principals_examined): now it is below, as anyone would be.
    await createDelegation(t.h.ctx, 'seo-agent-7', { id: 'd-seo-publisher', from: 'seo-agent-7', to: 'publisher', reason: 'titles', max_depth: 0, scope: update(['title']) });
    expect((await t.h.call('orchestrator', { method: 'GET', url: '/v1/edges/d-seo-publisher' })).body.code).toBe('UNKNOWN_EDGE');
    const r = await impact('orchestrator', { revoke: { principal: 'orchestrator' } });
    expect([r.status, r.body.code], JSON.stringify(r.body)).toEqual([403, 'FORBIDDEN']);
    expect(r.raw).not.toMatch(/publisher|seo-agent-7/);
    const g = await impact(GOVERNANCE_ID, { revoke: { principal: 'orchestrator' } });
    expect(g.body.principals_examined).toBe(alone.body.principals_examined + 1);
  });
});

describe('a principal below the change only through edges that ended (revoked or expired) is not examined', () => {
  const t = harnessed();
  const impact = (principal: string, change: object) => t.h.call(principal, { method: 'POST', url: '/v1/impact', payload: change });

  it('the orchestrator revoking d-orch-seo, below which seo-agent-7 once delegated to publisher and content-agent-3: answered as if it never had', async () => {
    const plain = await impact('orchestrator', { revoke: { edge: 'd-orch-seo' } });
    expect(plain.status, JSON.stringify(plain.body)).toBe(200);
    await createGrant(t.h.ctx, GOVERNANCE_ID, { id: 'g-seo-passes', to: 'seo-agent-7', reason: 'passes titles on', max_depth: 1, scope: update(['title']) });
    // Revoked: publisher; expired: content-agent-3. No chain through either can count again, so the change touches neither.
    await createDelegation(t.h.ctx, 'seo-agent-7', { id: 'd-seo-publisher', from: 'seo-agent-7', to: 'publisher', reason: 'titles', max_depth: 0, scope: update(['title']) });
    await t.h.call('seo-agent-7', { method: 'DELETE', url: '/v1/edges/d-seo-publisher?reason=done' });
    const now = t.h.clock.now();
    await createDelegation(t.h.ctx, 'seo-agent-7', { id: 'd-seo-content', from: 'seo-agent-7', to: 'content-agent-3', reason: 'titles for a while', max_depth: 0, scope: update(['title']), expires_at: now + 60_000 });
    (t.h.clock as ManualClock).advance(120_000);
    const r = await impact('orchestrator', { revoke: { edge: 'd-orch-seo' } });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect({ ...r.body, computed_at: null, graph_revision: null }).toEqual({ ...plain.body, computed_at: null, graph_revision: null });
    const g = await impact(GOVERNANCE_ID, { revoke: { edge: 'd-orch-seo' } });
    expect(g.body.principals_examined).toBe(1);
  });
});

describe('its own revocation: the other end of an edge of its own that ended already is no neighbour', () => {
  const t = harnessed();
  const impact = (principal: string, change: object) => t.h.call(principal, { method: 'POST', url: '/v1/impact', payload: change });

  it('content-agent-3, whose d-orch-content the orchestrator revoked, below seo-agent-7 by seo-agent-7\'s own delegation: FORBIDDEN, as anyone else below would be', async () => {
    await t.h.call('orchestrator', { method: 'DELETE', url: '/v1/edges/d-orch-content?reason=done' });
    const alone = await impact('orchestrator', { revoke: { principal: 'orchestrator' } });
    expect(alone.status, JSON.stringify(alone.body)).toBe(200);
    expect(alone.body.through_change_only).toEqual(['seo-agent-7']);
    await createGrant(t.h.ctx, GOVERNANCE_ID, { id: 'g-seo-passes', to: 'seo-agent-7', reason: 'passes titles on', max_depth: 1, scope: update(['title']) });
    await createDelegation(t.h.ctx, 'seo-agent-7', { id: 'd-seo-content', from: 'seo-agent-7', to: 'content-agent-3', reason: 'titles', max_depth: 0, scope: update(['title']) });
    expect((await t.h.call('orchestrator', { method: 'GET', url: '/v1/edges/d-seo-content' })).body.code).toBe('UNKNOWN_EDGE');
    const r = await impact('orchestrator', { revoke: { principal: 'orchestrator' } });
    expect([r.status, r.body.code], JSON.stringify(r.body)).toEqual([403, 'FORBIDDEN']);
    expect(r.raw).not.toMatch(/content-agent-3|seo-agent-7/);
  });
});

describe('its own revocation: an orphan it may read, from a principal it may ask about, into one it knows only as a neighbour', () => {
  const t = harnessed();
  const impact = (principal: string, change: object) => t.h.call(principal, { method: 'POST', url: '/v1/impact', payload: change });

  it('relay-1\'s delegation to seo-agent-7, the orchestrator holding audit_read on relay-1: reported, as GET /v1/edges/:id reads it', async () => {
    await registerPrincipal(t.h.ctx, GOVERNANCE_ID, { id: 'relay-1', kind: 'agent', keys: [] });
    await createGrant(t.h.ctx, GOVERNANCE_ID, { id: 'g-orch-reads-relay', to: 'orchestrator', reason: 'answers for relay-1', max_depth: 0, scope: { actions: ['audit_read'], resources: ['audit:principal:relay-1'], environments: ['*'], fields: ['*'], risk_max: 0 } });
    await createDelegation(t.h.ctx, 'orchestrator', { id: 'd-orch-relay', from: 'orchestrator', to: 'relay-1', reason: 'relay', max_depth: 1, scope: update(['canonical']) });
    await createDelegation(t.h.ctx, 'relay-1', { id: 'd-relay-seo', from: 'relay-1', to: 'seo-agent-7', reason: 'relay', max_depth: 0, scope: update(['canonical']) });
    expect((await t.h.call('orchestrator', { method: 'GET', url: '/v1/edges/d-relay-seo' })).status).toBe(200);
    const r = await impact('orchestrator', { revoke: { principal: 'orchestrator' } });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.orphaned_delegations.map((o: { edge: { id: string } }) => o.edge.id)).toContain('d-relay-seo');
  });
});
