import Database from 'better-sqlite3';
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';

export type UpstreamDatabase = Database.Database;

/**
 * The sample upstream's own SQLite file: a separate system from Writ, so its own tiny schema (not
 * Writ's migrations), created idempotently. Same durability settings as Writ's store.
 */
export function openUpstreamDatabase(file: string): UpstreamDatabase {
  if (file !== ':memory:') mkdirSync(dirname(file), { recursive: true });
  const db = new Database(file);
  db.pragma('busy_timeout = 5000');
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
  db.exec(`
    CREATE TABLE IF NOT EXISTS posts (
      id            TEXT    PRIMARY KEY,
      revision      INTEGER NOT NULL,
      fields        TEXT    NOT NULL,
      updated_by    TEXT,
      last_receipt  TEXT,
      updated_at    INTEGER NOT NULL
    );
    CREATE TABLE IF NOT EXISTS revisions (
      post_id       TEXT    NOT NULL,
      revision      INTEGER NOT NULL,
      operation     TEXT    NOT NULL,
      fields        TEXT    NOT NULL,
      changed       TEXT    NOT NULL,
      written_by    TEXT,
      fencing_epoch INTEGER,
      receipt_id    TEXT,
      at            INTEGER NOT NULL,
      fencing       TEXT,
      PRIMARY KEY (post_id, revision)
    );
    CREATE UNIQUE INDEX IF NOT EXISTS revisions_receipt ON revisions (post_id, receipt_id) WHERE receipt_id IS NOT NULL;
    CREATE TABLE IF NOT EXISTS requests (
      seq           INTEGER PRIMARY KEY,
      at            INTEGER NOT NULL,
      method        TEXT    NOT NULL,
      url           TEXT    NOT NULL,
      post_id       TEXT,
      status        INTEGER NOT NULL,
      code          TEXT,
      principal     TEXT,
      fencing_epoch TEXT,
      if_match      TEXT,
      receipt_id    TEXT
    );
    CREATE INDEX IF NOT EXISTS requests_post ON requests (post_id, seq);
    CREATE TABLE IF NOT EXISTS fences (
      post_id       TEXT    NOT NULL,
      key           TEXT    NOT NULL,
      highest       INTEGER NOT NULL,
      PRIMARY KEY (post_id, key)
    ) WITHOUT ROWID;
    CREATE TABLE IF NOT EXISTS field_revisions (
      post_id       TEXT    NOT NULL,
      field         TEXT    NOT NULL,
      revision      INTEGER NOT NULL,
      PRIMARY KEY (post_id, field)
    ) WITHOUT ROWID;
  `);
  upgradeToPerKeyFences(db);
  return db;
}

/**
 * A file written before fences were kept per key has one epoch per post (`posts.highest_epoch`) and no
 * field revisions. Its high-water marks must survive the upgrade, so they become the `*` key's, and each
 * field's revision is the last one whose write changed it.
 */
function upgradeToPerKeyFences(db: UpstreamDatabase): void {
  const hasColumn = db.prepare("SELECT COUNT(*) FROM pragma_table_info('revisions') WHERE name = 'fencing'").pluck();
  if ((hasColumn.get() as number) > 0) return;
  db.transaction(() => {
    db.exec(`
      ALTER TABLE revisions ADD COLUMN fencing TEXT;
      UPDATE revisions SET fencing = CAST(fencing_epoch AS TEXT) WHERE fencing_epoch IS NOT NULL;
      INSERT OR IGNORE INTO fences (post_id, key, highest)
        SELECT id, '*', highest_epoch FROM posts WHERE highest_epoch IS NOT NULL;
      INSERT OR IGNORE INTO field_revisions (post_id, field, revision)
        SELECT r.post_id, j.key, MAX(r.revision) FROM revisions r, json_each(r.changed) j GROUP BY r.post_id, j.key;
    `);
  }).immediate();
}
