import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { refuseDivergedHistory } from '../../src/store/migration-history.js';
import { migratePostgres, openPostgresStore, POSTGRES_MIGRATIONS } from '../../src/store/postgres/index.js';
import { openDatabase, SQLITE_SCHEMA_VERSION } from '../../src/store/sqlite/database.js';
import { MIGRATIONS } from '../../src/store/sqlite/migrations/index.js';
import { openSqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { createTestDatabase, sql } from './conformance/engines.js';
import { migrateSqliteTo } from '../support/sqlite-at-version.js';

// A store whose applied migrations are not a prefix of the code's (a database that ran a branch's
// numbering) is refused, SCHEMA_DIVERGED, naming what is missing, unknown or renamed, and left as it was;
// a store migrated by a newer Writ is still SCHEMA_TOO_NEW; a store of every shipped version migrates on.
// (No shipped migration was ever renumbered or renamed: git log --follow of every file under
// src/store/*/migrations shows one version and one name each, so the names older Writs recorded are these.)

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const PG_LAST = Math.max(...POSTGRES_MIGRATIONS.map((m) => m.version));

function sqliteFile(): string {
  const dir = mkdtempSync(join(tmpdir(), 'writ-history-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return join(dir, 'writ.sqlite');
}

/** A SQLite file migrated exactly as a Writ whose last migration was `upTo` left it. */
function sqliteAt(upTo: number): string {
  const file = sqliteFile();
  const db = new Database(file);
  migrateSqliteTo(db, upTo);
  db.close();
  return file;
}

function sqliteRows(file: string): unknown[] {
  const db = new Database(file, { readonly: true });
  try {
    return db.prepare('SELECT * FROM schema_migrations ORDER BY version').all();
  } finally {
    db.close();
  }
}

function sqliteEdit(file: string, statement: string): void {
  const db = new Database(file);
  db.exec(statement);
  db.close();
}

async function pgDatabase(): Promise<string> {
  const db = await createTestDatabase('writ_history');
  cleanups.push(db.drop);
  return db.url;
}

async function pgAt(upTo: number): Promise<string> {
  const url = await pgDatabase();
  const c = new pg.Client(url);
  await c.connect();
  try {
    await migratePostgres(c, POSTGRES_MIGRATIONS.filter((m) => m.version <= upTo));
  } finally {
    await c.end();
  }
  return url;
}

const pgRows = (url: string) => sql(url, 'SELECT version, name, applied_at FROM schema_migrations ORDER BY version');

describe('a store whose applied migrations are not a prefix of the code\'s is refused (SCHEMA_DIVERGED) [sqlite]', () => {
  it('a gap: a migration missing below one the store has; nothing is applied, not even the missing one', async () => {
    const file = sqliteAt(SQLITE_SCHEMA_VERSION);
    sqliteEdit(file, `DELETE FROM schema_migrations WHERE version = ${SQLITE_SCHEMA_VERSION - 1}`);
    const before = sqliteRows(file);
    await expect(openSqliteStore(file)).rejects.toMatchObject({
      code: 'SCHEMA_DIVERGED',
      message: expect.stringMatching(new RegExp(`SQLite store ${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}'s applied migrations are not this Writ's: it lacks this Writ's migration ${SQLITE_SCHEMA_VERSION - 1} \\(.+\\) though it has later ones \\(${SQLITE_SCHEMA_VERSION}\\).*start the Writ that migrated it, or put back a backup.*nothing was changed$`)),
      details: { missing: [SQLITE_SCHEMA_VERSION - 1], unknown: [], renamed: [], file },
    });
    expect(() => openDatabase(file, { migrate: false })).toThrow(expect.objectContaining({ code: 'SCHEMA_DIVERGED' }));
    expect(sqliteRows(file)).toEqual(before);
  });

  it("a branch's migration where this Writ has another: a number recorded under another name, or this Writ's last missing below a branch's next", async () => {
    const renamed = sqliteAt(SQLITE_SCHEMA_VERSION);
    sqliteEdit(renamed, `UPDATE schema_migrations SET name = 'a branch''s migration' WHERE version = ${SQLITE_SCHEMA_VERSION}`);
    await expect(openSqliteStore(renamed)).rejects.toMatchObject({
      code: 'SCHEMA_DIVERGED',
      message: expect.stringContaining(`its migration ${SQLITE_SCHEMA_VERSION} is "a branch's migration" where this Writ's ${SQLITE_SCHEMA_VERSION} is "${MIGRATIONS.at(-1)!.name}"`),
      details: { renamed: [{ version: SQLITE_SCHEMA_VERSION, recorded_name: "a branch's migration", name: MIGRATIONS.at(-1)!.name }] },
    });
    // Ran a branch numbered past this Writ's last, without this Writ's last: not a newer Writ (that has them all).
    const skipped = sqliteAt(SQLITE_SCHEMA_VERSION - 1);
    sqliteEdit(skipped, `INSERT INTO schema_migrations VALUES (${SQLITE_SCHEMA_VERSION + 1}, 'a branch''s migration', 0)`);
    const before = sqliteRows(skipped);
    await expect(openSqliteStore(skipped)).rejects.toMatchObject({ code: 'SCHEMA_DIVERGED', details: { missing: [SQLITE_SCHEMA_VERSION], schema_version: SQLITE_SCHEMA_VERSION + 1 } });
    expect(sqliteRows(skipped)).toEqual(before);
  });

  it('a store migrated by a newer Writ (all of this one\'s, then more) is still SCHEMA_TOO_NEW', async () => {
    const file = sqliteAt(SQLITE_SCHEMA_VERSION);
    sqliteEdit(file, `INSERT INTO schema_migrations VALUES (${SQLITE_SCHEMA_VERSION + 1}, 'from a newer Writ', 0)`);
    await expect(openSqliteStore(file)).rejects.toMatchObject({ code: 'SCHEMA_TOO_NEW' });
  });

  it('a store of every shipped version starts and is migrated to this one', async () => {
    for (let v = 1; v <= SQLITE_SCHEMA_VERSION; v++) {
      const file = sqliteAt(v);
      const store = await openSqliteStore(file);
      await store.close();
      expect((sqliteRows(file) as { version: number }[]).map((r) => r.version), `from version ${v}`).toEqual(MIGRATIONS.map((m) => m.version));
    }
  });
});

describe('a database whose applied migrations are not a prefix of the code\'s is refused (SCHEMA_DIVERGED) [postgres]', () => {
  it('a gap: migrating on by the highest number would skip it; nothing is applied', async () => {
    const url = await pgAt(PG_LAST);
    await sql(url, `DELETE FROM schema_migrations WHERE version = ${PG_LAST - 2}`);
    const before = await pgRows(url);
    for (const migrate of [true, false]) {
      await expect(openPostgresStore(url, { migrate })).rejects.toMatchObject({
        code: 'SCHEMA_DIVERGED',
        message: expect.stringMatching(new RegExp(`PostgreSQL database's applied migrations are not this Writ's: it lacks this Writ's migration ${PG_LAST - 2} \\(.+\\) though it has later ones \\(${PG_LAST - 1}, ${PG_LAST}\\)`)),
        details: { missing: [PG_LAST - 2], unknown: [], renamed: [] },
      });
    }
    expect(await pgRows(url)).toEqual(before);
  });

  it('a gap in a database behind the code: the missing migration is named, the later ones are not applied', async () => {
    const url = await pgAt(PG_LAST - 1);
    await sql(url, 'DELETE FROM schema_migrations WHERE version = 2');
    const before = await pgRows(url);
    await expect(openPostgresStore(url)).rejects.toMatchObject({ code: 'SCHEMA_DIVERGED', details: { missing: [2], schema_version: PG_LAST - 1 } });
    expect(await pgRows(url)).toEqual(before);
  });

  it('a number recorded under another name, and a number the code does not have among its own', async () => {
    const url = await pgAt(PG_LAST);
    await sql(url, `UPDATE schema_migrations SET name = 'a branch''s migration' WHERE version = ${PG_LAST}`);
    await expect(openPostgresStore(url)).rejects.toMatchObject({
      code: 'SCHEMA_DIVERGED',
      message: expect.stringContaining(`its migration ${PG_LAST} is "a branch's migration" where this Writ's ${PG_LAST} is "${POSTGRES_MIGRATIONS.at(-1)!.name}"`),
    });
    // A code whose numbers have a hole (none shipped has): a database that has that number is refused too.
    const holed = POSTGRES_MIGRATIONS.filter((m) => m.version !== PG_LAST - 1);
    const other = await pgAt(PG_LAST);
    const c = new pg.Client(other);
    await c.connect();
    cleanups.push(() => c.end());
    await expect(migratePostgres(c, holed)).rejects.toMatchObject({
      code: 'SCHEMA_DIVERGED',
      message: expect.stringContaining(`it has a migration ${PG_LAST - 1} (${POSTGRES_MIGRATIONS.at(-2)!.name}) that this Writ does not have`),
      details: { unknown: [PG_LAST - 1] },
    });
  });

  it('a database migrated by a newer Writ is still SCHEMA_TOO_NEW', async () => {
    const url = await pgAt(PG_LAST);
    await sql(url, `INSERT INTO schema_migrations (version, name) VALUES (${PG_LAST + 1}, 'from a newer Writ')`);
    await expect(openPostgresStore(url)).rejects.toMatchObject({ code: 'SCHEMA_TOO_NEW' });
  });

  it('a database of every shipped version starts and is migrated to this one', { timeout: 120_000 }, async () => {
    for (let v = 0; v <= PG_LAST; v++) {
      const url = await pgAt(v);
      const store = await openPostgresStore(url, { poolSize: 1 });
      await store.close();
      expect((await pgRows(url) as { version: number }[]).map((r) => r.version), `from version ${v}`).toEqual(POSTGRES_MIGRATIONS.map((m) => m.version));
    }
  });
});

describe('refuseDivergedHistory', () => {
  const known = [1, 2, 3, 4].map((version) => ({ version, name: `m${version}` }));
  const at = (...versions: number[]) => versions.map((version) => ({ version, name: `m${version}` }));
  it('passes a prefix (none, some, all) and a newer Writ\'s (all, then more); refuses the rest', () => {
    for (const ok of [at(), at(1), at(1, 2, 3), at(1, 2, 3, 4), at(1, 2, 3, 4, 5, 6)]) expect(() => refuseDivergedHistory('store', ok, known)).not.toThrow();
    for (const bad of [at(2), at(1, 3), at(1, 2, 3, 5), [...at(1), { version: 2, name: 'other' }]]) {
      expect(() => refuseDivergedHistory('store', bad, known), JSON.stringify(bad)).toThrow(expect.objectContaining({ code: 'SCHEMA_DIVERGED' }));
    }
  });
});
