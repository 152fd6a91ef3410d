import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { copySqliteToPostgres } from '../../src/store/copy-to-postgres.js';
import { migratePostgres, openPostgresStore, POSTGRES_MIGRATIONS } from '../../src/store/postgres/index.js';
import { backupSqliteStore, restoreSqliteStore } from '../../src/store/sqlite/backup.js';
import { MIGRATIONS } from '../../src/store/sqlite/migrations/index.js';
import { openSqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { createTestDatabase, sql } from './conformance/engines.js';

/**
 * Migration 13 (SQLite) / 6 (PostgreSQL): incidents name the environment they were declared for. An
 * incident declared before keeps no environment (null), on both engines, through `writ store copy`
 * and through a backup restored by a newer Writ.
 */

const dirs: string[] = [];
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});
afterAll(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));

const NOW = Date.UTC(2026, 5, 1, 12);
const OLD = { id: 'checkout-down', declared_by: 'incident-commander', reason: 'checkout is returning 500s', decision_id: 'dec-old', declared_at: NOW - 60_000, ends_at: NOW + 3_600_000, resolved_at: null };

function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'writ-incident-env-'));
  dirs.push(d);
  return d;
}

/** A file as a deployment that ran migrations 1-12 left it, with an incident declared by that version (no environment column). */
function fileAtVersion12(): string {
  const file = join(tempDir(), 'writ.sqlite');
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.exec('CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)');
  for (const m of MIGRATIONS.filter((x) => x.version <= 12)) {
    db.exec(m.sql);
    db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(m.version, m.name, NOW);
  }
  db.prepare('INSERT INTO incidents (id, declared_by, reason, decision_id, declared_at, ends_at) VALUES (@id, @declared_by, @reason, @decision_id, @declared_at, @ends_at)').run(OLD);
  db.close();
  return file;
}

describe('SQLite: migration 13 on a file written before it', () => {
  it('keeps the incident, with no environment; new incidents record theirs', async () => {
    const file = fileAtVersion12();
    const store = await openSqliteStore(file, { checkpointer: false });
    cleanups.push(() => store.close());
    expect(await store.read((tx) => tx.incidents.get(OLD.id))).toEqual({ ...OLD, environment: null });
    await store.readWrite((tx) => tx.incidents.declare({ ...OLD, id: 'dev-db-slow', decision_id: 'dec-new', environment: 'development' }));
    expect((await store.read((tx) => tx.incidents.active(NOW))).map((i) => [i.id, i.environment])).toEqual([['checkout-down', null], ['dev-db-slow', 'development']]);
  });

  it('a backup taken before the migration is restored with the incident (no environment); a backup taken after keeps each environment', async () => {
    const dir = tempDir();
    const data = join(dir, 'writ.sqlite');
    await restoreSqliteStore(fileAtVersion12(), data, { epochMargin: 0, actor: 'test', reason: 'drill', now: NOW });
    const store = await openSqliteStore(data, { checkpointer: false });
    await store.readWrite((tx) => tx.incidents.declare({ ...OLD, id: 'prod-after', decision_id: 'dec-after', environment: 'production' }));
    const backup = join(dir, 'backup.sqlite');
    await backupSqliteStore(store.writer, backup);
    await store.close();
    const again = join(tempDir(), 'writ.sqlite');
    await restoreSqliteStore(backup, again, { epochMargin: 0, actor: 'test', reason: 'drill', now: NOW });
    const restored = await openSqliteStore(again, { checkpointer: false });
    cleanups.push(() => restored.close());
    expect((await restored.read((tx) => tx.incidents.active(NOW))).map((i) => [i.id, i.environment])).toEqual([['checkout-down', null], ['prod-after', 'production']]);
  });
});

describe('PostgreSQL: migration 6 on a database migrated before it', () => {
  it('keeps the incident, with no environment; new incidents record theirs', async () => {
    const db = await createTestDatabase('writ_incident_env');
    cleanups.push(db.drop);
    const c = new pg.Client(db.url);
    await c.connect();
    try {
      expect((await migratePostgres(c, POSTGRES_MIGRATIONS.filter((m) => m.version <= 5))).version).toBe(5);
      await c.query('INSERT INTO incidents (id, declared_by, reason, decision_id, declared_at, ends_at) VALUES ($1, $2, $3, $4, $5, $6)', [OLD.id, OLD.declared_by, OLD.reason, OLD.decision_id, OLD.declared_at, OLD.ends_at]);
    } finally {
      await c.end();
    }
    const store = await openPostgresStore(db.url, { poolSize: 2 });
    cleanups.push(() => store.close());
    expect((await sql<{ version: number }>(db.url, 'SELECT max(version) AS version FROM schema_migrations'))[0]!.version).toBe(Math.max(...POSTGRES_MIGRATIONS.map((m) => m.version)));
    expect(await store.read((tx) => tx.incidents.get(OLD.id))).toEqual({ ...OLD, environment: null });
    await store.readWrite((tx) => tx.incidents.declare({ ...OLD, id: 'dev-db-slow', decision_id: 'dec-new', environment: 'development' }));
    expect((await store.read((tx) => tx.incidents.active(NOW))).map((i) => [i.id, i.environment])).toEqual([['checkout-down', null], ['dev-db-slow', 'development']]);
  });
});

describe('writ store copy carries each incident\'s environment', () => {
  it('from a file written before migration 13 (null) and after it (the environment)', async () => {
    const file = fileAtVersion12();
    const store = await openSqliteStore(file, { checkpointer: false });
    await store.readWrite((tx) => tx.incidents.declare({ ...OLD, id: 'dev-db-slow', decision_id: 'dec-new', environment: 'development' }));
    await store.close();
    const db = await createTestDatabase('writ_incident_env');
    cleanups.push(db.drop);
    const report = await copySqliteToPostgres(file, db.url);
    expect(report.copied.incidents).toBe(2);
    expect(await sql(db.url, 'SELECT id, environment FROM incidents ORDER BY id')).toEqual([{ id: 'checkout-down', environment: null }, { id: 'dev-db-slow', environment: 'development' }]);
  });
});
