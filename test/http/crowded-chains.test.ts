/**
 * A principal's authority cannot be hidden by crowding: anyone who may delegate to it can add many
 * narrow delegations whose ids sort first (`a-…`), and the views of what it holds — capabilities,
 * AuthZEN resource search, impact analysis, the delegation check — must still see its real chain
 * (g-orchestrator > d-orch-content), or say plainly that they are cut. Decisions never were affected.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ManualClock } from '../../src/clock.js';
import { GOVERNANCE_ID } from '../../src/graph/model.js';
import { analyseImpact, capabilitiesIn, registerPrincipal } from '../../src/service/index.js';
import { commitGraphChange } from '../../src/service/graph-changes.js';
import { startHarness, type Harness } from '../support/harness.js';

let h: Harness;
// The decoys come from one delegator, which WRIT_MAX_DELEGATIONS_BETWEEN bounds (16 by default); these
// views must hold however the bound is set (and many delegators could add as many), so it is raised here.
beforeEach(async () => {
  h = await startHarness({ config: { maxDelegationsBetween: 100 } });
});
afterEach(async () => h?.close());

const DECOYS = 20;

/** `count` narrow delegations orchestrator → `to`, ids sorting before every example edge. */
async function decoys(to: string, count: number, scope: (i: number) => Record<string, unknown>): Promise<void> {
  for (let i = 0; i < count; i++) {
    const r = await h.call('orchestrator', {
      method: 'POST', url: '/v1/delegations',
      payload: { id: `a-${String(i).padStart(2, '0')}`, from: 'orchestrator', to, reason: 'narrow', max_depth: 0, expires_at: new Date(h.clock.now() + 3_600_000).toISOString(), scope: scope(i) },
    });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
  }
}
const readOne = (i: number) => ({ actions: ['read_post'], resources: [`wp:post:${90000 + i}`], environments: ['production'], fields: ['body'], risk_max: 0 });
const chainIds = (caps: { chain: { id: string }[] }[]) => caps.map((c) => c.chain.map((e) => e.id).join('>'));

describe('narrow delegations sorting first', () => {
  beforeEach(() => decoys('content-agent-3', DECOYS, readOne));

  it('capabilities still list the wide chain, and say the list is whole', async () => {
    const r = await h.call('content-agent-3', { method: 'GET', url: '/v1/principals/content-agent-3/capabilities' });
    expect(r.status).toBe(200);
    expect(r.body.truncated).toBe(false);
    expect(chainIds(r.body.capabilities)).toContain('g-orchestrator>d-orch-content');
    expect(r.body.capabilities).toHaveLength(DECOYS + 1);
  });

  it('AuthZEN resource search still finds wp:post:* for update_post on body', async () => {
    const r = await h.call('content-agent-3', {
      method: 'POST', url: '/access/v1/search/resource',
      payload: { subject: { type: 'agent', id: 'content-agent-3' }, action: { name: 'update_post' }, resource: { type: 'wp:post', properties: { environment: 'production', fields: ['body'] } } },
    });
    expect(r.status).toBe(200);
    expect(r.body).toEqual({
      page: { next_token: '', count: 1, total: 1 },
      results: [{ type: 'wp:post', id: 'wp:post:*', properties: { chain: ['g-orchestrator', 'd-orch-content'] } }],
      context: { truncated: false },
    });
    const decision = await h.call('content-agent-3', { method: 'POST', url: '/v1/decisions', payload: { action: 'update_post', resource: 'wp:post:31337', environment: 'production', fields: ['body'] } });
    expect(decision.body.allow).toBe(true);
  });

  it('impact analysis of revoking d-orch-content reports what the agent loses, exactly', async () => {
    const r = await h.call(GOVERNANCE_ID, { method: 'POST', url: '/v1/impact', payload: { revoke: { edge: 'd-orch-content' } } });
    expect(r.status).toBe(200);
    expect(r.body.exact).toBe(true);
    expect(r.body.inexact_principals).toEqual([]);
    expect(r.body.lost).toEqual([{
      principal: 'content-agent-3',
      capabilities: [{ action: 'update_post', resource: 'wp:post:*', environment: 'production', fields: ['body', 'tags'], via: [['g-orchestrator', 'd-orch-content']] }],
    }]);
  });
});

describe('past the chains judged for one principal', () => {
  const now = () => h.clock.now();

  it('chains covered by a valid chain are dropped before the limit, so decoys inside the wide scope cannot crowd it out', async () => {
    await decoys('content-agent-3', DECOYS, (i) => ({ actions: ['update_post'], resources: [`wp:post:${90000 + i}`], environments: ['production'], fields: ['body'], risk_max: 1 }));
    const r = capabilitiesIn(h.ctx, await h.ctx.graph.current(), 'content-agent-3', now(), { limit: 4 });
    expect(r.truncated).toBe(false);
    expect(chainIds(r.capabilities)).toEqual(['g-orchestrator>d-orch-content']);
  });

  it('distinct narrow chains past the limit: the wide chain is judged first and the answer says it is cut', async () => {
    await decoys('content-agent-3', DECOYS, readOne);
    const r = capabilitiesIn(h.ctx, await h.ctx.graph.current(), 'content-agent-3', now(), { limit: 4 });
    expect(r.truncated).toBe(true);
    expect(r.capabilities).toHaveLength(4);
    expect(chainIds(r.capabilities)).toContain('g-orchestrator>d-orch-content');
    // in the resolver's order (shorter, then by edge id), as an uncut list is
    expect(chainIds(r.capabilities)).toEqual(['g-orchestrator>a-00', 'g-orchestrator>a-01', 'g-orchestrator>a-02', 'g-orchestrator>d-orch-content']);
  });

  it('dead chains past the limit (expired delegations) cut nothing the principal holds: not truncated', async () => {
    const before = capabilitiesIn(h.ctx, await h.ctx.graph.current(), 'content-agent-3', now());
    expect(before.truncated).toBe(false);
    for (let i = 0; i < 6; i++) {
      const r = await h.call('orchestrator', {
        method: 'POST', url: '/v1/delegations',
        payload: { id: `a-daily-${i}`, from: 'orchestrator', to: 'content-agent-3', reason: 'one day', max_depth: 0, expires_at: new Date(now() + 60_000).toISOString(), scope: readOne(100 + i) },
      });
      expect(r.status, JSON.stringify(r.body)).toBe(201);
    }
    (h.clock as ManualClock).advance(120_000);
    // A limit that the live chains fill, with the 6 dead ones beyond it.
    const r = capabilitiesIn(h.ctx, await h.ctx.graph.current(), 'content-agent-3', now(), { limit: before.capabilities.length });
    expect(r.truncated).toBe(false);
    expect(chainIds(r.capabilities)).toEqual(chainIds(before.capabilities));
  });

  it('a covering chain that is not valid drops nothing', async () => {
    await decoys('content-agent-3', DECOYS, (i) => ({ actions: ['update_post'], resources: [`wp:post:${90000 + i}`], environments: ['production'], fields: ['body'], risk_max: 1 }));
    const revoked = await h.call('orchestrator', { method: 'DELETE', url: '/v1/edges/d-orch-content', payload: { reason: 'test' } });
    expect(revoked.status, JSON.stringify(revoked.body)).toBe(200);
    const r = capabilitiesIn(h.ctx, await h.ctx.graph.current(), 'content-agent-3', now(), { limit: 4 });
    expect(r.truncated).toBe(true);
    expect(r.capabilities.filter((c) => c.valid)).toHaveLength(4);
  });
});

describe('impact analysis that cannot be exact', () => {
  it('says so and names the principal, rather than answering a short lost list', async () => {
    // orchestrator → mid 20 times (every post), mid → leaf 20 times (one post each): 400 valid chains to
    // leaf, more than are read for one principal. (Paths whose first edge does not cover the second are
    // no chains: decide-mode resolution drops them, so they would not make it inexact.)
    for (const id of ['mid', 'leaf']) await registerPrincipal(h.ctx, GOVERNANCE_ID, { id, kind: 'agent', keys: [] });
    const scope = (i: number) => ({ actions: ['update_post'], resources: [i < 0 ? 'wp:post:*' : `wp:post:${i}`], environments: ['production'], fields: ['body'], constraints: { risk_max: 1 } });
    const edge = (id: string, from: string, to: string, i: number, max_depth: number, now: number) =>
      ({ type: 'edge.created' as const, edge: { id, kind: 'delegate' as const, from, to, scope: scope(i), max_depth, reason: 'many', creator: from, created_at: now, not_before: null, expires_at: null } });
    await commitGraphChange(h.ctx, GOVERNANCE_ID, (_graph, now) => [
      ...Array.from({ length: 20 }, (_, i) => edge(`om-${i}`, 'orchestrator', 'mid', -1, 1, now)),
      ...Array.from({ length: 20 }, (_, i) => edge(`ml-${i}`, 'mid', 'leaf', i, 0, now)),
    ]);
    expect(capabilitiesIn(h.ctx, await h.ctx.graph.current(), 'leaf', h.clock.now()).truncated).toBe(true);
    const r = await analyseImpact(h.ctx, GOVERNANCE_ID, { revoke: { edge: 'om-3' } });
    expect(r.exact).toBe(false);
    expect(r.inexact_principals).toEqual(['leaf']);
  });
});

describe('the delegation check and orphans', () => {
  it('a delegator crowded by narrow delegations may still delegate from its wide one, which is no orphan', async () => {
    await registerPrincipal(h.ctx, GOVERNANCE_ID, { id: 'content-lead', kind: 'agent', keys: [] });
    const wide = await h.call('orchestrator', {
      method: 'POST', url: '/v1/delegations',
      payload: { id: 'z-lead', from: 'orchestrator', to: 'content-lead', reason: 'leads content', max_depth: 1, scope: { actions: ['update_post'], resources: ['wp:post:*'], environments: ['production'], fields: ['body'], risk_max: 1 } },
    });
    expect(wide.status, JSON.stringify(wide.body)).toBe(201);
    await decoys('content-lead', DECOYS, readOne);
    const sub = await h.call(GOVERNANCE_ID, {
      method: 'POST', url: '/v1/delegations',
      payload: { id: 'lead-agent', from: 'content-lead', to: 'content-agent-3', reason: 'one post', max_depth: 0, scope: { actions: ['update_post'], resources: ['wp:post:5'], environments: ['production'], fields: ['body'], risk_max: 1 } },
    });
    expect(sub.status, JSON.stringify(sub.body)).toBe(201);
    const orphans = await h.call(GOVERNANCE_ID, { method: 'GET', url: '/v1/audit/orphans' });
    expect(orphans.status).toBe(200);
    expect(JSON.stringify(orphans.body)).not.toContain('lead-agent');
  });
});
