import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { MIGRATIONS } from '../../src/store/sqlite/migrations/index.js';
import { openDatabase } from '../../src/store/sqlite/database.js';
import { openSqliteStore } from '../../src/store/sqlite/sqlite-store.js';

const dirs: string[] = [];
afterAll(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));

/**
 * A file as `writ store copy` leaves it (rollback-journal mode, marked as moved) by a Writ whose newest
 * migration was `version`: a newer Writ started on it must refuse it before writing anything.
 */
function movedFileAt(version: number): string {
  const dir = mkdtempSync(join(tmpdir(), 'writ-moved-file-'));
  dirs.push(dir);
  const file = join(dir, 'writ.sqlite');
  const db = new Database(file);
  db.exec('CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)');
  for (const m of MIGRATIONS.filter((x) => x.version <= version)) {
    db.exec(m.sql);
    db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(m.version, m.name, 1);
  }
  if (version >= 14) db.prepare('INSERT INTO store_moves (at, moved_to) VALUES (?, ?)').run(1_700_000_000_000, 'postgres://writ@db.internal:5432/writ');
  db.close();
  return file;
}

const digest = (file: string) => createHash('sha256').update(readFileSync(file)).digest('hex');

describe('a file moved to PostgreSQL is refused before anything is written to it', () => {
  it('a newer Writ refuses it without switching it to WAL or migrating it: the file is byte for byte what it was', () => {
    const file = movedFileAt(14);
    const before = digest(file);
    expect(() => openDatabase(file)).toThrow(expect.objectContaining({ code: 'STORE_MOVED' }));
    expect(digest(file)).toBe(before);
    expect(existsSync(`${file}-wal`)).toBe(false);
    const db = new Database(file, { readonly: true });
    expect(db.pragma('journal_mode', { simple: true })).toBe('delete');
    expect((db.prepare('SELECT MAX(version) AS v FROM schema_migrations').get() as { v: number }).v).toBe(14);
    db.close();
  });

  it('a file too old to have store_moves (before migration 14) is no moved file: it opens and is migrated', async () => {
    const file = movedFileAt(13);
    const store = await openSqliteStore(file, { checkpointer: false });
    await store.close();
    const db = new Database(file, { readonly: true });
    expect((db.prepare('SELECT MAX(version) AS v FROM schema_migrations').get() as { v: number }).v).toBe(Math.max(...MIGRATIONS.map((m) => m.version)));
    db.close();
  });
});
