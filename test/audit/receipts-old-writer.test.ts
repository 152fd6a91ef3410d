import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { canonicalJson, GENESIS_HASH, linkEntry, ReceiptLog, requestHash } from '../../src/audit/index.js';
import { ManualClock } from '../../src/clock.js';
import type { WritStore } from '../../src/store/contract.js';
import { migratePostgres, openPostgresStore, POSTGRES_MIGRATIONS } from '../../src/store/postgres/index.js';
import { openSqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { createTestDatabase } from '../../scripts/test-database.js';
import { migrateSqliteTo } from '../support/sqlite-at-version.js';

/**
 * A Writ from before the receipts index named decisions (SQLite migration 18, PostgreSQL migration 10)
 * still writing to a migrated store: a replica not yet upgraded during a rolling upgrade on PostgreSQL,
 * or a `writ serve` still running on a SQLite file a newer CLI migrated. Its index rows leave
 * decision_id out; the database fills it from the receipt's hashed first entry (SQLite migration 19,
 * PostgreSQL migration 12), so `writ audit verify` raises no false alarm and the decision filter finds
 * them. Each old write below is the statement that Writ ran (git show 4bfd55f^:src/store/…/receipt-repository.ts).
 */

const cleanups: (() => Promise<unknown> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

interface OldWrite {
  receipt_id: string;
  kind: 'intent' | 'rejected';
  chain: string;
  body: string;
  status: 'PENDING' | 'REJECTED';
  request_hash: string | null;
  at: number;
}

interface Place {
  open(): Promise<WritStore>;
  /** Appends a receipt's first entry and its index row as the Writ before 4bfd55f did, from another connection. */
  oldAppend(w: OldWrite): Promise<void>;
}

// SQLite before 4bfd55f: the entry, then the index row without decision_id, in one immediate transaction.
async function sqlitePlace(upTo?: number): Promise<Place> {
  const dir = mkdtempSync(join(tmpdir(), 'writ-old-writer-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'writ.sqlite');
  if (upTo !== undefined) {
    const db = new Database(file);
    migrateSqliteTo(db, upTo);
    db.close();
  } else {
    await (await openSqliteStore(file, { checkpointer: false })).close();
  }
  const old = new Database(file);
  old.pragma('busy_timeout = 5000');
  cleanups.push(() => void old.close());
  const headOf = old.prepare('SELECT pos, hash FROM receipt_entries WHERE chain = ? ORDER BY pos DESC LIMIT 1');
  const nextSeq = old.prepare('SELECT COALESCE(MAX(seq), 0) + 1 FROM receipt_entries').pluck();
  const insertEntry = old.prepare('INSERT INTO receipt_entries (seq, chain, pos, receipt_id, kind, body, prev_hash, hash) VALUES (@seq, @chain, @pos, @receipt_id, @kind, @body, @prev_hash, @hash)');
  const insertIndex = old.prepare(`
      INSERT INTO receipts (receipt_id, principal, resource_key, status, idempotency_key, request_hash, created_at, completed_at, first_seq, last_seq)
      VALUES (@receipt_id, @principal, @resource_key, @status, @idempotency_key, @request_hash, @created_at, @completed_at, @seq, @seq)`);
  const append = old.transaction((w: OldWrite) => {
    const head = (headOf.get(w.chain) as { pos: number; hash: string } | undefined) ?? { pos: 0, hash: GENESIS_HASH };
    const stored = linkEntry(head, nextSeq.get() as number, { chain: w.chain, receipt_id: w.receipt_id, kind: w.kind, body: w.body });
    insertEntry.run(stored);
    insertIndex.run({
      seq: stored.seq, receipt_id: w.receipt_id, principal: 'seo-agent-7', resource_key: w.chain, status: w.status, idempotency_key: null,
      request_hash: w.request_hash, created_at: w.at, completed_at: w.status === 'REJECTED' ? w.at : null,
    });
  });
  return {
    open: async () => {
      const s = await openSqliteStore(file, { checkpointer: false });
      cleanups.push(() => s.close());
      return s;
    },
    oldAppend: async (w) => void append.immediate(w),
  };
}

// PostgreSQL before 4bfd55f: appendIntent's one statement (appendRejection ran it too), verbatim.
const OLD_POSTGRES_APPEND = `WITH s AS (SELECT nextval('receipt_entry_seq') AS seq),
            dup AS (SELECT 1 FROM receipts WHERE receipt_id = $1),
            idx AS (INSERT INTO receipts (receipt_id, principal, resource_key, status, idempotency_key, request_hash, created_at, completed_at, first_seq, last_seq)
                    SELECT $1, $5, $6, $7, $8, $9, $10, $11, s.seq, s.seq FROM s WHERE NOT EXISTS (SELECT 1 FROM dup)
                    ON CONFLICT (principal, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
                    RETURNING first_seq AS seq),
            n AS (SELECT $4::text COLLATE "C" AS chain, idx.seq FROM idx),
  head AS (INSERT INTO receipt_chains AS rc (chain, pos, hash, prev_hash)
             SELECT n.chain, 1, writ_receipt_hash('${GENESIS_HASH}', $3, n.chain, 1, n.seq, $2, $1), '${GENESIS_HASH}' FROM n
           ON CONFLICT (chain) DO UPDATE
             SET pos = rc.pos + 1, prev_hash = rc.hash, hash = writ_receipt_hash(rc.hash, $3, rc.chain, rc.pos + 1, (SELECT seq FROM n), $2, $1)
           RETURNING rc.chain, rc.pos, rc.hash, rc.prev_hash),
  ent AS (INSERT INTO receipt_entries (seq, receipt_id, kind, body, prev_hash, hash, chain, pos)
            SELECT n.seq, $1, $2, $3, head.prev_hash, head.hash, head.chain, head.pos FROM n, head
          RETURNING seq, receipt_id, kind, body, prev_hash, hash, chain, pos)
       SELECT EXISTS (SELECT 1 FROM dup) AS duplicate_id, e.seq FROM (SELECT 1) one LEFT JOIN ent e ON true`;

async function postgresPlace(upTo?: number): Promise<Place> {
  const db = await createTestDatabase('writ_old_writer');
  cleanups.push(db.drop);
  const c = new pg.Client(db.url);
  await c.connect();
  cleanups.push(() => c.end());
  await migratePostgres(c, upTo === undefined ? POSTGRES_MIGRATIONS : POSTGRES_MIGRATIONS.filter((m) => m.version <= upTo));
  return {
    open: async () => {
      const s = await openPostgresStore(db.url, { poolSize: 2 });
      cleanups.push(() => s.close());
      return s;
    },
    oldAppend: async (w) => {
      const { rows } = await c.query(OLD_POSTGRES_APPEND, [w.receipt_id, w.kind, w.body, w.chain, 'seo-agent-7', w.chain, w.status, null, w.request_hash, w.at, w.status === 'REJECTED' ? w.at : null]);
      expect(rows[0].seq).not.toBeNull();
    },
  };
}

const PLACES = { sqlite: sqlitePlace, postgres: postgresPlace };

/** What the Writ before 4bfd55f hashed as a receipt's first entry (the intent's or the rejection's body). */
function oldFirst(receipt_id: string, kind: 'intent' | 'rejected', chain: string, decision: string | null, at: number): OldWrite {
  const hash = requestHash({ receipt_id });
  const start = {
    at, action: 'update_post', authority_epoch: null, chain: [], decision_id: decision, expected_version: 0, fields: ['title'], graph_revision: null, idempotency_key: null,
    lease_epoch: null, lease_id: null, owners: [], ownership_epoch: null, policy_revision: null, principal: 'seo-agent-7', request_hash: hash, resource_key: chain,
  };
  const body = kind === 'intent' ? start : { ...start, error: { code: 'DECISION_REPLAYED', message: 'used' }, conflicts: [], upstream_status: null };
  return { receipt_id, kind, chain, body: canonicalJson(body), status: kind === 'intent' ? 'PENDING' : 'REJECTED', request_hash: hash, at };
}

describe.each(['sqlite', 'postgres'] as const)('%s', (engine) => {
  it('receipts an old Writ appends to a migrated store name their decision in the index: verify passes, the filter finds them', async () => {
    const place = await PLACES[engine]();
    const store = await place.open();
    const log = new ReceiptLog({ store, clock: new ManualClock(5_000), newId: (() => { let n = 0; return () => `rcpt_new_${++n}`; })() });
    const mine = await log.recordIntent({ principal: 'seo-agent-7', action: 'update_post', fields: ['title'], resource_key: 'wp:post:1', decision_id: 'dec-new', request_hash: requestHash({ n: 1 }) });

    await place.oldAppend(oldFirst('rcpt_old_1', 'intent', 'wp:post:1', 'dec-old', 6_000));
    await place.oldAppend(oldFirst('rcpt_old_2', 'rejected', 'wp:post:2', 'dec-old', 7_000));
    await place.oldAppend(oldFirst('rcpt_old_3', 'rejected', 'wp:post:2', null, 8_000));
    // The old intent settled by this Writ (the settlement never touched the decision).
    await log.complete('rcpt_old_1', { status: 'COMPLETED', final_version: 1, upstream_status: 200 });

    expect(await log.verifyChain()).toMatchObject({ ok: true, entries: 5 });
    const ids = async (decision_id: string) => (await log.query({ decision_id })).receipts.map((r) => [r.receipt_id, r.status]);
    expect(await ids('dec-old')).toEqual([['rcpt_old_1', 'COMPLETED'], ['rcpt_old_2', 'REJECTED']]);
    expect(await ids('dec-new')).toEqual([[mine.receipt_id, 'PENDING']]);
    const rows = await store.read((tx) => tx.receipts.indexOf(['rcpt_old_3']));
    expect(rows.map((r) => r.row.decision_id)).toEqual([null]);
  });

  it('an old Writ\'s receipt whose body is not JSON is still appended, its index naming no decision, and verify reports the entry', async () => {
    const place = await PLACES[engine]();
    const store = await place.open();
    await place.oldAppend({ receipt_id: 'rcpt_bad', kind: 'rejected', chain: 'wp:post:9', body: '{"at":1000,"decision_id":"dec-x",', status: 'REJECTED', request_hash: null, at: 1_000 });
    const found = await store.read((tx) => tx.receipts.indexOf(['rcpt_bad']));
    expect(found.map((f) => f.row.decision_id)).toEqual([null]);
    const verdict = await new ReceiptLog({ store, clock: new ManualClock(10_000) }).verifyChain();
    expect(verdict).toMatchObject({ ok: false, chain: 'wp:post:9', firstBadPos: 1 });
    expect(verdict.problem).toMatch(/not the JSON object Writ writes/);
  });

  it('receipts an old Writ appended after the decision column came and before its trigger are mended by the migration', async () => {
    const place = await PLACES[engine](engine === 'sqlite' ? 18 : 11);
    await place.oldAppend(oldFirst('rcpt_gap_1', 'rejected', 'wp:post:3', 'dec-gap', 1_000));
    await place.oldAppend(oldFirst('rcpt_gap_2', 'rejected', 'wp:post:3', null, 2_000));
    const store = await place.open();
    const log = new ReceiptLog({ store, clock: new ManualClock(10_000) });
    expect(await log.verifyChain()).toMatchObject({ ok: true, entries: 2 });
    expect((await log.query({ decision_id: 'dec-gap' })).receipts.map((r) => r.receipt_id)).toEqual(['rcpt_gap_1']);
  });
});

describe('postgres', () => {
  it('an old replica\'s receipt in flight while migration 12 runs is mended or filled in, never left out', async () => {
    const db = await createTestDatabase('writ_old_writer');
    cleanups.push(db.drop);
    const clients = await Promise.all([0, 1, 2].map(async () => {
      const c = new pg.Client(db.url);
      await c.connect();
      cleanups.push(() => c.end());
      return c;
    }));
    const [old, migrator, watcher] = clients as [pg.Client, pg.Client, pg.Client];
    await migratePostgres(migrator, POSTGRES_MIGRATIONS.filter((m) => m.version <= 11));
    const w = oldFirst('rcpt_in_flight', 'rejected', 'wp:post:4', 'dec-in-flight', 1_000);
    await old.query('BEGIN');
    await old.query(OLD_POSTGRES_APPEND, [w.receipt_id, w.kind, w.body, w.chain, 'seo-agent-7', w.chain, w.status, null, w.request_hash, w.at, w.at]);
    const migrating = migratePostgres(migrator, POSTGRES_MIGRATIONS.filter((m) => m.version <= 12));
    // The migration waits for the old replica's transaction (CREATE TRIGGER's lock on receipts) …
    for (let i = 0; ; i++) {
      const { rows } = await watcher.query("SELECT 1 FROM pg_locks l JOIN pg_class c ON c.oid = l.relation WHERE c.relname = 'receipts' AND NOT l.granted");
      if (rows.length > 0) break;
      if (i > 200) throw new Error('the migration never waited for the old replica');
      await new Promise((r) => setTimeout(r, 25));
    }
    // … which commits its row without a decision, after the migration began.
    await old.query('COMMIT');
    expect((await migrating).applied).toEqual([12]);
    const store = await openPostgresStore(db.url, { poolSize: 2 });
    cleanups.push(() => store.close());
    const log = new ReceiptLog({ store, clock: new ManualClock(10_000) });
    expect(await log.verifyChain()).toMatchObject({ ok: true, entries: 1 });
    expect((await log.query({ decision_id: 'dec-in-flight' })).receipts.map((r) => r.receipt_id)).toEqual(['rcpt_in_flight']);
  });
});
