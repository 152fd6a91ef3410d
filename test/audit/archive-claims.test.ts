/**
 * Two claims of the README's "Retention: archiving old receipts without losing tamper evidence" section
 * that no other test checks:
 *
 * 1. "Version-1 archives (single chain) still verify." A version-1 file is built here the way the writer
 *    before per-key chains wrote it (`git show a64cfcd:src/audit/archive-file.ts`, `…:receipt-log.ts`,
 *    `…:service/checkpoint-signer.ts`): header `{"writ_receipt_archive":1,"checkpoint":{seq,
 *    archived_through, hash, prev_hash, count, at, jws}}`, then one line per entry of the single global
 *    chain `{seq, receipt_id, kind, body, prev_hash, hash}` (no chain, no pos), each hash the version-1
 *    one (sha256 of prev_hash, body, seq, kind, receipt_id), the checkpoint signed with a key ring key.
 *    It is checked with `writ audit verify --archive FILE --jwks FILE` (the CLI command, run in process)
 *    and with `verifyArchiveFile`.
 * 2. "another archive of the same chains does [disturb it] (`UNPROCESSABLE`, nothing deleted)". The check
 *    is in `ReceiptLog.archive` after the file is in place: the latest checkpoint's floor of every chain
 *    the archive cut must still be the one it started from (`floor_pos === range.from - 1`); otherwise
 *    it throws UNPROCESSABLE before recording its checkpoint, so its delete never runs.
 */
import { sign as edSign } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { legacyChain } from '../support/legacy-chain.js';
import { ManualClock } from '../../src/clock.js';
import { canonicalJson, CHECKPOINT_TYP, GENESIS_HASH, ReceiptLog, verifyArchiveFile, type ReceiptTx } from '../../src/audit/index.js';
import { COMMANDS } from '../../src/cli/commands.js';
import { KeyRing } from '../../src/decision/index.js';
import { keyRingCheckpointSigner } from '../../src/service/checkpoint-signer.js';
import { openDatabase } from '../../src/store/sqlite/database.js';
import { sqliteStoreOn } from '../../src/store/sqlite/sqlite-store.js';
import type { TxRunner } from '../../src/transactions.js';
import { intent } from './helpers.js';

const DAY = 86_400_000;

afterEach(() => {
  vi.restoreAllMocks();
});

/** `writ audit verify --archive FILE --jwks FILE`, run in process: its exit code and what it printed. */
async function auditVerifyArchive(file: string, jwks: string): Promise<{ code: number; stdout: string }> {
  const command = COMMANDS.find((c) => c.name === 'audit verify')!;
  const printed: string[] = [];
  const log = vi.spyOn(console, 'log').mockImplementation((...args: unknown[]) => {
    printed.push(args.join(' '));
  });
  try {
    const code = await command.run({ values: { archive: file, jwks }, positionals: [] });
    return { code, stdout: printed.join('\n') };
  } finally {
    log.mockRestore();
  }
}

// ---------------------------------------------------------------------------------------------------
// Claim 1: version-1 archives
// ---------------------------------------------------------------------------------------------------

type V1Kind = 'intent' | 'completed' | 'failed' | 'rejected';
interface V1Entry {
  seq: number;
  receipt_id: string;
  kind: V1Kind;
  body: string;
  prev_hash: string;
  hash: string;
}

/**
 * The single global chain as the code before per-key chains stored it: seq from 1, version-1 hashes,
 * bodies as that ReceiptLog folded them (canonical JSON; same shapes as receipt-migration.test.ts).
 */
function v1Chain(): V1Entry[] {
  const intentBody = (id: string, at: number, resource: string, extra: Record<string, unknown> = {}) =>
    canonicalJson({ at, principal: 'seo-agent-7', action: 'post.update', resource_key: resource, fields: ['title'], owners: [], request_hash: `h-${id}`, idempotency_key: null, ...extra });
  const rows: [string, V1Kind, string][] = [
    ['a', 'intent', intentBody('a', 1_000, 'wp:post:100', { idempotency_key: 'k1' })],
    ['a', 'completed', canonicalJson({ at: 2_000, status: 'COMPLETED', final_version: 32, upstream_status: 200, error: null, conflicts: [] })],
    ['rej', 'rejected', intentBody('rej', 3_000, 'wp:post:102', { error: { code: 'DECISION_INVALID', message: 'no' }, conflicts: [], upstream_status: null })],
    ['c', 'intent', intentBody('c', 4_000, 'wp:post:101')],
    ['c', 'failed', canonicalJson({ at: 5_000, status: 'FAILED', final_version: null, upstream_status: 412, error: { code: 'VERSION_CONFLICT', message: 'x' }, conflicts: [] })],
    ['d', 'intent', intentBody('d', 6_000, 'wp:post:100')],
  ];
  return legacyChain(rows);
}

/** The old `signCheckpoint` (a64cfcd:src/service/checkpoint-signer.ts), reproduced: compact JWS, EdDSA, over the canonical JSON payload. */
function oldSignCheckpoint(key: { kid: string; privateKey: Parameters<typeof edSign>[2] }, payload: object): string {
  const header = Buffer.from(JSON.stringify({ alg: 'EdDSA', kid: key.kid, typ: CHECKPOINT_TYP })).toString('base64url');
  const body = Buffer.from(canonicalJson(payload)).toString('base64url');
  const input = `${header}.${body}`;
  return `${input}.${edSign(null, Buffer.from(input), key.privateKey).toString('base64url')}`;
}

/**
 * What the version-1 `ReceiptLog.archive` + `ArchiveWriter` wrote for the cut after `last` (the previous
 * checkpoint, if any) through seq `cut`: a header with the signed checkpoint, then the entries.
 */
function writeV1Archive(file: string, chain: V1Entry[], last: { seq: number; archived_through: number; hash: string } | null, cut: number, at: number, key: { kid: string; privateKey: Parameters<typeof edSign>[2] }) {
  const start = last?.archived_through ?? 0;
  const end = chain[cut - 1]!;
  const payload = { seq: (last?.seq ?? 0) + 1, archived_through: cut, hash: end.hash, prev_hash: last?.hash ?? GENESIS_HASH, count: cut - start, at };
  const checkpoint = { ...payload, jws: oldSignCheckpoint(key, payload) };
  const lines = [JSON.stringify({ writ_receipt_archive: 1, checkpoint })];
  for (const e of chain.slice(start, cut)) lines.push(JSON.stringify({ seq: e.seq, receipt_id: e.receipt_id, kind: e.kind, body: e.body, prev_hash: e.prev_hash, hash: e.hash }));
  writeFileSync(file, lines.map((l) => `${l}\n`).join(''));
  return payload;
}

const dirs: string[] = [];
afterAll(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));

async function v1SetUp() {
  const dir = mkdtempSync(join(tmpdir(), 'writ-archive-v1-'));
  dirs.push(dir);
  const clock = new ManualClock();
  const ring = await KeyRing.open(join(dir, 'keys'), clock);
  const jwks = join(dir, 'jwks.json');
  writeFileSync(jwks, JSON.stringify(ring.jwks()));
  const signer = keyRingCheckpointSigner(ring);
  const chain = v1Chain();
  const first = join(dir, 'v1-first.jsonl');
  const second = join(dir, 'v1-second.jsonl');
  const cp1 = writeV1Archive(first, chain, null, 3, clock.now(), ring.current());
  const cp2 = writeV1Archive(second, chain, cp1, 5, clock.now() + 1, ring.current());
  return { dir, ring, jwks, signer, chain, first, second, cp1, cp2 };
}

describe('README claim: "Version-1 archives (single chain) still verify"', () => {
  it('a version-1 archive written as the old writer wrote it verifies offline (writ audit verify --archive --jwks, and verifyArchiveFile)', async () => {
    const t = await v1SetUp();
    // It really is the version-1 shape: no chain or pos members, a checkpoint (not a manifest) in the header.
    const lines = readFileSync(t.first, 'utf8').trimEnd().split('\n');
    expect(JSON.parse(lines[0]!)).toMatchObject({ writ_receipt_archive: 1, checkpoint: { seq: 1, archived_through: 3, count: 3, prev_hash: GENESIS_HASH } });
    expect(Object.keys(JSON.parse(lines[1]!))).toEqual(['seq', 'receipt_id', 'kind', 'body', 'prev_hash', 'hash']);

    expect(await auditVerifyArchive(t.first, t.jwks)).toEqual({ code: 0, stdout: `OK: ${t.first} holds 3 entries of 1 chain(s), its signed checkpoint verified` });
    // The second archive starts where the first checkpoint ended (from = archived_through - count + 1 = 4), linked from its hash.
    expect(await auditVerifyArchive(t.second, t.jwks)).toEqual({ code: 0, stdout: `OK: ${t.second} holds 2 entries of 1 chain(s), its signed checkpoint verified` });
    const v = verifyArchiveFile(t.second, (jws) => t.signer.verify(jws));
    expect(v).toMatchObject({ ok: true, entries: 2, ranges: [{ chain: '', from: 4, prev_hash: t.cp1.hash, to: 5, hash: t.cp2.hash }], manifest: { count: 2 } });
  });

  it('one altered line of a version-1 archive is reported with its chain (the legacy chain "") and position (its seq)', async () => {
    const t = await v1SetUp();
    const lines = readFileSync(t.first, 'utf8').trimEnd().split('\n');
    const write = (ls: string[]) => writeFileSync(t.first, ls.map((l) => `${l}\n`).join(''));

    // An entry's body altered (line 3 = seq 2, receipt a's settlement).
    const altered = lines.map((l, i) => (i === 2 ? l.replace('"final_version\\":32', '"final_version\\":33') : l));
    expect(altered[2]).not.toBe(lines[2]);
    write(altered);
    const cli = await auditVerifyArchive(t.first, t.jwks);
    expect(cli.code).toBe(1);
    expect(cli.stdout).toMatch(/^BROKEN in chain "" at 2: /);
    expect(verifyArchiveFile(t.first, (jws) => t.signer.verify(jws))).toMatchObject({ ok: false, chain: '', firstBadPos: 2 });

    // An entry's seq altered (its position in the single chain): reported at the position expected.
    const renumbered = lines.map((l, i) => (i === 3 ? l.replace('"seq":3,', '"seq":9,') : l));
    expect(renumbered[3]).not.toBe(lines[3]);
    write(renumbered);
    expect(verifyArchiveFile(t.first, (jws) => t.signer.verify(jws))).toMatchObject({ ok: false, chain: '', firstBadPos: 3 });

    // The last line cut: the signed checkpoint says where the archive ends.
    write(lines.slice(0, -1));
    expect(await auditVerifyArchive(t.first, t.jwks)).toMatchObject({ code: 1, stdout: expect.stringContaining('ends before entry 3') });

    // The header's checkpoint altered: it no longer says what its signature covers.
    const header = JSON.parse(lines[0]!);
    header.checkpoint.count = 2;
    write([JSON.stringify(header), ...lines.slice(1)]);
    expect(await auditVerifyArchive(t.first, t.jwks)).toMatchObject({ code: 1, stdout: expect.stringContaining('differs from what its signature covers') });

    // Signed by a key that is not in the saved JWKS.
    write(lines);
    expect((await auditVerifyArchive(t.first, t.jwks)).code).toBe(0);
    const other = await KeyRing.open(join(t.dir, 'other-keys'), new ManualClock());
    writeV1Archive(join(t.dir, 'forged.jsonl'), t.chain, null, 3, 0, other.current());
    expect(await auditVerifyArchive(join(t.dir, 'forged.jsonl'), t.jwks)).toMatchObject({ code: 1, stdout: expect.stringContaining('not among the published keys') });
  });
});

// ---------------------------------------------------------------------------------------------------
// Claim 2: another archive of the same chains
// ---------------------------------------------------------------------------------------------------

/**
 * Two ReceiptLogs over one SQLite store (two `writ audit archive` runs), signing with one key ring. Log
 * B's store can be held just before its transactions (`beforeWrite`): B has then computed its ranges
 * and written its file on the view it started from, and whatever the hook does happens before B
 * records its checkpoint.
 */
async function raceSetUp() {
  const dir = mkdtempSync(join(tmpdir(), 'writ-archive-race-'));
  dirs.push(dir);
  const clock = new ManualClock();
  const ring = await KeyRing.open(join(dir, 'keys'), clock);
  const db = openDatabase(':memory:');
  const store = sqliteStoreOn(db);
  const signer = keyRingCheckpointSigner(ring);
  let n = 0;
  const newId = () => `rcpt_${++n}`;
  const a = new ReceiptLog({ store, clock, newId, checkpoints: signer });
  const hooks: { beforeWrite?: () => Promise<void> } = {};
  const held: TxRunner<ReceiptTx> = {
    read: (fn, options) => store.read(fn, options),
    readWrite: async (fn, options) => {
      const hook = hooks.beforeWrite;
      hooks.beforeWrite = undefined;
      if (hook) await hook();
      return store.readWrite(fn, options);
    },
  };
  const b = new ReceiptLog({ store: held, clock, newId, checkpoints: signer });
  const offline = (file: string) => verifyArchiveFile(file, (jws) => signer.verify(jws));
  const count = (sql: string) => db.prepare(sql).pluck().get() as number;
  const state = () => ({
    entries: count('SELECT COUNT(*) FROM receipt_entries'),
    receipts: count('SELECT COUNT(*) FROM receipts'),
    checkpoints: count('SELECT COUNT(*) FROM receipt_head_checkpoints'),
  });
  return { dir, clock, db, a, b, hooks, offline, state };
}

/**
 * Chain wp:post:100: two settled receipts 80 days old (entries 1..4), then a recent head (5).
 * Chain wp:post:200: two settled receipts 50 days old (entries 1..3), then a recent head (4).
 * So `--older-than 70d` archives only wp:post:100 1..4; `--older-than 30d` archives both.
 */
async function twoChains(t: Awaited<ReturnType<typeof raceSetUp>>) {
  const x1 = await t.a.recordIntent(intent());
  await t.a.complete(x1.receipt_id, { status: 'COMPLETED', final_version: 32 });
  const x2 = await t.a.recordIntent(intent({ idempotency_key: 'k-x2' }));
  await t.a.complete(x2.receipt_id, { status: 'FAILED', error: { code: 'UPSTREAM_FAILED', message: 'x' } });
  t.clock.advance(30 * DAY);
  const y1 = await t.a.recordIntent(intent({ resource_key: 'wp:post:200' }));
  await t.a.complete(y1.receipt_id, { status: 'COMPLETED', final_version: 5 });
  await t.a.recordRejection({ principal: 'p', action: 'post.update', resource_key: 'wp:post:200', error: { code: 'FORBIDDEN', message: 'no' } });
  t.clock.advance(50 * DAY);
  await t.a.recordRejection({ principal: 'p', action: 'post.update', resource_key: 'wp:post:100', error: { code: 'FORBIDDEN', message: 'no' } });
  await t.a.recordRejection({ principal: 'p', action: 'post.update', resource_key: 'wp:post:200', error: { code: 'FORBIDDEN', message: 'no' } });
}

describe('README claim: another archive of the same chains makes an archive give up (UNPROCESSABLE, nothing deleted)', () => {
  it('an archive whose view went stale (another archive moved one of its chains before it recorded its checkpoint) is refused and deletes nothing, not even its other chain', async () => {
    const t = await raceSetUp();
    await twoChains(t);
    const before = t.state();
    expect(before).toEqual({ entries: 9, receipts: 6, checkpoints: 0 });
    const fileA = join(t.dir, 'a.jsonl');
    const fileB = join(t.dir, 'b.jsonl');

    // B plans wp:post:100 1..4 and wp:post:200 1..3 and writes them to its file; before it records its
    // checkpoint, A archives wp:post:100 1..4 (only that chain is old enough for A's age).
    let resultA: Awaited<ReturnType<ReceiptLog['archive']>> | undefined;
    t.hooks.beforeWrite = async () => {
      resultA = await t.a.archive({ olderThanMs: 70 * DAY, file: fileA });
    };
    const refused = await t.b.archive({ olderThanMs: 30 * DAY, file: fileB }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(resultA).toMatchObject({ archived: true, entries: 4, receipts: 2, ranges: [{ chain: 'wp:post:100', from: 1, to: 4 }], checkpoint: { seq: 1 } });
    expect(refused).toMatchObject({ name: 'WritError', code: 'UNPROCESSABLE', message: expect.stringContaining('another archive moved chain "wp:post:100" meanwhile') });
    expect((refused as Error).message).toContain(`${fileB} holds entries it archived too, nothing more was deleted`);

    // Only A's deletion happened: wp:post:200's entries (which only B archived) are all still there, and
    // no checkpoint of B's was recorded.
    expect(t.state()).toEqual({ entries: 9 - 4, receipts: 6 - 2, checkpoints: 1 });
    expect(t.db.prepare("SELECT pos FROM receipt_entries WHERE chain = 'wp:post:200' ORDER BY pos").pluck().all()).toEqual([1, 2, 3, 4]);
    expect(await t.a.get('rcpt_3')).toMatchObject({ status: 'COMPLETED' }); // wp:post:200's first receipt
    expect(await t.a.get('rcpt_1')).toBeNull(); // archived by A
    expect(await t.a.verifyChain()).toMatchObject({ ok: true, entries: 5, chains: 2, checkpoint: { seq: 1, archived: 4 } });

    // B's file was written (the README: "the file exists but nothing was deleted") and is itself a sound
    // archive; its wp:post:100 range is the one A's file holds as well.
    expect(existsSync(fileB)).toBe(true);
    expect(t.offline(fileB)).toMatchObject({ ok: true, entries: 7, ranges: [{ chain: 'wp:post:100', from: 1, to: 4 }, { chain: 'wp:post:200', from: 1, to: 3 }] });
    expect(t.offline(fileA)).toMatchObject({ ok: true, entries: 4 });

    // Archiving again (to a new file) starts from A's floors and moves the rest.
    const again = await t.b.archive({ olderThanMs: 30 * DAY, file: join(t.dir, 'b2.jsonl') });
    expect(again).toMatchObject({ archived: true, entries: 3, ranges: [{ chain: 'wp:post:200', from: 1, to: 3 }], checkpoint: { seq: 2 } });
    expect(await t.a.verifyChain()).toMatchObject({ ok: true, entries: 2, chains: 2, checkpoint: { seq: 2 } });
  });

  it('two archives of the same chains started together: one wins, the other gets UNPROCESSABLE and deletes nothing more', async () => {
    const t = await raceSetUp();
    await twoChains(t);
    const fileA = join(t.dir, 'a.jsonl');
    const fileB = join(t.dir, 'b.jsonl');
    const [ra, rb] = await Promise.allSettled([
      t.a.archive({ olderThanMs: 30 * DAY, file: fileA }),
      t.b.archive({ olderThanMs: 30 * DAY, file: fileB }),
    ]);
    const outcomes = [ra, rb];
    const won = outcomes.filter((r) => r.status === 'fulfilled');
    const lost = outcomes.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
    expect(won).toHaveLength(1);
    expect(lost).toHaveLength(1);
    expect(won[0]).toMatchObject({ value: { archived: true, entries: 7, receipts: 4, checkpoint: { seq: 1 } } });
    expect(lost[0]!.reason).toMatchObject({ name: 'WritError', code: 'UNPROCESSABLE', message: expect.stringMatching(/another archive moved chain "wp:post:(100|200)" meanwhile/) });
    // Exactly the winner's 7 entries (4 receipts) went, one checkpoint was recorded; both files verify.
    expect(t.state()).toEqual({ entries: 2, receipts: 2, checkpoints: 1 });
    expect(await t.a.verifyChain()).toMatchObject({ ok: true, entries: 2, chains: 2, checkpoint: { seq: 1, archived: 7 } });
    expect(t.offline(fileA)).toMatchObject({ ok: true, entries: 7 });
    expect(t.offline(fileB)).toMatchObject({ ok: true, entries: 7 });
  });

  it('contrast: a periodic checkpoint taken meanwhile does not disturb it (the check compares the floors, not the checkpoint number)', async () => {
    const t = await raceSetUp();
    await twoChains(t);
    t.hooks.beforeWrite = async () => {
      expect(await t.a.checkpoint({ force: true })).toMatchObject({ seq: 1, archived: 0 });
    };
    const r = await t.b.archive({ olderThanMs: 30 * DAY, file: join(t.dir, 'b.jsonl') });
    // Its first attempt lost checkpoint number 1 to the periodic one; it was built again on it as 2.
    expect(r).toMatchObject({ archived: true, entries: 7, checkpoint: { seq: 2, archived: 7 } });
    expect(t.state()).toEqual({ entries: 2, receipts: 2, checkpoints: 2 });
    expect(await t.a.verifyChain()).toMatchObject({ ok: true, entries: 2, checkpoint: { seq: 2 } });
  });
});
