import { MIGRATIONS } from '../../src/store/sqlite/migrations/index.js';
import type { SqliteDatabase } from '../../src/store/sqlite/database.js';

/**
 * Migrates `db` exactly as a Writ whose last migration was `upTo` left it: each migration's SQL, then its
 * JS step (`run`, e.g. hashing the graph log), recorded in schema_migrations. For tests of what a later
 * Writ (or an old one still writing) does with such a store.
 */
export function migrateSqliteTo(db: SqliteDatabase, upTo: number): void {
  db.pragma('journal_mode = WAL');
  db.exec('CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)');
  for (const m of MIGRATIONS.filter((x) => x.version <= upTo)) {
    db.exec(m.sql);
    m.run?.(db);
    db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(m.version, m.name, 0);
  }
}
