import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { commitGraphChange } from '../../src/service/graph-changes.js';
import { forOneOperation } from '../../src/service/index.js';
import { startHarness, type Harness } from '../support/harness.js';

let h: Harness;
beforeEach(async () => {
  h = await startHarness();
});
afterEach(async () => h?.close());

const askTitle = (principal = 'seo-agent-7') =>
  h.call(principal, { method: 'POST', url: '/v1/decisions', payload: { action: 'update_post', resource: 'wp:post:7', environment: 'production', fields: ['title'] } });

describe('revocation propagates down the chain', () => {
  it('revoking the middle edge denies every decision through it, naming the edge', async () => {
    expect((await askTitle()).body.allow).toBe(true);
    const rev = await h.call('governance', { method: 'DELETE', url: '/v1/edges/d-orch-seo', payload: { reason: 'agent misbehaved' } });
    expect(rev.status).toBe(200);
    expect(rev.body.edge.revoked_at).not.toBeNull();
    const r = await askTitle();
    expect(r.body.allow).toBe(false);
    expect(r.body.token).toBeNull();
    expect(r.body.reasons.join('\n')).toMatch(/d-orch-seo.*revoked/);
  });

  it('revoking the root grant denies the delegate too', async () => {
    await h.call('governance', { method: 'DELETE', url: '/v1/edges/g-orchestrator' });
    const r = await askTitle();
    expect(r.body.allow).toBe(false);
    expect(r.body.reasons.join('\n')).toMatch(/g-orchestrator.*revoked/);
  });

  it('revoking a principal in the middle denies chains through it', async () => {
    const r0 = await h.call('governance', { method: 'DELETE', url: '/v1/principals/orchestrator', payload: { reason: 'compromised' } });
    expect(r0.status).toBe(200);
    const r = await askTitle();
    expect(r.body.allow).toBe(false);
    expect(r.body.reasons.join('\n')).toMatch(/orchestrator/);
  });

  it('an independent chain to the same principal still allows', async () => {
    // A second, independent chain: editor-alice re-delegates title rights to seo-agent-7.
    const d = await h.call('editor-alice', {
      method: 'POST', url: '/v1/delegations',
      payload: { id: 'd-alice-seo', from: 'editor-alice', to: 'seo-agent-7', reason: 'backup path', max_depth: 0, scope: { actions: ['update_post'], resources: ['wp:post:*'], environments: ['production'], fields: ['title'], risk_max: 1 } },
    });
    expect(d.status).toBe(201);
    await h.call('governance', { method: 'DELETE', url: '/v1/edges/d-orch-seo' });
    const r = await askTitle();
    expect(r.body.allow).toBe(true);
    expect(r.body.chain).toEqual(['g-editor-alice', 'd-alice-seo']);
  });

  it('only governance, the creator or the delegator may revoke (the holder may read it, so is told FORBIDDEN; another is told there is no such edge)', async () => {
    const r = await h.call('content-agent-3', { method: 'DELETE', url: '/v1/edges/d-orch-content' });
    expect(r.status).toBe(403);
    expect(r.body.code).toBe('FORBIDDEN');
    const stranger = await h.call('seo-agent-7', { method: 'DELETE', url: '/v1/edges/d-orch-content' });
    expect([stranger.status, stranger.body.code]).toEqual([404, 'UNKNOWN_EDGE']);
    const byDelegator = await h.call('orchestrator', { method: 'DELETE', url: '/v1/edges/d-orch-content' });
    expect(byDelegator.status).toBe(200);
  });

  it('revoking an unknown edge is UNKNOWN_EDGE and moves nothing', async () => {
    const before = (await h.ctx.graph.current()).revision;
    const r = await h.call('governance', { method: 'DELETE', url: '/v1/edges/nope' });
    expect(r.status).toBe(404);
    expect(r.body.code).toBe('UNKNOWN_EDGE');
    expect((await h.ctx.graph.current()).revision).toBe(before);
  });
});

describe('one look at the graph per request', () => {
  it('a decision, a lease acquisition and its release each ask the graph once, for the caller\'s check and the use case together; the next request asks again', async () => {
    const current = vi.spyOn(h.ctx.graph, 'current');
    const d = await askTitle();
    expect(d.body.allow).toBe(true);
    expect(current).toHaveBeenCalledTimes(1);
    current.mockClear();
    const lease = await h.call('seo-agent-7', { method: 'POST', url: '/v1/leases', payload: { decisions: [d.body.token] } });
    expect(lease.status).toBe(201);
    expect(current).toHaveBeenCalledTimes(1);
    current.mockClear();
    const released = await h.call('seo-agent-7', { method: 'DELETE', url: `/v1/leases/${lease.body.lease_id}`, payload: { token: lease.body.token } });
    expect(released.status).toBe(200);
    expect(current).toHaveBeenCalledTimes(1);
    // What was revoked in between is seen by the next request.
    await h.call('governance', { method: 'DELETE', url: '/v1/edges/d-orch-seo' });
    expect((await askTitle()).body.allow).toBe(false);
  });

  it('an acquisition that may wait asks again once its assertion\'s spend has committed (that commit may have waited)', async () => {
    const d = await askTitle();
    const current = vi.spyOn(h.ctx.graph, 'current');
    const lease = await h.call('seo-agent-7', { method: 'POST', url: '/v1/leases', payload: { decisions: [d.body.token], wait_ms: 1000 } });
    expect(lease.status).toBe(201);
    expect(current).toHaveBeenCalledTimes(2);
  });

  it('an operation that changes the graph retries on the newer graph when another writer moved the head, and then sees its own change', async () => {
    const op = forOneOperation(h.ctx);
    const before = (await op.graph.current()).revision;
    // Another process moves the head after this operation's first look (straight to the store: this
    // process's live graph has not seen it).
    await h.ctx.store.readWrite((tx) => tx.graph.append([{ type: 'edge.revoked', id: 'd-orch-content', at: h.clock.now(), reason: 'elsewhere' }], 'governance', h.clock.now(), before));
    let plans = 0;
    const revision = await commitGraphChange(op, 'governance', (graph, now) => {
      plans += 1;
      return [{ type: 'principal.created', principal: { id: 'late-agent', kind: 'agent', priority_class: 'agent', priority: 10, attributes: {}, keys: [], created_at: now } }];
    });
    expect(plans).toBe(2);
    expect(revision).toBe(before + 2);
    const graph = await op.graph.current();
    expect(graph.revision).toBe(revision);
    expect(graph.principal('late-agent')).toBeDefined();
  });
});
