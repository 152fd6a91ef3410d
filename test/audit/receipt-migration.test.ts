import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { canonicalJson, chainEntryHash, entryHash, GENESIS_HASH } from '../../src/audit/index.js';
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

/** Rows as the code before migration 11 wrote them: one global chain, version-1 hashes, bodies as ReceiptLog folds them. */
function writeOldReceipts(db: Database.Database): void {
  const body = (id: string, at: number, resource: string, extra: Record<string, unknown> = {}) =>
    canonicalJson({ at, principal: 'seo-agent-7', action: 'post.update', resource_key: resource, fields: ['title'], owners: [], request_hash: `h-${id}`, idempotency_key: null, ...extra });
  const rows: [string, 'intent' | 'completed' | 'rejected', string][] = [
    ['a', 'intent', body('a', 1, 'wp:post:100', { idempotency_key: 'k1' })],
    ['a', 'completed', canonicalJson({ at: 2, status: 'COMPLETED', final_version: 32, upstream_status: 200, error: null, conflicts: [] })],
    ['b', 'intent', body('b', 3, 'wp:post:101')],
    ['rej', 'rejected', body('rej', 4, 'wp:post:102', { error: { code: 'DECISION_INVALID', message: 'no' }, conflicts: [], upstream_status: null })],
  ];
  let prev = GENESIS_HASH;
  rows.forEach(([id, kind, b], i) => {
    const hash = entryHash(prev, b, i + 1, kind, id);
    db.prepare('INSERT INTO receipt_entries (seq, receipt_id, kind, body, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?)').run(i + 1, id, kind, b, prev, hash);
    prev = hash;
  });
  const index = db.prepare('INSERT INTO receipts (receipt_id, principal, resource_key, status, idempotency_key, request_hash, created_at, completed_at, first_seq, last_seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)');
  index.run('a', 'seo-agent-7', 'wp:post:100', 'COMPLETED', 'k1', 'h-a', 1, 2, 1, 2);
  index.run('b', 'seo-agent-7', 'wp:post:101', 'PENDING', null, 'h-b', 3, null, 3, 3);
  index.run('rej', 'seo-agent-7', 'wp:post:102', 'REJECTED', null, 'h-rej', 4, 4, 4, 4);
}

describe('migrations 8 and 11 (receipt log write path, per-key chains)', () => {
  it('keep every receipt of an existing file, and each still shows its entries and verifies (in the legacy chain)', async () => {
    const db = databaseBefore8();
    writeOldReceipts(db);
    migrate(db);
    expect(db.prepare('SELECT COUNT(*) FROM schema_migrations WHERE version IN (8, 11)').pluck().get()).toBe(2);
    const after = newLog(db);
    expect(await after.log.get('a')).toMatchObject({ status: 'COMPLETED', final_version: 32, hash_chain: '', entries: [{ seq: 1, pos: 1 }, { seq: 2, pos: 2 }] });
    expect((await after.log.query({ resource: 'wp:post:100' })).receipts.map((r) => r.receipt_id)).toEqual(['a']);
    expect(await after.log.verifyChain()).toMatchObject({ ok: true, entries: 4, chains: 1 });
    // The idempotency key survived the copies.
    expect((await after.log.findReplay('seo-agent-7', 'k1', 'h-a'))?.receipt_id).toBe('a');
    // A PENDING receipt of the legacy chain settles there; a new receipt opens its key's chain.
    await after.log.complete('b', { status: 'FAILED', upstream_status: 412, error: { code: 'VERSION_CONFLICT', message: 'x' } });
    expect((await after.log.get('b'))!.entries.map((e) => [e.kind, e.pos])).toEqual([['intent', 3], ['failed', 5]]);
    expect((await after.log.recordIntent(intent())).hash_chain).toBe('wp:post:100');
    expect(await after.log.verifyChain()).toMatchObject({ ok: true, entries: 6, chains: 2 });
  });

  it('a writer that skips the receipt log cannot fork a chain, leave a gap, or start a second genesis', async () => {
    const { db, log } = newLog();
    await log.recordIntent(intent());
    await log.recordIntent(intent());
    const head = db.prepare('SELECT seq, pos, hash FROM receipt_entries ORDER BY seq DESC LIMIT 1').get() as { seq: number; pos: number; hash: string };
    const insert = (pos: number, prev: string) =>
      db.prepare("INSERT INTO receipt_entries (seq, chain, pos, receipt_id, kind, body, prev_hash, hash) VALUES (?, 'wp:post:100', ?, ?, ?, ?, ?, ?)")
        .run(head.seq + 1, pos, 'rcpt_x', 'intent', '{"resource_key":"wp:post:100","at":1}', prev, chainEntryHash(prev, '{"resource_key":"wp:post:100","at":1}', 'wp:post:100', pos, head.seq + 1, 'intent', 'rcpt_x'));
    const first = db.prepare('SELECT hash FROM receipt_entries WHERE seq = 1').pluck().get() as string;
    expect(() => insert(head.pos + 1, first)).toThrow(/must extend its chain/); // fork: links to an older entry
    expect(() => insert(head.pos + 2, head.hash)).toThrow(/must extend its chain/); // gap
    expect(() => insert(head.pos + 1, GENESIS_HASH)).toThrow(/must extend its chain/); // second genesis
    expect(() => insert(head.pos + 1, head.hash)).not.toThrow();
    // The chain itself stays sound, but a receipt written around the log has no index row, so no query
    // would ever show it: verify says so.
    expect(await log.verifyChain()).toMatchObject({ ok: false, firstBadSeq: head.seq + 1, problem: expect.stringMatching(/rcpt_x: its entry seq \d+ has no row in the receipts index/) });
  });
});
