import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { headsRoot, ReceiptLog, verifyArchiveFile } from '../../src/audit/index.js';
import { KeyRing } from '../../src/decision/index.js';
import { keyRingCheckpointSigner, signCheckpoint } from '../../src/service/checkpoint-signer.js';
import { openDatabase } from '../../src/store/sqlite/database.js';
import { sqliteStoreOn } from '../../src/store/sqlite/sqlite-store.js';
import { dropGuards, intent } from './helpers.js';

const DAY = 86_400_000;

async function setUp() {
  const dir = mkdtempSync(join(tmpdir(), 'writ-retention-'));
  const clock = new ManualClock();
  const ring = await KeyRing.open(join(dir, 'keys'), clock);
  const db = openDatabase(':memory:');
  const store = sqliteStoreOn(db);
  let n = 0;
  const signer = keyRingCheckpointSigner(ring);
  const log = new ReceiptLog({ store, clock, newId: () => `rcpt_${++n}`, checkpoints: signer });
  const offline = (file: string) => verifyArchiveFile(file, (jws) => signer.verify(jws));
  return { dir, clock, ring, db, store, log, offline };
}

/** All on one key (chain wp:post:100): three old settled receipts (entries 1..5), then a PENDING one (6), then one recent (7, 8). */
async function history(t: Awaited<ReturnType<typeof setUp>>) {
  const a = await t.log.recordIntent(intent());
  await t.log.complete(a.receipt_id, { status: 'COMPLETED', final_version: 2 });
  await t.log.recordRejection({ principal: 'p', action: 'post.update', resource_key: 'wp:post:100', error: { code: 'FORBIDDEN', message: 'no' } });
  const c = await t.log.recordIntent(intent({ idempotency_key: 'k-c' }));
  await t.log.complete(c.receipt_id, { status: 'FAILED', error: { code: 'UPSTREAM_FAILED', message: 'x' } });
  const pending = await t.log.recordIntent(intent());
  t.clock.advance(40 * DAY);
  const recent = await t.log.recordIntent(intent());
  await t.log.complete(recent.receipt_id, { status: 'COMPLETED', final_version: 3 });
  return { pending, recent };
}

describe('receipt retention: archive behind a signed checkpoint', () => {
  it('archives settled old receipts, never a PENDING one, and both the archive and the rest verify', async () => {
    const t = await setUp();
    const { pending } = await history(t);
    const file = join(t.dir, 'a1.jsonl');
    const r = await t.log.archive({ olderThanMs: 30 * DAY, file });
    expect(r).toMatchObject({ archived: true, entries: 5, receipts: 3, ranges: [{ chain: 'wp:post:100', from: 1, to: 5 }], checkpoint: { seq: 1, archived: 5, chains: 1 } });
    expect(await t.log.get('rcpt_1')).toBeNull();
    expect((await t.log.get(pending.receipt_id))?.status).toBe('PENDING');
    const v = await t.log.verifyChain();
    expect(v).toMatchObject({ ok: true, entries: 3, checkpoint: { seq: 1, archived: 5 } });
    expect(t.offline(file)).toMatchObject({ ok: true, entries: 5, ranges: [{ chain: 'wp:post:100', from: 1, to: 5 }] });

    // The PENDING receipt (entry 6) blocks the cut even once it is old: nothing more to archive.
    t.clock.advance(40 * DAY);
    expect(await t.log.archive({ olderThanMs: 30 * DAY, file: join(t.dir, 'a2.jsonl') })).toMatchObject({ archived: false });
    // Once settled it goes, and the second archive starts where the first checkpoint ends.
    await t.log.complete(pending.receipt_id, { status: 'COMPLETED', final_version: 9 });
    t.clock.advance(40 * DAY);
    // Entry 9 (its settlement) is the head, which always stays: its intent (6) cannot go without it.
    expect(await t.log.archive({ olderThanMs: 30 * DAY, file: join(t.dir, 'a2.jsonl') })).toMatchObject({ archived: false });
    await t.log.recordRejection({ principal: 'p', action: 'post.update', resource_key: 'wp:post:100', error: { code: 'FORBIDDEN', message: 'no' } });
    t.clock.advance(40 * DAY);
    const r2 = await t.log.archive({ olderThanMs: 30 * DAY, file: join(t.dir, 'a2.jsonl') });
    expect(r2).toMatchObject({ archived: true, entries: 4, receipts: 2, ranges: [{ from: 6, to: 9 }], checkpoint: { seq: 2, archived: 4 } });
    expect(await t.log.verifyChain()).toMatchObject({ ok: true, entries: 1, checkpoint: { seq: 2 } });
    expect(t.offline(join(t.dir, 'a2.jsonl'))).toMatchObject({ ok: true, entries: 4, ranges: [{ from: 6 }] });
    // Appends continue from the head.
    await t.log.recordIntent(intent());
    expect((await t.log.verifyChain()).ok).toBe(true);
  });

  it('a tampered archive file fails offline verification', async () => {
    const t = await setUp();
    await history(t);
    const file = join(t.dir, 'a.jsonl');
    await t.log.archive({ olderThanMs: 30 * DAY, file });
    const lines = readFileSync(file, 'utf8').trimEnd().split('\n');
    const altered = lines.map((l, i) => (i === 2 ? l.replace('"final_version\\":2', '"final_version\\":7') : l));
    expect(altered[2]).not.toBe(lines[2]);
    writeFileSync(file, altered.join('\n') + '\n');
    expect(t.offline(file)).toMatchObject({ ok: false, chain: 'wp:post:100', firstBadPos: 2 });
    // A cut end (last entry dropped) is found too: the signed ranges say where each chain's part ends.
    writeFileSync(file, lines.slice(0, -1).join('\n') + '\n');
    expect(t.offline(file)).toMatchObject({ ok: false, problem: expect.stringContaining('ends before entry 5') });
    // And a header whose ranges or manifest were edited no longer matches its signature.
    const header = JSON.parse(lines[0]!);
    header.ranges[0].to = 4;
    writeFileSync(file, [JSON.stringify(header), ...lines.slice(1, -1)].join('\n') + '\n');
    expect(t.offline(file)).toMatchObject({ ok: false, problem: expect.stringContaining('not the ones its manifest signed') });
    const header2 = JSON.parse(lines[0]!);
    header2.manifest.count = 4;
    writeFileSync(file, [JSON.stringify(header2), ...lines.slice(1, -1)].join('\n') + '\n');
    expect(t.offline(file)).toMatchObject({ ok: false, problem: expect.stringContaining('differs from what its signature covers') });
  });

  it('a tampered remaining entry fails verification from the checkpoint', async () => {
    const t = await setUp();
    await history(t);
    await t.log.archive({ olderThanMs: 30 * DAY, file: join(t.dir, 'a.jsonl') });
    dropGuards(t.db);
    t.db.prepare("UPDATE receipt_entries SET body = replace(body, '\"final_version\":3', '\"final_version\":4') WHERE seq = 8").run();
    expect(await t.log.verifyChain()).toMatchObject({ ok: false, chain: 'wp:post:100', firstBadPos: 8, firstBadSeq: 8 });
  });

  it('deleting the first remaining entry (the trigger refuses it; tampering with the file does not ask) breaks the link to the checkpoint', async () => {
    const t = await setUp();
    await history(t);
    await t.log.archive({ olderThanMs: 30 * DAY, file: join(t.dir, 'a.jsonl') });
    expect(() => t.db.prepare('DELETE FROM receipt_entries WHERE seq = 6').run()).toThrow(/append-only/);
    expect(() => t.db.prepare('DELETE FROM receipt_head_checkpoints').run()).toThrow(/append-only/);
    expect(() => t.db.prepare('DELETE FROM receipt_checkpoint_leaves').run()).toThrow(/append-only/);
    dropGuards(t.db);
    t.db.prepare('DELETE FROM receipt_entries WHERE seq = 6').run();
    expect(await t.log.verifyChain()).toMatchObject({ ok: false, firstBadPos: 6, problem: expect.stringContaining('entry 6 is missing') });
  });

  it('a forged checkpoint (signed by another key, or its row altered) fails verification', async () => {
    const t = await setUp();
    await history(t);
    await t.log.archive({ olderThanMs: 30 * DAY, file: join(t.dir, 'a.jsonl') });
    // Someone cuts more entries and signs a checkpoint for it with a key of their own.
    const other = await KeyRing.open(join(t.dir, 'other-keys'), t.clock);
    const head = t.db.prepare('SELECT hash FROM receipt_entries WHERE seq = 7').pluck().get() as string;
    const leaves = [{ chain: 'wp:post:100', pos: 8, hash: head, floor_pos: 7, floor_hash: head }];
    const payload = { v: 2 as const, seq: 2, at: t.clock.now(), chains: 1, root: headsRoot(leaves), archived: 2 };
    t.db.prepare('INSERT INTO receipt_head_checkpoints (seq, at, chains, root, archived, jws) VALUES (?, ?, ?, ?, ?, ?)')
      .run(payload.seq, payload.at, payload.chains, payload.root, payload.archived, signCheckpoint(other.current(), payload));
    expect(await t.log.verifyChain()).toMatchObject({ ok: false, problem: expect.stringContaining('not among the published keys') });
    // Nor is a new checkpoint signed on top of it (that would vouch for the forgery), nor is it signed again.
    t.clock.advance(40 * DAY);
    await expect(t.log.archive({ olderThanMs: 30 * DAY, file: join(t.dir, 'b.jsonl') })).rejects.toMatchObject({ code: 'UNPROCESSABLE', message: expect.stringContaining('checkpoint 2: the checkpoint was signed by key') });
    await expect(t.log.resignCheckpoint()).rejects.toMatchObject({ code: 'UNPROCESSABLE' });
  });

  it('a checkpoint row that says more than its signature covers fails verification', async () => {
    const t = await setUp();
    await history(t);
    await t.log.archive({ olderThanMs: 30 * DAY, file: join(t.dir, 'a.jsonl') });
    t.db.exec('DROP TRIGGER receipt_head_checkpoints_no_update');
    t.db.prepare('UPDATE receipt_head_checkpoints SET archived = 4').run();
    expect(await t.log.verifyChain()).toMatchObject({ ok: false, problem: expect.stringContaining('differs from what its signature covers') });
  });

  it('refuses to write over an existing file and archives nothing then', async () => {
    const t = await setUp();
    await history(t);
    const file = join(t.dir, 'exists.jsonl');
    writeFileSync(file, 'x');
    await expect(t.log.archive({ olderThanMs: 30 * DAY, file })).rejects.toMatchObject({ code: 'UNPROCESSABLE' });
    expect(await t.log.get('rcpt_1')).not.toBeNull();
    expect(await t.log.verifyChain()).toMatchObject({ ok: true, entries: 8 });
  });
});

describe('receipt retention: key rotation', () => {
  it('the latest checkpoint is signed again with the new key, so it still verifies once the old key is unpublished', async () => {
    const t = await setUp();
    await history(t);
    await t.log.archive({ olderThanMs: 30 * DAY, file: join(t.dir, 'a.jsonl') });
    await t.ring.rotate();
    const resigned = await t.log.resignCheckpoint();
    expect(resigned).toMatchObject({ seq: 2, archived: 0, chains: 1 });
    t.clock.advance(t.ring.retiredKeyPublishedMs + 1); // the old key leaves the JWKS
    expect(await t.log.verifyChain()).toMatchObject({ ok: true, entries: 3, checkpoint: { seq: 2, archived: 0 } });
    // The first archive is still checked offline with the JWKS saved when it was made (here: the old key is gone).
    expect(t.offline(join(t.dir, 'a.jsonl'))).toMatchObject({ ok: false, problem: expect.stringContaining('not among the published keys') });
    // A later archive continues from the re-signed checkpoint.
    await t.log.recordRejection({ principal: 'p', action: 'post.update', resource_key: 'wp:post:100', error: { code: 'FORBIDDEN', message: 'no' } });
    t.clock.advance(40 * DAY);
    await t.log.complete('rcpt_4', { status: 'COMPLETED', final_version: 1 });
    await t.log.recordRejection({ principal: 'p', action: 'post.update', resource_key: 'wp:post:100', error: { code: 'FORBIDDEN', message: 'no' } });
    t.clock.advance(40 * DAY);
    const r = await t.log.archive({ olderThanMs: 30 * DAY, file: join(t.dir, 'b.jsonl') });
    expect(r).toMatchObject({ archived: true, ranges: [{ chain: 'wp:post:100', from: 6, to: 10 }], checkpoint: { seq: 3 } });
    expect(t.offline(join(t.dir, 'b.jsonl'))).toMatchObject({ ok: true, ranges: [{ from: 6 }] });
    expect((await t.log.verifyChain()).ok).toBe(true);
  });

  it('a checkpoint that does not verify is never signed again', async () => {
    const t = await setUp();
    await history(t);
    await t.log.archive({ olderThanMs: 30 * DAY, file: join(t.dir, 'a.jsonl') });
    t.db.exec('DROP TRIGGER receipt_head_checkpoints_no_update');
    t.db.prepare('UPDATE receipt_head_checkpoints SET archived = 4').run();
    await expect(t.log.resignCheckpoint()).rejects.toMatchObject({ code: 'UNPROCESSABLE' });
    expect(t.db.prepare('SELECT COUNT(*) FROM receipt_head_checkpoints').pluck().get()).toBe(1);
  });
});
