import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { canonicalJson, GENESIS_HASH, ReceiptLog, type LegacyCheckpointPayload } from '../../../src/audit/index.js';
import { legacyChain } from '../../support/legacy-chain.js';
import { ManualClock } from '../../../src/clock.js';
import { KeyRing } from '../../../src/decision/index.js';
import { keyRingCheckpointSigner, signCheckpoint } from '../../../src/service/checkpoint-signer.js';
import type { WritStore } from '../../../src/store/contract.js';
import { migratePostgres } from '../../../src/store/postgres/migrate.js';
import { POSTGRES_MIGRATIONS } from '../../../src/store/postgres/migrations/index.js';
import { openPostgresStore } from '../../../src/store/postgres/index.js';
import { MIGRATIONS } from '../../../src/store/sqlite/migrations/index.js';
import { openSqliteStore } from '../../../src/store/sqlite/sqlite-store.js';
import { createTestDatabase } from './engines.js';

/**
 * Upgrading a store written with ONE global receipt chain (SQLite before migration 11, PostgreSQL
 * before migration 4): its entries become the legacy chain as they are, and everything still verifies,
 * the archived part from the version-1 checkpoint included. Each engine gets a place at the version
 * before, rows written as the old code wrote them, then a store opened on it (which migrates).
 */
interface OldPlace {
  run(sql: string, params?: unknown[]): Promise<void>;
  /** Closes the raw handle and opens a store (migrating). */
  open(): Promise<WritStore>;
  /** Raw SQL on the migrated place, for tampering. */
  tamper(sql: string): Promise<void>;
}

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const PLACES: { name: string; create(): Promise<OldPlace> }[] = [
  {
    name: 'sqlite',
    async create() {
      const dir = mkdtempSync(join(tmpdir(), 'writ-legacy-'));
      cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
      const file = join(dir, 'writ.db');
      const db = new Database(file);
      db.exec('CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)');
      for (const m of MIGRATIONS.filter((m) => m.version < 11)) {
        db.exec(m.sql);
        db.prepare('INSERT INTO schema_migrations VALUES (?, ?, ?)').run(m.version, m.name, 0);
      }
      return {
        run: async (sql, params = []) => void db.prepare(sql.replace(/\$\d+/g, '?')).run(...params),
        async open() {
          db.close();
          const store = await openSqliteStore(file);
          cleanups.push(() => store.close());
          return store;
        },
        async tamper(sql) {
          const raw = new Database(file);
          raw.exec('DROP TRIGGER receipt_entries_no_update');
          raw.exec(sql);
          raw.close();
        },
      };
    },
  },
  {
    name: 'postgres',
    async create() {
      const place = await createTestDatabase('writ_legacy');
      cleanups.push(place.drop);
      const client = new pg.Client({ connectionString: place.url });
      await client.connect();
      await migratePostgres(client, POSTGRES_MIGRATIONS.filter((m) => m.version < 4));
      return {
        run: async (sql, params = []) => void (await client.query(sql, params)),
        async open() {
          await client.end();
          const store = await openPostgresStore(place.url, { poolSize: 2 });
          cleanups.push(() => store.close());
          return store;
        },
        async tamper(sql) {
          const raw = new pg.Client({ connectionString: place.url });
          await raw.connect();
          await raw.query('ALTER TABLE receipt_entries DISABLE TRIGGER receipt_entries_no_update');
          await raw.query(sql);
          await raw.end();
        },
      };
    },
  },
];

/** The old log: r1 intent+completed, r2 rejected, r3 intent PENDING, r4 intent+completed, one global chain 1..6 with version-1 hashes. */
function oldLog() {
  const mk = (receipt_id: string, at: number, extra: Record<string, unknown> = {}) =>
    canonicalJson({ at, principal: 'seo-agent-7', action: 'post.update', resource_key: `wp:post:${receipt_id}`, fields: [], owners: [], request_hash: `h-${receipt_id}`, idempotency_key: null, ...extra });
  const settled = (at: number) => canonicalJson({ at, status: 'COMPLETED', final_version: 1, upstream_status: 200, error: null, conflicts: [] });
  const raw: [string, 'intent' | 'completed' | 'rejected', string][] = [
    ['r1', 'intent', mk('r1', 1_000)],
    ['r1', 'completed', settled(1_100)],
    ['r2', 'rejected', mk('r2', 1_200, { error: { code: 'FORBIDDEN', message: 'no' }, conflicts: [], upstream_status: null })],
    ['r3', 'intent', mk('r3', 1_300)],
    ['r4', 'intent', mk('r4', 1_400)],
    ['r4', 'completed', settled(1_500)],
  ];
  return legacyChain(raw);
}

for (const place of PLACES) {
  describe(`legacy receipt chain after the upgrade [${place.name}]`, () => {
    it('keeps the old global chain as the legacy chain: it verifies from its version-1 checkpoint, takes its PENDING settlements, and new receipts get per-key chains', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'writ-legacy-keys-'));
      cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
      const clock = new ManualClock(10_000);
      const ring = await KeyRing.open(join(dir, 'keys'), clock);
      const old = await place.create();
      const entries = oldLog();
      for (const e of entries) {
        await old.run('INSERT INTO receipt_entries (seq, receipt_id, kind, body, prev_hash, hash) VALUES ($1, $2, $3, $4, $5, $6)', [e.seq, e.receipt_id, e.kind, e.body, e.prev_hash, e.hash]);
      }
      const rows: [string, string, number, number | null, number, number][] = [
        ['r1', 'COMPLETED', 1_000, 1_100, 1, 2],
        ['r2', 'REJECTED', 1_200, 1_200, 3, 3],
        ['r3', 'PENDING', 1_300, null, 4, 4],
        ['r4', 'COMPLETED', 1_400, 1_500, 5, 6],
      ];
      for (const [id, status, created, completed, first, last] of rows) {
        await old.run(
          'INSERT INTO receipts (receipt_id, principal, resource_key, status, idempotency_key, request_hash, created_at, completed_at, first_seq, last_seq) VALUES ($1, $2, $3, $4, NULL, $5, $6, $7, $8, $9)',
          [id, 'seo-agent-7', `wp:post:${id}`, status, `h-${id}`, created, completed, first, last],
        );
      }
      if (place.name === 'postgres') await old.run('UPDATE receipt_chain_head SET seq = $1, hash = $2', [6, entries[5]!.hash]);
      // The old archive: entries 1..3 (r1, r2) behind a version-1 checkpoint, then deleted.
      const v1: LegacyCheckpointPayload = { seq: 1, archived_through: 3, hash: entries[2]!.hash, prev_hash: GENESIS_HASH, count: 3, at: 5_000 };
      await old.run('INSERT INTO receipt_checkpoints (seq, archived_through, hash, prev_hash, count, at, jws) VALUES ($1, $2, $3, $4, $5, $6, $7)', [1, 3, v1.hash, v1.prev_hash, 3, 5_000, signCheckpoint(ring.current(), v1)]);
      await old.run("DELETE FROM receipts WHERE receipt_id IN ('r1', 'r2')");
      await old.run('DELETE FROM receipt_entries WHERE seq <= 3');

      const store = await old.open();
      let n = 0;
      const log = new ReceiptLog({ store, clock, newId: () => `rcpt_${++n}`, checkpoints: keyRingCheckpointSigner(ring) });
      expect(await log.verifyChain()).toMatchObject({ ok: true, entries: 3, chains: 1 });
      const r3 = await log.get('r3');
      expect(r3).toMatchObject({ hash_chain: '', status: 'PENDING', entries: [{ seq: 4, pos: 4, prev_hash: entries[2]!.hash, hash: entries[3]!.hash }] });

      // The PENDING legacy receipt settles in the legacy chain (version-1 hash); a new one opens its key's chain.
      const settled = await log.reconcile('r3', { status: 'FAILED', error: { code: 'UPSTREAM_FAILED', message: 'not applied' } });
      expect(settled.entries[1]).toMatchObject({ pos: 7 });
      expect(settled.entries[1]!.seq).toBeGreaterThan(6);
      const fresh = await log.recordIntent({ principal: 'seo-agent-7', action: 'post.update', resource_key: 'wp:post:new', fields: ['title'], request_hash: 'h-new' });
      expect(fresh).toMatchObject({ hash_chain: 'wp:post:new', entries: [{ pos: 1, prev_hash: GENESIS_HASH }] });
      expect(await log.verifyChain()).toMatchObject({ ok: true, entries: 5, chains: 2 });

      // The first checkpoint over the heads carries the legacy chain's floor over from the version-1 one.
      const c = await log.checkpoint();
      expect(c).toMatchObject({ seq: 1, chains: 2 });
      expect(await store.read((tx) => tx.receipts.checkpointLeaves(1))).toContainEqual({ chain: '', pos: 7, hash: settled.hash, floor_pos: 3, floor_hash: v1.hash });
      expect(await log.verifyChain()).toMatchObject({ ok: true, entries: 5, chains: 2, checkpoint: { seq: 1 } });

      // An altered legacy entry is still found.
      await old.tamper(`UPDATE receipt_entries SET body = replace(body, 'h-r4', 'h-xx') WHERE seq = 5`);
      expect(await log.verifyChain()).toMatchObject({ ok: false, chain: '', firstBadPos: 5 });
    });
  });
}
