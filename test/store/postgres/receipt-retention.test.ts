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

describe('receipt entries on PostgreSQL (migrations 3, 4)', () => {
  it('may be deleted only at or below their chain\'s latest floor, never updated; checkpoints and leaves are append-only', async () => {
    const db = await createTestDatabase('writ_ret');
    cleanups.push(db.drop);
    const store = await openPostgresStore(db.url, { poolSize: 2 });
    cleanups.push(() => store.close());
    for (const [id, chain] of [['r1', 'wp:post:1'], ['r2', 'wp:post:1'], ['r3', 'wp:post:1'], ['r4', 'wp:post:2']] as const) {
      await store.readWrite((tx) =>
        tx.receipts.appendRejection({ chain, receipt_id: id, kind: 'rejected', body: canonicalJson({ at: 1, id }) }, {
          receipt_id: id, principal: 'p', resource_key: chain, status: 'REJECTED', idempotency_key: null, request_hash: null, created_at: 1, completed_at: 1,
        }));
    }
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    cleanups.push(() => client.end());
    await expect(client.query("DELETE FROM receipt_entries WHERE chain = 'wp:post:1' AND pos = 1")).rejects.toThrow(/append-only/);
    await expect(client.query("UPDATE receipt_entries SET body = '{}' WHERE seq = 1")).rejects.toThrow(/append-only/);
    await client.query("INSERT INTO receipt_head_checkpoints (seq, at, chains, root, archived, jws) VALUES (1, 1, 1, $1, 2, 'x')", [GENESIS_HASH]);
    await client.query("INSERT INTO receipt_checkpoint_leaves (chain, checkpoint, pos, hash, floor_pos, floor_hash) VALUES ('wp:post:1', 1, 3, $1, 2, $1)", [GENESIS_HASH]);
    await expect(client.query("DELETE FROM receipt_entries WHERE chain = 'wp:post:1' AND pos = 3")).rejects.toThrow(/append-only/);
    // Another chain's floor does not reach wp:post:2.
    await expect(client.query("DELETE FROM receipt_entries WHERE chain = 'wp:post:2'")).rejects.toThrow(/append-only/);
    expect((await client.query("DELETE FROM receipt_entries WHERE chain = 'wp:post:1' AND pos <= 2")).rowCount).toBe(2);
    await expect(client.query('UPDATE receipt_head_checkpoints SET archived = 3')).rejects.toThrow(/append-only/);
    await expect(client.query('DELETE FROM receipt_head_checkpoints')).rejects.toThrow(/append-only/);
    await expect(client.query('UPDATE receipt_checkpoint_leaves SET floor_pos = 3')).rejects.toThrow(/append-only/);
    await expect(client.query('DELETE FROM receipt_checkpoint_leaves')).rejects.toThrow(/append-only/);
  });
});

describe('receipt retention on PostgreSQL, end to end', () => {
  it('archives per chain behind a signed manifest and checkpoint, verifies from the floors, and sees a tampered remaining entry', async () => {
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
    await log.checkpoint();
    const file = join(dir, 'a.jsonl');
    expect(await log.archive({ olderThanMs: 30 * 86_400_000, file })).toMatchObject({
      archived: true, entries: 2, receipts: 1, ranges: [{ chain: 'wp:post:1', from: 1, to: 2 }], checkpoint: { seq: 2, archived: 2 },
    });
    expect(verifyArchiveFile(file, (jws) => signer.verify(jws))).toMatchObject({ ok: true, entries: 2 });
    expect(await log.verifyChain()).toMatchObject({ ok: true, entries: 2, checkpoint: { seq: 2 } });
    expect((await log.get(pending.receipt_id))?.status).toBe('PENDING');
    // Appends go on from the head (the chain's head row), and a later retry of the archived key writes anew.
    expect((await log.recordIntent({ ...base, request_hash: 'h1', idempotency_key: 'k1' })).replayed).toBeUndefined();
    expect((await log.verifyChain()).ok).toBe(true);
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    cleanups.push(() => client.end());
    await client.query('ALTER TABLE receipt_entries DISABLE TRIGGER receipt_entries_no_update');
    await client.query(`UPDATE receipt_entries SET body = replace(body, '"h2"', '"h3"') WHERE pos = 3`);
    expect(await log.verifyChain()).toMatchObject({ ok: false, chain: 'wp:post:1', firstBadPos: 3 });
  });
});
