import { describe, expect, it } from 'vitest';
import { GENESIS_HASH, chainEntryHash, headsRoot } from '../../src/audit/index.js';
import { VERIFY_CHUNK } from '../../src/audit/receipt-log.js';
import { dropGuards, intent, newLog } from './helpers.js';

async function logWithEntries(n: number) {
  const ctx = newLog();
  for (let i = 0; i < n; i++) {
    const r = await ctx.log.recordIntent(intent({ expected_version: i }));
    ctx.clock.advance(10);
    if (i % 2 === 0) await ctx.log.complete(r.receipt_id, { status: 'COMPLETED', final_version: i + 1, upstream_status: 200 });
  }
  return ctx;
}

// All on one key (wp:post:100), so one chain whose positions are the seqs: 10 intents, 5 completions.
const CHAIN = 'wp:post:100';

describe('receipt hash chain', () => {
  it('verifies an intact chain: linked from 64 zeros, one entry per append, its head under the heads root', async () => {
    const { log, db } = await logWithEntries(10);
    const verdict = await log.verifyChain();
    expect(verdict).toMatchObject({ ok: true, entries: 15, chains: 1 });
    const first = db.prepare('SELECT * FROM receipt_entries WHERE seq = 1').get() as { prev_hash: string; hash: string; body: string; receipt_id: string; chain: string; pos: number };
    expect(first).toMatchObject({ chain: CHAIN, pos: 1, prev_hash: GENESIS_HASH });
    expect(first.hash).toBe(chainEntryHash(GENESIS_HASH, first.body, CHAIN, 1, 1, 'intent', first.receipt_id));
    const last = db.prepare('SELECT hash FROM receipt_entries ORDER BY seq DESC LIMIT 1').pluck().get() as string;
    expect(verdict.head).toBe(headsRoot([{ chain: CHAIN, pos: 15, hash: last, floor_pos: 0, floor_hash: GENESIS_HASH }]));
  });

  it('verifies an empty log', async () => {
    expect(await newLog().log.verifyChain()).toEqual({ ok: true, entries: 0, chains: 0, head: headsRoot([]), graph: { ok: true, events: 0, revision: 0, hash: GENESIS_HASH, unhashed: 0 } });
  });

  it('refuses UPDATE and DELETE on entries at the database level', async () => {
    const { db } = await logWithEntries(2);
    expect(() => db.prepare("UPDATE receipt_entries SET body = '{}' WHERE seq = 1").run()).toThrow(/append-only/);
    expect(() => db.prepare('DELETE FROM receipt_entries WHERE seq = 1').run()).toThrow(/append-only/);
  });

  it('detects an altered body at its seq', async () => {
    const { log, db } = await logWithEntries(10);
    dropGuards(db);
    const row = db.prepare('SELECT body FROM receipt_entries WHERE seq = 7').get() as { body: string };
    db.prepare('UPDATE receipt_entries SET body = ? WHERE seq = 7').run(row.body.replace('"seo-agent-7"', '"mallory"'));
    expect(await log.verifyChain()).toMatchObject({ ok: false, chain: CHAIN, firstBadPos: 7, firstBadSeq: 7, entries: 6 });
    expect((await log.verifyChain()).problem).toMatch(/altered/);
  });

  it('detects an altered body even when its own hash was recomputed (the next link breaks)', async () => {
    const { log, db } = await logWithEntries(10);
    dropGuards(db);
    const row = db.prepare('SELECT * FROM receipt_entries WHERE seq = 4').get() as { body: string; prev_hash: string; kind: 'intent'; receipt_id: string };
    const body = row.body.replace('"seo-agent-7"', '"mallory"');
    db.prepare('UPDATE receipt_entries SET body = ?, hash = ? WHERE seq = 4').run(body, chainEntryHash(row.prev_hash, body, CHAIN, 4, 4, row.kind, row.receipt_id));
    expect(await log.verifyChain()).toMatchObject({ ok: false, firstBadPos: 5 });
  });

  it('detects a deleted middle entry, reporting the missing seq', async () => {
    const { log, db } = await logWithEntries(10);
    dropGuards(db);
    db.prepare('DELETE FROM receipt_entries WHERE seq = 9').run();
    const verdict = await log.verifyChain();
    expect(verdict).toMatchObject({ ok: false, chain: CHAIN, firstBadPos: 9, entries: 8 });
    expect(verdict.problem).toMatch(/entry 9 is missing/);
  });

  it('detects a deleted middle entry even when the later positions were renumbered', async () => {
    const { log, db } = await logWithEntries(10);
    dropGuards(db);
    db.prepare('DELETE FROM receipt_entries WHERE seq = 9').run();
    db.prepare('UPDATE receipt_entries SET pos = pos - 1 WHERE pos > 9').run();
    expect(await log.verifyChain()).toMatchObject({ ok: false, firstBadPos: 9 });
  });

  it('detects two swapped entries at the first of them', async () => {
    const { log, db } = await logWithEntries(10);
    dropGuards(db);
    db.exec(`
      UPDATE receipt_entries SET pos = 1000 WHERE pos = 5;
      UPDATE receipt_entries SET pos = 5 WHERE pos = 11;
      UPDATE receipt_entries SET pos = 11 WHERE pos = 1000;
    `);
    const verdict = await log.verifyChain();
    expect(verdict).toMatchObject({ ok: false, firstBadPos: 5 });
    expect(verdict.problem).toMatch(/does not link/);
  });

  it('detects a cut tail against the receipts index', async () => {
    const { log, db } = await logWithEntries(10);
    dropGuards(db);
    db.prepare('DELETE FROM receipt_entries WHERE seq >= 14').run();
    const verdict = await log.verifyChain();
    expect(verdict).toMatchObject({ ok: false, entries: 13 });
    expect(verdict.problem).toMatch(/its index row names entry seq 1[345].*not its own/);
  });
});

describe('the receipts index is covered by verify (what queries filter on must be what was hashed)', () => {
  // 10 intents (rcpt_1 … rcpt_10); rcpt_1, 3, 5, 7, 9 completed, the others PENDING: 15 entries.
  const tampered = async (sql: string, ...params: unknown[]) => {
    const { log, db } = await logWithEntries(10);
    expect(await log.verifyChain()).toMatchObject({ ok: true });
    db.prepare(sql).run(...params);
    return log.verifyChain();
  };

  it.each([
    ['a principal rewritten (the write hidden from ?principal=)', "UPDATE receipts SET principal = 'someone-else' WHERE receipt_id = 'rcpt_3'", /rcpt_3: its index row says principal "someone-else", its entries say "seo-agent-7"/],
    ['a resource rewritten', "UPDATE receipts SET resource_key = 'wp:post:999' WHERE receipt_id = 'rcpt_3'", /rcpt_3: its index row says resource_key/],
    ['a pending receipt shown as completed', "UPDATE receipts SET status = 'COMPLETED' WHERE receipt_id = 'rcpt_2'", /rcpt_2: its index row says status "COMPLETED", its entries say "PENDING"/],
    ['a completed receipt shown as pending (its settlement unlinked)', "UPDATE receipts SET status = 'PENDING', completed_at = NULL, last_seq = first_seq WHERE receipt_id = 'rcpt_1'", /rcpt_1: its settlement is entry seq \d+, its index row names none \(it shows the receipt unsettled\)/],
    ['a settlement pointed at another receipt\'s', "UPDATE receipts SET last_seq = (SELECT last_seq FROM receipts WHERE receipt_id = 'rcpt_5') WHERE receipt_id = 'rcpt_1'", /rcpt_1: its index row names entry seq \d+ as its settlement, which is not a settlement of this receipt/],
    ['an idempotency key rewritten', "UPDATE receipts SET idempotency_key = 'other' WHERE receipt_id = 'rcpt_2'", /rcpt_2: its index row says idempotency_key/],
    ['a created_at rewritten', 'UPDATE receipts SET created_at = created_at + 1 WHERE receipt_id = \'rcpt_2\'', /rcpt_2: its index row says created_at/],
    ['a row deleted (the receipt vanishes from every query)', "DELETE FROM receipts WHERE receipt_id = 'rcpt_4'", /rcpt_4: its entry seq \d+ has no row in the receipts index/],
    ['a row inserted for no receipt', "INSERT INTO receipts (receipt_id, principal, resource_key, status, idempotency_key, request_hash, created_at, completed_at, first_seq, last_seq) VALUES ('rcpt_fake', 'x', 'wp:post:1', 'COMPLETED', NULL, NULL, 0, 0, 1, 1)", /rcpt_fake: its index row names entry seq 1, which is not its own/],
  ])('detects %s', async (_what, sql, problem) => {
    const verdict = await tampered(sql);
    expect(verdict.ok).toBe(false);
    expect(verdict.problem).toMatch(problem);
  });
});

describe('receipt hash chain, checked in chunks (GET /v1/audit/verify lets writes through between them)', () => {
  // 2 × VERIFY_CHUNK intents and VERIFY_CHUNK completions: three full chunks.
  const big = () => logWithEntries(2 * VERIFY_CHUNK);

  it('gives the same verdict as the one-pass check, pausing between chunks', async () => {
    const { log } = await big();
    let pauses = 0;
    const verdict = await log.verifyChain(async () => void pauses++);
    expect(verdict).toEqual(await log.verifyChain());
    expect(verdict).toMatchObject({ ok: true, entries: 3 * VERIFY_CHUNK });
    expect(pauses).toBe(3);
  });

  it('carries the link across a chunk boundary: a break just after it is found', async () => {
    const { log, db } = await big();
    dropGuards(db);
    const seq = VERIFY_CHUNK; // the last entry of the first chunk
    const row = db.prepare('SELECT * FROM receipt_entries WHERE seq = ?').get(seq) as { body: string; prev_hash: string; kind: 'intent'; receipt_id: string };
    const body = row.body.replace('{', '{"tampered":true,');
    // Rehashed to match its altered body: only the link from the next entry (next chunk) shows it.
    db.prepare('UPDATE receipt_entries SET body = ?, hash = ? WHERE seq = ?').run(body, chainEntryHash(row.prev_hash, body, CHAIN, seq, seq, row.kind, row.receipt_id), seq);
    expect(await log.verifyChain(async () => {})).toMatchObject({ ok: false, firstBadPos: seq + 1, entries: seq });
  });

  it('checks entries appended while it pauses', async () => {
    const { log } = await big();
    const verdict = await log.verifyChain(async () => {
      await log.recordIntent(intent({ expected_version: 99_999 }));
    });
    expect(verdict.ok).toBe(true);
    expect(verdict.entries).toBeGreaterThan(3 * VERIFY_CHUNK);
  });
});
