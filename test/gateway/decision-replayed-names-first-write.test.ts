import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { hashOf } from '../../src/audit/hash-chain.js';
import type { StoredEntry } from '../../src/audit/index.js';
import { dropGuards } from '../audit/helpers.js';
import { act, decideLeaseWrite, decideOk, leaseOk } from '../support/agent.js';
import { startHarness, type Harness } from '../support/harness.js';

/**
 * A decision used again (DECISION_REPLAYED) names the receipt of the write that used it, in the
 * problem's `used_by_receipt_id` and message and in the refusal's own receipt, so an agent or an auditor
 * goes straight to it. Only the caller's own receipts are searched (a decision is bound to its principal).
 */
describe.each(['sqlite', 'postgres'] as const)('%s: DECISION_REPLAYED names the write that used the decision', (engine) => {
  let h: Harness;
  beforeEach(async () => {
    h = await startHarness({ upstream: true, engine });
  });
  afterEach(async () => h?.close());

  const titleWrite = { resource: 'wp:post:1024', fields: ['title'], payload: { title: 'x' }, expected_version: 0 };

  it('in the problem and in the refusal\'s receipt, past earlier refusals that presented the decision', async () => {
    const d = await decideOk(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['title'] });
    // A refusal before the write presented the decision too (it spent nothing): not the one named.
    expect((await act(h, 'seo-agent-7', titleWrite, { decision: d.token })).body.code).toBe('LEASE_REQUIRED');
    const lease = await leaseOk(h, 'seo-agent-7', [d.token]);
    const first = await act(h, 'seo-agent-7', titleWrite, { decision: d.token, lease });
    expect(first.status, JSON.stringify(first.body)).toBe(201);
    const used = first.body.receipt.receipt_id;

    const again = await act(h, 'seo-agent-7', { ...titleWrite, expected_version: 1 }, { decision: d.token, lease });
    expect(again.status, JSON.stringify(again.body)).toBe(403);
    expect(again.body).toMatchObject({ code: 'DECISION_REPLAYED', used_by_receipt_id: used });
    expect(again.body.detail).toContain(`receipt ${used}`);
    expect(again.body.receipt_id).not.toBe(used);
    const refusal = await h.call('seo-agent-7', { method: 'GET', url: `/v1/receipts/${again.body.receipt_id}` });
    expect(refusal.body.receipt).toMatchObject({ status: 'REJECTED', decision_id: d.body.decision_id, error: { code: 'DECISION_REPLAYED' } });
    expect(refusal.body.receipt.error.message).toContain(`receipt ${used}`);
    // A field of the refusal, in its hashed entry: nothing has to read it out of the message.
    expect(refusal.body.receipt.error.used_by_receipt_id).toBe(used);
    const why = await h.call('seo-agent-7', { method: 'GET', url: `/v1/receipts/${again.body.receipt_id}/why` });
    expect(why.body.receipt.error).toEqual({ code: 'DECISION_REPLAYED', message: refusal.body.receipt.error.message, used_by_receipt_id: used });
    const listed = await h.call('seo-agent-7', { method: 'GET', url: `/v1/receipts?decision_id=${d.body.decision_id}` });
    expect(listed.body.receipts.find((r: { receipt_id: string }) => r.receipt_id === again.body.receipt_id).error.used_by_receipt_id).toBe(used);
    // No other refusal carries it (the LEASE_REQUIRED before the write).
    expect(listed.body.receipts.filter((r: { error: { used_by_receipt_id?: string } | null }) => r.error?.used_by_receipt_id !== undefined)).toHaveLength(1);
    // A refusal recorded as Writ did before it kept the field (the id in the message only) reads back as it was,
    // and the log verifies with both.
    const older = await h.ctx.store.readWrite((tx) => h.ctx.receipts.recordRejection({
      principal: 'seo-agent-7', action: 'update_post', resource_key: 'wp:post:1024', fields: ['title'], decision_id: d.body.decision_id,
      error: { code: 'DECISION_REPLAYED', message: `decision ${String(d.body.decision_id)} was already used for a write, receipt ${String(used)}; a decision authorizes one write` },
    }, tx));
    const olderRead = await h.call('seo-agent-7', { method: 'GET', url: `/v1/receipts/${older.receipt_id}` });
    expect(olderRead.body.receipt.error).toEqual({ code: 'DECISION_REPLAYED', message: expect.stringContaining(`receipt ${used}`) });
    const verify = await h.call('governance', { method: 'GET', url: '/v1/audit/verify' });
    expect(verify.body, JSON.stringify(verify.body)).toMatchObject({ ok: true });
    // The receipt named is the caller's to read.
    const named = await h.call('seo-agent-7', { method: 'GET', url: `/v1/receipts/${used}` });
    expect(named.body.receipt).toMatchObject({ status: 'COMPLETED', decision_id: d.body.decision_id });
  });

  // On SQLite only (the test rewrites the file's rows): registered there alone, so that no run reports it skipped.
  if (engine === 'sqlite') it('the write\'s receipt damaged in the store: still DECISION_REPLAYED (recorded, naming nothing), not the damage', async () => {
    const { decision: d, lease, answer: first } = await decideLeaseWrite(h, 'seo-agent-7', titleWrite);
    expect(first.status, JSON.stringify(first.body)).toBe(201);
    // Its intent rewritten so that it is no longer JSON, and its chain re-hashed (test/cli/damaged-receipt-entry.test.ts).
    dropGuards(h.db);
    const intent = h.db.prepare("SELECT * FROM receipt_entries WHERE receipt_id = ? AND kind = 'intent'").get(first.body.receipt.receipt_id) as StoredEntry;
    let prev = intent.prev_hash;
    for (const e of h.db.prepare('SELECT * FROM receipt_entries WHERE chain = ? AND pos >= ? ORDER BY pos').all(intent.chain, intent.pos) as StoredEntry[]) {
      const next = { ...e, body: e.seq === intent.seq ? e.body.replace('"expected_version":0,', '"expected_version":,') : e.body, prev_hash: prev };
      prev = hashOf(next);
      h.db.prepare('UPDATE receipt_entries SET body = ?, prev_hash = ?, hash = ? WHERE seq = ?').run(next.body, next.prev_hash, prev, e.seq);
    }
    const again = await act(h, 'seo-agent-7', { ...titleWrite, expected_version: 1 }, { decision: d.token, lease });
    expect(again.status, JSON.stringify(again.body)).toBe(403);
    expect(again.body.code).toBe('DECISION_REPLAYED');
    expect(again.body.used_by_receipt_id).toBeUndefined();
    expect(again.body.receipt_id).toMatch(/^rcpt_/);
    const refusal = await h.call('seo-agent-7', { method: 'GET', url: `/v1/receipts/${again.body.receipt_id}` });
    expect(refusal.body.receipt.error).toEqual({ code: 'DECISION_REPLAYED', message: again.body.detail });
  });
});
