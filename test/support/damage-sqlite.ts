import { closeSync, openSync, writeSync } from 'node:fs';
import Database from 'better-sqlite3';

/**
 * Overwrites one page of the SQLite `file` (the root page of `table`), or its 100-byte header, as a failing
 * disk would. `checkpoint`: first fold the WAL into the file (journal_mode DELETE), so that the damage is
 * not hidden by newer copies of the page in the WAL.
 */
export function damageSqlite(file: string, what: { table: string } | 'header', options: { checkpoint?: boolean } = {}): void {
  const db = new Database(file);
  const pageSize = db.pragma('page_size', { simple: true }) as number;
  const root = what === 'header' ? 1 : (db.prepare('SELECT rootpage FROM sqlite_master WHERE name = ?').pluck().get(what.table) as number);
  if (options.checkpoint) db.pragma('journal_mode = DELETE');
  db.close();
  const fd = openSync(file, 'r+');
  try {
    if (what === 'header') writeSync(fd, Buffer.alloc(100, 7), 0, 100, 0);
    else writeSync(fd, Buffer.alloc(pageSize, 0xff), 0, pageSize, (root - 1) * pageSize);
  } finally {
    closeSync(fd);
  }
}
