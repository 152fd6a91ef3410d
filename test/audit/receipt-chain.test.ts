import { describe, expect, it } from 'vitest';
import { GENESIS_HASH, entryHash } from '../../src/audit/index.js';
import { dropGuards, intent, newLog } from './helpers.js';

function logWithEntries(n: number) {
  const ctx = newLog();
  for (let i = 0; i < n; i++) {
    const r = ctx.log.recordIntent(intent({ expected_version: i }));
    ctx.clock.advance(10);
    if (i % 2 === 0) ctx.log.complete(r.receipt_id, { status: 'COMPLETED', final_version: i + 1, upstream_status: 200 });
  }
  return ctx;
}

describe('receipt hash chain', () => {
  it('verifies an intact chain: linked from 64 zeros, one entry per append', () => {
    const { log, db } = logWithEntries(10);
    const verdict = log.verifyChain();
    expect(verdict).toMatchObject({ ok: true, entries: 15 });
    const first = db.prepare('SELECT * FROM receipt_entries WHERE seq = 1').get() as { prev_hash: string; hash: string; body: string; receipt_id: string };
    expect(first.prev_hash).toBe(GENESIS_HASH);
    expect(first.hash).toBe(entryHash(GENESIS_HASH, first.body, 1, 'intent', first.receipt_id));
    const last = db.prepare('SELECT hash FROM receipt_entries ORDER BY seq DESC LIMIT 1').pluck().get();
    expect(verdict.head).toBe(last);
  });

  it('verifies an empty log', () => {
    expect(newLog().log.verifyChain()).toEqual({ ok: true, entries: 0, head: GENESIS_HASH });
  });

  it('refuses UPDATE and DELETE on entries at the database level', () => {
    const { db } = logWithEntries(2);
    expect(() => db.prepare("UPDATE receipt_entries SET body = '{}' WHERE seq = 1").run()).toThrow(/append-only/);
    expect(() => db.prepare('DELETE FROM receipt_entries WHERE seq = 1').run()).toThrow(/append-only/);
  });

  it('detects an altered body at its seq', () => {
    const { log, db } = logWithEntries(10);
    dropGuards(db);
    const row = db.prepare('SELECT body FROM receipt_entries WHERE seq = 7').get() as { body: string };
    db.prepare('UPDATE receipt_entries SET body = ? WHERE seq = 7').run(row.body.replace('"seo-agent-7"', '"mallory"'));
    expect(log.verifyChain()).toMatchObject({ ok: false, firstBadSeq: 7, entries: 6 });
    expect(log.verifyChain().problem).toMatch(/altered/);
  });

  it('detects an altered body even when its own hash was recomputed (the next link breaks)', () => {
    const { log, db } = logWithEntries(10);
    dropGuards(db);
    const row = db.prepare('SELECT * FROM receipt_entries WHERE seq = 4').get() as { body: string; prev_hash: string; kind: 'intent'; receipt_id: string };
    const body = row.body.replace('"seo-agent-7"', '"mallory"');
    db.prepare('UPDATE receipt_entries SET body = ?, hash = ? WHERE seq = 4').run(body, entryHash(row.prev_hash, body, 4, row.kind, row.receipt_id));
    expect(log.verifyChain()).toMatchObject({ ok: false, firstBadSeq: 5 });
  });

  it('detects a deleted middle entry, reporting the missing seq', () => {
    const { log, db } = logWithEntries(10);
    dropGuards(db);
    db.prepare('DELETE FROM receipt_entries WHERE seq = 9').run();
    const verdict = log.verifyChain();
    expect(verdict).toMatchObject({ ok: false, firstBadSeq: 9, entries: 8 });
    expect(verdict.problem).toMatch(/entry 9 is missing/);
  });

  it('detects a deleted middle entry even when the later seqs were renumbered', () => {
    const { log, db } = logWithEntries(10);
    dropGuards(db);
    db.prepare('DELETE FROM receipt_entries WHERE seq = 9').run();
    db.prepare('UPDATE receipt_entries SET seq = seq - 1 WHERE seq > 9').run();
    expect(log.verifyChain()).toMatchObject({ ok: false, firstBadSeq: 9 });
  });

  it('detects two swapped entries at the first of them', () => {
    const { log, db } = logWithEntries(10);
    dropGuards(db);
    db.exec(`
      UPDATE receipt_entries SET seq = -1 WHERE seq = 5;
      UPDATE receipt_entries SET seq = 5 WHERE seq = 11;
      UPDATE receipt_entries SET seq = 11 WHERE seq = -1;
    `);
    const verdict = log.verifyChain();
    expect(verdict).toMatchObject({ ok: false, firstBadSeq: 5 });
    expect(verdict.problem).toMatch(/does not link/);
  });

  it('detects a cut tail against the receipts index', () => {
    const { log, db } = logWithEntries(10);
    dropGuards(db);
    db.prepare('DELETE FROM receipt_entries WHERE seq >= 14').run();
    expect(log.verifyChain()).toMatchObject({ ok: false, firstBadSeq: 14, entries: 13 });
  });
});
