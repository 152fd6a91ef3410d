import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { entryHash, GENESIS_HASH } from '../../src/audit/index.js';
import { migrate } from '../../src/store/sqlite/database.js';
import { MIGRATIONS } from '../../src/store/sqlite/migrations/index.js';
import { intent, newLog } from './helpers.js';

/** A database as a release before migration 8 left it (migrations 1–7 only). */
function databaseBefore8() {
  const db = new Database(':memory:');
  db.exec('CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)');
  for (const m of MIGRATIONS.filter((m) => m.version < 8)) {
    db.exec(m.sql);
    db.prepare('INSERT INTO schema_migrations VALUES (?, ?, ?)').run(m.version, m.name, 0);
  }
  return db;
}

describe('migration 8 (receipt log write path)', () => {
  it('keeps every receipt of an existing file, and each still shows its entries and verifies', async () => {
    const db = databaseBefore8();
    const before = newLog(db);
    const a = await before.log.recordIntent(intent({ idempotency_key: 'k1' }));
    await before.log.complete(a.receipt_id, { status: 'COMPLETED', final_version: 32, upstream_status: 200 });
    const b = await before.log.recordIntent(intent({ resource_key: 'wp:post:101' }));
    const rejected = await before.log.recordRejection({ principal: 'seo-agent-7', action: 'post.update', resource_key: 'wp:post:102', fields: ['title'], request_hash: 'h', decision_id: null, policy_revision: null, graph_revision: null, chain: [], expected_version: null, error: { code: 'DECISION_INVALID', message: 'no' } });
    const receipts = [await before.log.get(a.receipt_id), await before.log.get(b.receipt_id), await before.log.get(rejected.receipt_id)];

    migrate(db);
    expect(db.prepare("SELECT COUNT(*) FROM schema_migrations WHERE version = 8").pluck().get()).toBe(1);
    const after = newLog(db);
    expect([await after.log.get(a.receipt_id), await after.log.get(b.receipt_id), await after.log.get(rejected.receipt_id)]).toEqual(receipts);
    expect((await after.log.query({ resource: 'wp:post:100' })).receipts.map((r) => r.receipt_id)).toEqual([a.receipt_id]);
    expect((await after.log.verifyChain()).ok).toBe(true);
    // The idempotency key survived the copy.
    expect((await after.log.recordIntent(intent({ idempotency_key: 'k1' }))).replayed).toBe(true);
    // New entries extend the same chain.
    await after.log.complete(b.receipt_id, { status: 'FAILED', upstream_status: 412, error: { code: 'VERSION_CONFLICT', message: 'x' } });
    expect((await after.log.get(b.receipt_id))!.entries.map((e) => e.kind)).toEqual(['intent', 'failed']);
    expect(await after.log.verifyChain()).toMatchObject({ ok: true, entries: 5 });
  });

  it('a writer that skips the receipt log cannot fork the chain, leave a gap, or start a second genesis', async () => {
    const { db, log } = newLog();
    await log.recordIntent(intent());
    await log.recordIntent(intent());
    const head = db.prepare('SELECT seq, hash FROM receipt_entries ORDER BY seq DESC LIMIT 1').get() as { seq: number; hash: string };
    const insert = (seq: number, prev: string) =>
      db.prepare('INSERT INTO receipt_entries (seq, receipt_id, kind, body, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?)').run(seq, 'rcpt_x', 'intent', '{}', prev, entryHash(prev, '{}', seq, 'intent', 'rcpt_x'));
    const first = db.prepare('SELECT hash FROM receipt_entries WHERE seq = 1').pluck().get() as string;
    expect(() => insert(head.seq + 1, first)).toThrow(/must extend the chain/); // fork: links to an older entry
    expect(() => insert(head.seq + 2, head.hash)).toThrow(/must extend the chain/); // gap
    expect(() => insert(head.seq + 1, GENESIS_HASH)).toThrow(/must extend the chain/); // second genesis
    expect(() => insert(head.seq + 1, head.hash)).not.toThrow();
    // The chain itself stays sound, but a receipt written around the log has no index row, so no query
    // would ever show it: verify says so.
    expect(await log.verifyChain()).toMatchObject({ ok: false, firstBadSeq: head.seq + 1, problem: expect.stringMatching(/rcpt_x: its entry \d+ has no row in the receipts index/) });
  });
});
