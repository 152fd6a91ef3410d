import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import type { WritStore } from '../../../src/store/contract.js';
import { migratePostgres } from '../../../src/store/postgres/migrate.js';
import { POSTGRES_MIGRATIONS } from '../../../src/store/postgres/migrations/index.js';
import { openPostgresStore } from '../../../src/store/postgres/index.js';
import { MIGRATIONS } from '../../../src/store/sqlite/migrations/index.js';
import { openSqliteStore } from '../../../src/store/sqlite/sqlite-store.js';
import { createTestDatabase } from './engines.js';
import { epochsOf, release, take } from './helpers.js';

/**
 * A record of epoch bumps merged from two histories: a restore carries the replaced store's rows after
 * the backup's (src/store/sqlite/backup.ts), and `writ store copy` takes such a file's record to
 * PostgreSQL as it is, so a row with a lower floor can follow a higher one. The floor in force is the
 * highest recorded. Each engine gets a place migrated up to the version before the fix (SQLite 14,
 * PostgreSQL 6) holding such a record, then a store opened on it (which migrates).
 */
interface OldPlace {
  insertBump(floor: number, at: number): Promise<void>;
  /** Closes the raw handle and opens a store (migrating). */
  open(): Promise<WritStore>;
}

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const BUMP = `INSERT INTO lease_epoch_bumps (at, kind, margin, floor, keys, leases_ended, max_epoch, actor, reason, detail)
  VALUES ($1, 'RESTORE', $2, $2, 0, 0, 0, 'operator:test', 'merged history', '{}')`;

const PLACES: { name: string; create(): Promise<OldPlace> }[] = [
  {
    name: 'sqlite',
    async create() {
      const dir = mkdtempSync(join(tmpdir(), 'writ-floor-'));
      cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
      const file = join(dir, 'writ.db');
      const db = new Database(file);
      db.exec('CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)');
      for (const m of MIGRATIONS.filter((m) => m.version <= 14)) {
        db.exec(m.sql);
        db.prepare('INSERT INTO schema_migrations VALUES (?, ?, ?)').run(m.version, m.name, 0);
      }
      return {
        insertBump: async (floor, at) => void db.prepare(BUMP.replace(/\$1/, '?').replace(/\$2, \$2/, '?, ?')).run(at, floor, floor),
        async open() {
          db.close();
          const store = await openSqliteStore(file);
          cleanups.push(() => store.close());
          return store;
        },
      };
    },
  },
  {
    name: 'postgres',
    async create() {
      const place = await createTestDatabase('writ_floor');
      cleanups.push(place.drop);
      const client = new pg.Client({ connectionString: place.url });
      await client.connect();
      await migratePostgres(client, POSTGRES_MIGRATIONS.filter((m) => m.version <= 6));
      return {
        insertBump: async (floor, at) => void (await client.query(BUMP, [at, floor])),
        async open() {
          await client.end();
          const store = await openPostgresStore(place.url, { poolSize: 2 });
          cleanups.push(() => store.close());
          return store;
        },
      };
    },
  },
];

for (const place of PLACES) {
  describe(`epoch floor over a merged record of bumps [${place.name}]`, () => {
    it('a key leased for the first time starts above the highest floor, not the latest row\'s, and a new bump adds to the highest', async () => {
      const old = await place.create();
      // The backup's history raised the floor to 1000; the replaced store's, carried after it, only to 5.
      await old.insertBump(1000, 1_000);
      await old.insertBump(5, 2_000);
      const store = await old.open();
      const first = await take(store, ['k:never-leased'], 'agent-a');
      expect(epochsOf(first)).toEqual({ 'k:never-leased': 1001 });
      await release(store, first);
      const b = await store.readWrite((tx) => tx.leases.bumpEpochs({ kind: 'BUMP', margin: 10, actor: 'operator:test', reason: 'PITR', detail: {}, now: 3_000 }));
      expect(b).toMatchObject({ seq: 3, margin: 10, floor: 1010, keys: 1, max_epoch: 1011 });
      expect(epochsOf(await take(store, ['k:after-the-bump'], 'agent-a'))).toEqual({ 'k:after-the-bump': 1011 });
      expect(epochsOf(await take(store, ['k:never-leased'], 'agent-b'))).toEqual({ 'k:never-leased': 1012 });
    });
  });
}
