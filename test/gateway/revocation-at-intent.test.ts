import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { performAction } from '../../src/service/index.js';
import { decideOk, upstreamGet } from '../support/agent.js';
import { startHarness, type Harness } from '../support/harness.js';
import { replicaBehind } from '../support/replica-behind.js';

/**
 * The hard rule at the write: a write never lands through an edge or principal revoked before its
 * intent commits, even when the process that takes the write has not folded the revocation into its
 * in-memory graph yet (another replica revoked it a moment ago). The intent's own transaction reads
 * the graph events after the decision's revision from the store and refuses.
 */
let h: Harness;
beforeEach(async () => {
  h = await startHarness({ upstream: true });
});
afterEach(async () => h?.close());


const write = { action: 'update_post', resource: 'wp:post:1024', fields: ['meta_description'], payload: { meta_description: 'late' }, expected_version: 0 };

describe('revocation is checked against the store in the intent transaction', () => {
  it.each([
    ['an edge of the chain', 'DELETE', '/v1/edges/d-orch-seo', /edge d-orch-seo/],
    ['a principal on the chain', 'DELETE', '/v1/principals/orchestrator', /principal orchestrator/],
  ])('%s revoked after the decision refuses the write on a replica that has not seen it', async (_what, method, url, message) => {
    const d = await decideOk(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['meta_description'] });
    const stale = await replicaBehind(h.ctx, d.body.graph_revision);
    const revoked = await h.call('governance', { method: method as 'DELETE', url, payload: { reason: 'compromised' } });
    expect(revoked.status, JSON.stringify(revoked.body)).toBe(200);
    // The stale replica's own graph still shows the chain live.
    expect((await stale.graph.current()).revision).toBe(d.body.graph_revision);

    const refused = await performAction(stale, 'seo-agent-7', write, { decision: d.token }).catch((e: unknown) => e);
    expect(refused).toMatchObject({ code: 'AUTHORITY_REVOKED', message: expect.stringMatching(message) });
    const receiptId = (refused as { details: { receipt_id: string } }).details.receipt_id;
    expect(await h.ctx.receipts.get(receiptId)).toMatchObject({ status: 'REJECTED', error: { code: 'AUTHORITY_REVOKED' } });
    expect((await upstreamGet(h, '/writes')).total).toBe(0);
    // The decision was not spent by the refused write: the refusal is on record, nothing else changed.
    expect(await h.ctx.store.read((tx) => tx.singleUse.isSpent('decision', d.body.decision_id, h.clock.now()))).toBe(false);
  });

  it('a revocation of an unrelated edge does not refuse the write', async () => {
    const d = await decideOk(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['meta_description'] });
    const stale = await replicaBehind(h.ctx, d.body.graph_revision);
    const other = await h.call('governance', { method: 'DELETE', url: '/v1/edges/g-editor-alice', payload: { reason: 'unrelated' } });
    expect(other.status, JSON.stringify(other.body)).toBe(200);
    const out = await performAction(stale, 'seo-agent-7', write, { decision: d.token });
    expect(out.receipt.status).toBe('COMPLETED');
  });
});
