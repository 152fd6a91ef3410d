import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { chainEntryHash, GENESIS_HASH, ReceiptLog } from '../../src/audit/index.js';
import { KEPT_FOR_MS } from '../../src/audit/receipt-log.js';
import { hashOf } from '../../src/audit/hash-chain.js';
import { KeyRing } from '../../src/decision/index.js';
import { keyRingCheckpointSigner } from '../../src/service/checkpoint-signer.js';
import { openDatabase } from '../../src/store/sqlite/database.js';
import { sqliteStoreOn } from '../../src/store/sqlite/sqlite-store.js';
import { dropGuards, intent } from './helpers.js';

async function setUp() {
  const dir = mkdtempSync(join(tmpdir(), 'writ-chains-'));
  const clock = new ManualClock();
  const ring = await KeyRing.open(join(dir, 'keys'), clock);
  const db = openDatabase(':memory:');
  let n = 0;
  const log = new ReceiptLog({ store: sqliteStoreOn(db), clock, newId: () => `rcpt_${++n}`, checkpoints: keyRingCheckpointSigner(ring) });
  return { dir, clock, ring, db, log };
}

/** Three keys, interleaved: a = wp:post:1 (3 receipts, settled), b = wp:post:2 (2 receipts, one PENDING), c = wp:post:3 (a rejection). */
async function threeKeys(t: Awaited<ReturnType<typeof setUp>>) {
  for (let i = 0; i < 3; i++) {
    const a = await t.log.recordIntent(intent({ resource_key: 'wp:post:1', expected_version: i }));
    if (i < 2) {
      const b = await t.log.recordIntent(intent({ resource_key: 'wp:post:2', expected_version: i }));
      if (i === 0) await t.log.complete(b.receipt_id, { status: 'COMPLETED', final_version: 1 });
    }
    await t.log.complete(a.receipt_id, { status: 'COMPLETED', final_version: i + 1 });
    t.clock.advance(10);
  }
  await t.log.recordRejection({ principal: 'p', action: 'post.update', resource_key: 'wp:post:3', error: { code: 'FORBIDDEN', message: 'no' } });
}

const row = (t: Awaited<ReturnType<typeof setUp>>, chain: string, pos: number) =>
  t.db.prepare('SELECT * FROM receipt_entries WHERE chain = ? AND pos = ?').get(chain, pos) as { seq: number; chain: string; pos: number; receipt_id: string; kind: 'intent'; body: string; prev_hash: string; hash: string };

describe('receipt chains: one per coordination key', () => {
  it('gives each key its own chain from the genesis, positions 1, 2, … while seq orders the whole store', async () => {
    const t = await setUp();
    await threeKeys(t);
    const chains = t.db.prepare('SELECT chain, COUNT(*) AS n, MIN(pos) AS lo, MAX(pos) AS hi FROM receipt_entries GROUP BY chain ORDER BY chain').all();
    expect(chains).toEqual([
      { chain: 'wp:post:1', n: 6, lo: 1, hi: 6 },
      { chain: 'wp:post:2', n: 3, lo: 1, hi: 3 },
      { chain: 'wp:post:3', n: 1, lo: 1, hi: 1 },
    ]);
    expect(row(t, 'wp:post:2', 1).prev_hash).toBe(GENESIS_HASH);
    const r = (await t.log.query({ resource: 'wp:post:2' })).receipts[0]!;
    expect(r).toMatchObject({ hash_chain: 'wp:post:2', status: 'COMPLETED' });
    expect(r.entries.map((e) => e.pos)).toEqual([1, 2]);
    expect(await t.log.verifyChain()).toMatchObject({ ok: true, entries: 10, chains: 3 });
  });

  it('detects a receipt moved from one chain to another, even rehashed and relinked there', async () => {
    const t = await setUp();
    await threeKeys(t);
    dropGuards(t.db);
    // The rejection of wp:post:3 moved to the end of wp:post:2's chain, with a hash that fits there.
    const e = row(t, 'wp:post:3', 1);
    const head = row(t, 'wp:post:2', 3);
    t.db.prepare('UPDATE receipt_entries SET chain = ?, pos = 4, prev_hash = ?, hash = ? WHERE seq = ?')
      .run('wp:post:2', head.hash, chainEntryHash(head.hash, e.body, 'wp:post:2', 4, e.seq, e.kind, e.receipt_id), e.seq);
    const v = await t.log.verifyChain();
    expect(v).toMatchObject({ ok: false, chain: 'wp:post:2', firstBadPos: 4, firstBadSeq: e.seq });
    expect(v.problem).toMatch(/opens a receipt of "wp:post:3" \(it was moved from that key's chain\)/);
  });

  it('detects a settlement moved into another chain (its hash no longer fits)', async () => {
    const t = await setUp();
    await threeKeys(t);
    dropGuards(t.db);
    const settlement = row(t, 'wp:post:1', 6);
    t.db.prepare("UPDATE receipt_entries SET chain = 'wp:post:3', pos = 2 WHERE seq = ?").run(settlement.seq);
    const v = await t.log.verifyChain();
    expect(v.ok).toBe(false);
    expect(v).toMatchObject({ chain: 'wp:post:3', firstBadPos: 2 });
  });

  it('takes a checkpoint only when a chain moved; its leaves add up to its signed root', async () => {
    const t = await setUp();
    await threeKeys(t);
    const c1 = await t.log.checkpoint();
    expect(c1).toMatchObject({ v: 3, seq: 1, chains: 3, archived: 0, graph_revision: 0, graph_hash: GENESIS_HASH });
    expect(await t.log.checkpoint()).toBeNull();
    await t.log.recordIntent(intent({ resource_key: 'wp:post:3' }));
    const c2 = await t.log.checkpoint();
    // Only the moved chain's leaf is stored again.
    expect(t.db.prepare('SELECT chain FROM receipt_checkpoint_leaves WHERE checkpoint = 2').pluck().all()).toEqual(['wp:post:3']);
    expect(c2).toMatchObject({ seq: 2, chains: 3 });
    expect(await t.log.verifyChain()).toMatchObject({ ok: true, entries: 11, chains: 3, checkpoint: { seq: 2, chains: 3, root: c2!.root } });
    expect((await t.log.verifyChain()).head).toBe(c2!.root);
  });

  it('detects a chain truncated below its signed head, even with its index rows deleted too', async () => {
    const t = await setUp();
    await threeKeys(t);
    await t.log.checkpoint();
    dropGuards(t.db);
    // The newest receipt of wp:post:1 (entries 5, 6) removed, with its index row: nothing else refers to them.
    const cut = row(t, 'wp:post:1', 5);
    t.db.prepare('DELETE FROM receipts WHERE receipt_id = ?').run(cut.receipt_id);
    t.db.prepare("DELETE FROM receipt_entries WHERE chain = 'wp:post:1' AND pos >= 5").run();
    const v = await t.log.verifyChain();
    expect(v).toMatchObject({ ok: false, chain: 'wp:post:1', firstBadPos: 5 });
    expect(v.problem).toMatch(/entries 5\.\.6 are missing \(the signed checkpoint says the chain reaches 6: its tail was cut\)/);
    // The next checkpoint does not sign the cut chain (that would launder it), even once the chain grows past it again.
    // Built on the leaves it kept (nothing was appended since), it signs nothing; its whole pass (an hour on,
    // or after a restart) refuses.
    expect(await t.log.checkpoint()).toBeNull();
    t.clock.advance(KEPT_FOR_MS);
    await expect(t.log.checkpoint()).rejects.toMatchObject({ code: 'UNPROCESSABLE', message: expect.stringMatching(/chain "wp:post:1" went back on checkpoint 1: its head is entry 4, the checkpoint signed entry 6/) });
    for (let i = 0; i < 3; i++) await t.log.recordIntent(intent({ resource_key: 'wp:post:1', expected_version: 10 + i }));
    await expect(t.log.checkpoint()).rejects.toMatchObject({ code: 'UNPROCESSABLE', message: expect.stringMatching(/its entry 6 is not the head the checkpoint signed/) });
  });

  it('detects a receipt put back into a chain\'s archived range (an INSERT at or below the archive floor, with its index row)', async () => {
    const t = await setUp();
    const DAY = 86_400_000;
    for (let i = 0; i < 3; i++) {
      const a = await t.log.recordIntent(intent({ resource_key: 'wp:post:100', expected_version: i }));
      await t.log.complete(a.receipt_id, { status: 'COMPLETED', final_version: i + 1 });
    }
    t.clock.advance(40 * DAY);
    await t.log.recordIntent(intent({ resource_key: 'wp:post:100', expected_version: 9 }));
    await t.log.archive({ olderThanMs: 30 * DAY, file: join(t.dir, 'archive.jsonl') });
    expect(await t.log.verifyChain()).toMatchObject({ ok: true });
    dropGuards(t.db);
    const forged = { seq: 1000, chain: 'wp:post:100', pos: 2, receipt_id: 'rcpt_forged', kind: 'rejected' as const, body: JSON.stringify({ at: 1, principal: 'victim', action: 'post.delete', resource_key: 'wp:post:100' }), prev_hash: GENESIS_HASH };
    const entry = { ...forged, hash: hashOf(forged) };
    t.db.prepare('INSERT INTO receipt_entries (seq, chain, pos, receipt_id, kind, body, prev_hash, hash) VALUES (@seq, @chain, @pos, @receipt_id, @kind, @body, @prev_hash, @hash)').run(entry);
    t.db.prepare("INSERT INTO receipts (receipt_id, principal, resource_key, status, idempotency_key, request_hash, created_at, completed_at, first_seq, last_seq) VALUES ('rcpt_forged', 'victim', 'wp:post:100', 'REJECTED', NULL, NULL, 1, 1, 1000, 1000)").run();
    const v = await t.log.verifyChain();
    expect(v).toMatchObject({ ok: false, chain: 'wp:post:100', firstBadPos: 2 });
    expect(v.problem).toMatch(/entry 2 is at or below the chain's archive floor 6/);
  });

  it('detects a whole chain removed with its index rows when a checkpoint signed it', async () => {
    const t = await setUp();
    await threeKeys(t);
    await t.log.checkpoint();
    dropGuards(t.db);
    t.db.prepare("DELETE FROM receipts WHERE resource_key = 'wp:post:3'").run();
    t.db.prepare("DELETE FROM receipt_entries WHERE chain = 'wp:post:3'").run();
    expect(await t.log.verifyChain()).toMatchObject({ ok: false, chain: 'wp:post:3', firstBadPos: 1, problem: expect.stringMatching(/entries 1\.\.1 are missing/) });
    t.clock.advance(KEPT_FOR_MS); // the whole pass (the kept leaves are built on for an hour)
    await expect(t.log.checkpoint()).rejects.toMatchObject({ code: 'UNPROCESSABLE', message: expect.stringMatching(/it has no head any more/) });
  });

  it('detects a chain rewritten below its signed head (every hash recomputed)', async () => {
    const t = await setUp();
    await threeKeys(t);
    await t.log.checkpoint();
    dropGuards(t.db);
    // wp:post:2 rewritten from entry 2 on, consistently: only the signed head betrays it.
    let prev = row(t, 'wp:post:2', 1).hash;
    for (const pos of [2, 3]) {
      const e = row(t, 'wp:post:2', pos);
      const body = e.body.replace('"at":', '"tampered":true,"at":');
      const hash = chainEntryHash(prev, body, 'wp:post:2', pos, e.seq, e.kind, e.receipt_id);
      t.db.prepare('UPDATE receipt_entries SET body = ?, prev_hash = ?, hash = ? WHERE seq = ?').run(body, prev, hash, e.seq);
      prev = hash;
    }
    expect(await t.log.verifyChain()).toMatchObject({ ok: false, chain: 'wp:post:2', firstBadPos: 3, problem: expect.stringMatching(/not the head the checkpoint signed/) });
    t.clock.advance(KEPT_FOR_MS); // the whole pass (the kept leaves are built on for an hour)
    await expect(t.log.checkpoint()).rejects.toMatchObject({ code: 'UNPROCESSABLE', message: expect.stringMatching(/chain "wp:post:2" went back on checkpoint 1: its head is entry 3, the checkpoint signed entry 3 with another hash/) });
  });

  it.each([
    ['its root altered in the row', (t: Awaited<ReturnType<typeof setUp>>) => t.db.prepare("UPDATE receipt_head_checkpoints SET root = ? WHERE seq = 1").run('a'.repeat(64)), /differs from what its signature covers/],
    ['a leaf altered (a truncation hidden by lowering the signed head)', (t: Awaited<ReturnType<typeof setUp>>) => t.db.prepare("UPDATE receipt_checkpoint_leaves SET pos = 4, hash = ? WHERE chain = 'wp:post:1'").run(row(t, 'wp:post:1', 4).hash), /leaves do not add up to the root it signed/],
    ['a leaf removed', (t: Awaited<ReturnType<typeof setUp>>) => t.db.prepare("DELETE FROM receipt_checkpoint_leaves WHERE chain = 'wp:post:3'").run(), /its 2 stored leaves do not add up/],
  ])('detects a forged checkpoint: %s', async (_what, forge, problem) => {
    const t = await setUp();
    await threeKeys(t);
    await t.log.checkpoint();
    t.db.exec('DROP TRIGGER receipt_head_checkpoints_no_update; DROP TRIGGER receipt_checkpoint_leaves_no_update; DROP TRIGGER receipt_checkpoint_leaves_no_delete;');
    forge(t);
    const v = await t.log.verifyChain();
    expect(v.ok).toBe(false);
    expect(v.problem).toMatch(problem);
    // And nothing is ever built on it (by the whole pass: the kept leaves are built on for an hour, and the
    // stored leaves a checkpoint built on them would add to are the forged ones, which verify reports).
    t.clock.advance(KEPT_FOR_MS);
    await expect(t.log.checkpoint({ force: true })).rejects.toMatchObject({ code: 'UNPROCESSABLE' });
  });
});
