/**
 * POST /v1/impact tells a caller no more than it may know: nothing below an edge that gives no capability.
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
