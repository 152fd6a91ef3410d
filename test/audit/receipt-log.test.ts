import { describe, expect, it } from 'vitest';
import { isWritError } from '../../src/errors.js';
import { requestHash } from '../../src/audit/index.js';
import { intent, newLog } from './helpers.js';

describe('receipt log', () => {
  it('records an intent as PENDING with every field of the decision, then completes it', async () => {
    const { log, clock } = newLog();
    const sent = intent({ idempotency_key: 'k1' });
    const pending = await log.recordIntent(sent);
    expect(pending).toMatchObject({
      ...sent,
      receipt_id: 'rcpt_1',
      coordination_id: 'rcpt_1',
      status: 'PENDING',
      final_version: null,
      created_at: clock.now(),
      completed_at: null,
    });
    expect(pending.entries).toHaveLength(1);
    clock.advance(25);
    const done = await log.complete('rcpt_1', { status: 'COMPLETED', final_version: 32, upstream_status: 200 });
    expect(done).toMatchObject({ status: 'COMPLETED', final_version: 32, upstream_status: 200, completed_at: pending.created_at + 25, reconciled: false });
    expect(done.entries.map((e) => e.kind)).toEqual(['intent', 'completed']);
    expect(done.entries[1]!.prev_hash).toBe(done.entries[0]!.hash);
    expect(await log.get('rcpt_1')).toEqual(done);
  });

  it('records a failure with its error and conflicts', async () => {
    const { log } = newLog();
    const r = await log.recordIntent(intent());
    const failed = await log.complete(r.receipt_id, {
      status: 'FAILED',
      upstream_status: 412,
      error: { code: 'VERSION_CONFLICT', message: 'upstream is at 33' },
      conflicts: [{ kind: 'version', expected: 31, actual: 33 }],
    });
    expect(failed).toMatchObject({ status: 'FAILED', upstream_status: 412, error: { code: 'VERSION_CONFLICT' }, conflicts: [{ kind: 'version', actual: 33 }] });
  });

  it('lets the first settlement win: a later one writes nothing and says so', async () => {
    const { log } = newLog();
    const r = await log.recordIntent(intent());
    await log.reconcile(r.receipt_id, { status: 'COMPLETED', final_version: 32 });
    const late = await log.complete(r.receipt_id, { status: 'FAILED', error: { code: 'UPSTREAM_TIMEOUT', message: 'late' } });
    expect(late).toMatchObject({ status: 'COMPLETED', reconciled: true, final_version: 32, replayed: true });
    expect(late.entries).toHaveLength(2);
    expect(await log.verifyChain()).toMatchObject({ ok: true, entries: 2 });
  });

  it('refuses to settle an unknown receipt', async () => {
    const { log } = newLog();
    await expect((async () => await log.complete('rcpt_nope', { status: 'COMPLETED' }))()).rejects.toThrow(expect.objectContaining({ code: 'NOT_FOUND' }));
    expect(await log.get('rcpt_nope')).toBeNull();
  });

  it('records a rejection as one REJECTED entry, in the chain', async () => {
    const { log } = newLog();
    const rejected = await log.recordRejection({
      principal: 'seo-agent-7',
      action: 'post.update',
      resource_key: 'wp:post:100',
      fields: ['title'],
      lease_epoch: 3,
      error: { code: 'STALE_FENCING_EPOCH', message: 'epoch 3 < 4' },
      conflicts: [{ kind: 'fencing_epoch', expected: 4, actual: 3 }],
    });
    expect(rejected).toMatchObject({ status: 'REJECTED', error: { code: 'STALE_FENCING_EPOCH' }, lease_epoch: 3, decision_id: null, completed_at: rejected.created_at });
    expect(rejected.entries.map((e) => e.kind)).toEqual(['rejected']);
    expect(await log.verifyChain()).toMatchObject({ ok: true, entries: 1 });
  });

  describe('idempotency', () => {
    it('returns the first receipt for the same key and request, without writing', async () => {
      const { log } = newLog();
      const first = await log.recordIntent(intent({ idempotency_key: 'k' }));
      const again = await log.recordIntent(intent({ idempotency_key: 'k' }));
      expect(again).toEqual({ ...first, replayed: true });
      expect((await log.verifyChain()).entries).toBe(1);
    });

    it('refuses the same key with a different request', async () => {
      const { log } = newLog();
      const first = await log.recordIntent(intent({ idempotency_key: 'k' }));
      let error: unknown;
      try {
        await log.recordIntent(intent({ idempotency_key: 'k', request_hash: requestHash({ other: true }) }));
      } catch (e) {
        error = e;
      }
      expect(isWritError(error) && error.code).toBe('IDEMPOTENCY_MISMATCH');
      expect(isWritError(error) && error.details).toEqual({ receipt_id: first.receipt_id });
      expect((await log.verifyChain()).entries).toBe(1);
    });

    it('scopes keys per principal, and rejections do not take a key', async () => {
      const { log } = newLog();
      await log.recordRejection({ principal: 'seo-agent-7', action: 'post.update', resource_key: 'wp:post:1', idempotency_key: 'k', error: { code: 'DENIED', message: 'no' } });
      const a = await log.recordIntent(intent({ idempotency_key: 'k' }));
      const b = await log.recordIntent(intent({ principal: 'other-agent', idempotency_key: 'k' }));
      expect(a.replayed).toBeUndefined();
      expect(b.replayed).toBeUndefined();
      expect(a.receipt_id).not.toBe(b.receipt_id);
    });

    it('requires a unique receipt id when the caller chooses it', async () => {
      const { log } = newLog();
      await log.recordIntent(intent({ receipt_id: 'mine' }));
      await expect((async () => await log.recordIntent(intent({ receipt_id: 'mine' })))()).rejects.toThrow(expect.objectContaining({ code: 'ALREADY_EXISTS' }));
      expect(await log.verifyChain()).toMatchObject({ ok: true, entries: 1 });
    });
  });

  describe('queries', () => {
    async function populated() {
      const ctx = newLog();
      const { log } = ctx;
      const a = await log.recordIntent(intent({ resource_key: 'wp:post:1' }));
      await log.complete(a.receipt_id, { status: 'COMPLETED', final_version: 2 });
      await log.recordIntent(intent({ resource_key: 'wp:post:2', principal: 'other-agent' }));
      await log.recordRejection({ principal: 'other-agent', action: 'post.update', resource_key: 'wp:post:1', error: { code: 'DENIED', message: 'no' } });
      const d = await log.recordIntent(intent({ resource_key: 'wp:post:1' }));
      await log.complete(d.receipt_id, { status: 'FAILED', error: { code: 'UPSTREAM_FAILED', message: '500' } });
      return ctx;
    }

    it('filters by resource, principal and status', async () => {
      const { log } = await populated();
      const ids = async (q: Parameters<typeof log.query>[0]) => (await log.query(q)).receipts.map((r) => `${r.receipt_id}:${r.status}`);
      expect(await ids({ resource: 'wp:post:1' })).toEqual(['rcpt_1:COMPLETED', 'rcpt_3:REJECTED', 'rcpt_4:FAILED']);
      expect(await ids({ principal: 'other-agent' })).toEqual(['rcpt_2:PENDING', 'rcpt_3:REJECTED']);
      expect(await ids({ resource: 'wp:post:1', principal: 'seo-agent-7', status: 'FAILED' })).toEqual(['rcpt_4:FAILED']);
      expect(await ids({ status: 'PENDING' })).toEqual(['rcpt_2:PENDING']);
      expect((await log.pending()).receipts.map((r) => r.receipt_id)).toEqual(['rcpt_2']);
    });

    it('pages with after/next', async () => {
      const { log } = await populated();
      const first = await log.query({ limit: 2 });
      expect(first.receipts.map((r) => r.receipt_id)).toEqual(['rcpt_1', 'rcpt_2']);
      expect(first.next).not.toBeNull();
      const second = await log.query({ limit: 2, after: first.next! });
      expect(second.receipts.map((r) => r.receipt_id)).toEqual(['rcpt_3', 'rcpt_4']);
      expect(second.next).toBeNull();
      expect(second.receipts[1]!.entries.map((e) => e.kind)).toEqual(['intent', 'failed']);
    });
  });
});
