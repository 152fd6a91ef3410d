import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { canonicalJson } from '../../../src/audit/canonical-json.js';
import { ReceiptLog, verifyArchiveFile } from '../../../src/audit/index.js';
import { ManualClock } from '../../../src/clock.js';
import { KeyRing } from '../../../src/decision/index.js';
import { keyRingCheckpointSigner } from '../../../src/service/checkpoint-signer.js';
import { GENESIS_HASH } from '../../../src/audit/hash-chain.js';
import { openPostgresStore } from '../../../src/store/postgres/index.js';
import { createTestDatabase } from '../conformance/engines.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

describe('receipt entries on PostgreSQL (migration 3)', () => {
  it('may be deleted only at or below the latest checkpoint, never updated; checkpoints are append-only', async () => {
    const db = await createTestDatabase('writ_ret');
    cleanups.push(db.drop);
    const store = await openPostgresStore(db.url, { poolSize: 2 });
    cleanups.push(() => store.close());
    for (const id of ['r1', 'r2', 'r3']) {
      await store.readWrite((tx) =>
        tx.receipts.appendRejection({ receipt_id: id, kind: 'rejected', body: canonicalJson({ at: 1, id }) }, {
          receipt_id: id, principal: 'p', resource_key: 'wp:post:1', status: 'REJECTED', idempotency_key: null, request_hash: null, created_at: 1, completed_at: 1,
        }));
    }
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    cleanups.push(() => client.end());
    await expect(client.query('DELETE FROM receipt_entries WHERE seq = 1')).rejects.toThrow(/append-only/);
    await expect(client.query("UPDATE receipt_entries SET body = '{}' WHERE seq = 1")).rejects.toThrow(/append-only/);
    await client.query('INSERT INTO receipt_checkpoints (seq, archived_through, hash, prev_hash, count, at, jws) VALUES (1, 2, $1, $1, 2, 1, $2)', [GENESIS_HASH, 'x']);
    await expect(client.query('DELETE FROM receipt_entries WHERE seq = 3')).rejects.toThrow(/append-only/);
    expect((await client.query('DELETE FROM receipt_entries WHERE seq <= 2')).rowCount).toBe(2);
    await expect(client.query('UPDATE receipt_checkpoints SET count = 3')).rejects.toThrow(/append-only/);
    await expect(client.query('DELETE FROM receipt_checkpoints')).rejects.toThrow(/append-only/);
  });
});

describe('receipt retention on PostgreSQL, end to end', () => {
  it('archives behind a signed checkpoint, verifies from it, and sees a tampered remaining entry', async () => {
    const db = await createTestDatabase('writ_ret');
    cleanups.push(db.drop);
    const store = await openPostgresStore(db.url, { poolSize: 2 });
    cleanups.push(() => store.close());
    const dir = mkdtempSync(join(tmpdir(), 'writ-ret-pg-'));
    const clock = new ManualClock();
    const signer = keyRingCheckpointSigner(await KeyRing.open(join(dir, 'keys'), clock));
    const log = new ReceiptLog({ store, clock, checkpoints: signer });
    const base = { principal: 'p', action: 'post.update', resource_key: 'wp:post:1', fields: ['title'] };
    const a = await log.recordIntent({ ...base, request_hash: 'h1', idempotency_key: 'k1' });
    await log.complete(a.receipt_id, { status: 'COMPLETED', final_version: 1 });
    const pending = await log.recordIntent({ ...base, request_hash: 'h2' });
    clock.advance(31 * 86_400_000);
    await log.recordRejection({ ...base, error: { code: 'FORBIDDEN', message: 'no' } });
    const file = join(dir, 'a.jsonl');
    expect(await log.archive({ olderThanMs: 30 * 86_400_000, file })).toMatchObject({ archived: true, entries: 2, receipts: 1, checkpoint: { archived_through: 2 } });
    expect(verifyArchiveFile(file, (jws) => signer.verify(jws))).toMatchObject({ ok: true, entries: 2 });
    expect(await log.verifyChain()).toMatchObject({ ok: true, entries: 2, checkpoint: { seq: 1 } });
    expect((await log.get(pending.receipt_id))?.status).toBe('PENDING');
    // Appends go on from the head (the chain head row), and a later retry of the archived key writes anew.
    expect((await log.recordIntent({ ...base, request_hash: 'h1', idempotency_key: 'k1' })).replayed).toBeUndefined();
    expect((await log.verifyChain()).ok).toBe(true);
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    cleanups.push(() => client.end());
    await client.query('ALTER TABLE receipt_entries DISABLE TRIGGER receipt_entries_no_update');
    await client.query(`UPDATE receipt_entries SET body = replace(body, '"h2"', '"h3"') WHERE seq = 3`);
    expect(await log.verifyChain()).toMatchObject({ ok: false, firstBadSeq: 3 });
  });
});
