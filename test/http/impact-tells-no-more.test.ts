/**
 * POST /v1/impact tells a caller no more than it may know: not whether an edge id it may not read is
 * taken, nothing below an edge that gives no capability.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GOVERNANCE_ID } from '../../src/graph/model.js';
import { createApproval, createPreemption } from '../../src/service/index.js';
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

describe('delegate.id: an id taken by an edge the caller may not read is answered as a free one', () => {
  const t = harnessed();
  const impact = (principal: string, change: object) => t.h.call(principal, { method: 'POST', url: '/v1/impact', payload: change });
  const toPublisher = (id: string, scope = update(['title'])) => ({ delegate: { id, from: 'editor-alice', to: 'publisher', reason: 'cover', max_depth: 0, scope } });

  it('d-orch-seo (orchestrator → seo-agent-7), which editor-alice may not read: the same report as for a free id, naming the id asked', async () => {
    expect((await t.h.call('editor-alice', { method: 'GET', url: '/v1/edges/d-orch-seo' })).body.code).toBe('UNKNOWN_EDGE');
    const taken = await impact('editor-alice', toPublisher('d-orch-seo'));
    const free = await impact('editor-alice', toPublisher('d-free-1'));
    expect(free.status, JSON.stringify(free.body)).toBe(200);
    expect(taken.status, JSON.stringify(taken.body)).toBe(200);
    expect(JSON.parse(taken.raw.replaceAll('d-orch-seo', 'ID'))).toEqual(JSON.parse(free.raw.replaceAll('d-free-1', 'ID')));
    expect(taken.body.change.delegate.id).toBe('d-orch-seo');
    expect(taken.body.gained[0].capabilities[0].via).toEqual([['g-editor-alice', 'd-orch-seo']]);
    expect(taken.raw).not.toMatch(/impact-/);
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
