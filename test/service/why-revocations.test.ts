import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatWhy } from '../../src/cli/format.js';
import { ManualClock } from '../../src/clock.js';
import { GOVERNANCE_ID } from '../../src/graph/model.js';
import { registerPrincipal, revocationOf, revokeEdge, whyReceipt } from '../../src/service/index.js';
import { decideLeaseWrite } from '../support/agent.js';
import { startHarness, type Harness } from '../support/harness.js';
import { WIRE_TIME } from '../support/wire-times.js';

let h: Harness;
let clock: ManualClock;
let receiptId: string;
beforeAll(async () => {
  clock = new ManualClock(Date.UTC(2026, 5, 1, 12, 0, 0));
  h = await startHarness({ upstream: true, clock });
  const { answer: ok } = await decideLeaseWrite(h, 'seo-agent-7', { resource: 'wp:post:1024', payload: { title: 'Audited' }, expected_version: 0 });
  receiptId = ok.body.receipt.receipt_id;
});
afterAll(async () => h?.close());

describe('writ why says who revoked what of the chain since the write, when, and why', () => {
  it('an edge its delegator revoked and a principal governance revoked: by whom and the reason, in the report, the API answer and the text', async () => {
    expect((await whyReceipt(h.ctx, receiptId)).chain.map((l) => l.now)).toEqual([null, null]);
    clock.advance(1_000);
    expect((await h.call('orchestrator', { method: 'DELETE', url: '/v1/edges/d-orch-seo', payload: { reason: 'the SEO agent is retired' } })).status).toBe(200);
    const edgeRevokedAt = clock.now();
    const edgeRevision = (await h.ctx.graph.current()).revision;
    clock.advance(1_000);
    expect((await h.call('governance', { method: 'DELETE', url: '/v1/principals/seo-agent-7', payload: { reason: 'its key leaked' } })).status).toBe(200);

    const why = await whyReceipt(h.ctx, receiptId);
    expect(why.chain.map((l) => l.now)).toEqual([null, { revoked_at: edgeRevokedAt, graph_revision: edgeRevision, revoked_by: 'orchestrator', reason: 'the SEO agent is retired' }]);
    expect(why.principals_revoked).toEqual([{ principal: 'seo-agent-7', revoked_at: edgeRevokedAt + 1_000, graph_revision: edgeRevision + 1, revoked_by: GOVERNANCE_ID, reason: 'its key leaked' }]);

    const answer = await h.call('governance', { method: 'GET', url: `/v1/receipts/${receiptId}/why` });
    expect(answer.status).toBe(200);
    expect(answer.body.chain[1].now).toEqual({ revoked_at: new Date(edgeRevokedAt).toISOString(), graph_revision: edgeRevision, revoked_by: 'orchestrator', reason: 'the SEO agent is retired' });
    expect(answer.body.principals_revoked).toEqual([{ principal: 'seo-agent-7', revoked_at: expect.stringMatching(WIRE_TIME), graph_revision: edgeRevision + 1, revoked_by: GOVERNANCE_ID, reason: 'its key leaked' }]);

    const text = formatWhy(why).split('\n');
    expect(text).toContain(`       REVOKED since: at ${new Date(edgeRevokedAt).toISOString()} (graph revision ${edgeRevision}) by orchestrator: "the SEO agent is retired"`);
    expect(text).toContain(`  principal seo-agent-7 REVOKED since: at ${new Date(edgeRevokedAt + 1_000).toISOString()} (graph revision ${edgeRevision + 1}) by governance: "its key leaked"`);
  });

  it('finds the revocation also when a later change was recorded at an earlier time (a replica whose clock ran behind)', async () => {
    await registerPrincipal(h.ctx, GOVERNANCE_ID, { id: 'skew-agent', kind: 'agent', keys: [] });
    const before = (await h.ctx.graph.current()).revision;
    clock.advance(60_000);
    await h.call('governance', { method: 'POST', url: '/v1/delegations', payload: { id: 'd-skew', from: 'orchestrator', to: 'skew-agent', reason: 'r', max_depth: 0, scope: { actions: ['update_post'], resources: ['wp:post:*'], environments: ['production'], fields: ['title'], risk_max: 1 } } });
    clock.advance(1_000);
    const revokedAt = clock.now();
    const { graph_revision: skewRevision } = await revokeEdge(h.ctx, GOVERNANCE_ID, 'd-skew', 'skewed clocks');
    clock.set(revokedAt - 5_000); // the next change is recorded 5 s before the revocation
    await registerPrincipal(h.ctx, GOVERNANCE_ID, { id: 'skew-agent-2', kind: 'agent', keys: [] });
    clock.set(revokedAt + 10_000);
    expect(await revocationOf(h.ctx, { edge: 'd-skew' }, revokedAt, before)).toEqual({ revoked_at: revokedAt, graph_revision: skewRevision, revoked_by: GOVERNANCE_ID, reason: 'skewed clocks' });
  });
});
