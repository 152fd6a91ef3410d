import Database from 'better-sqlite3';
import { closeSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync, rmSync, statSync, writeFileSync, type Stats } from 'node:fs';
import { dirname } from 'node:path';
import { WritError } from '../../errors.js';
import { refuseDivergedHistory, type MigrationRecord } from '../migration-history.js';
import { MIGRATIONS } from './migrations/index.js';

export type SqliteDatabase = Database.Database;

/**
 * Opens (creating if needed) the Writ SQLite file: WAL, synchronous=FULL (coordination state must
 * survive a crash, and `synchronous` is per connection: migrations and tools that commit directly sync
 * in COMMIT), a busy timeout so that several processes can share it, and all numbered migrations
 * applied. The store's group commit then switches its write connection to NORMAL and syncs the WAL
 * itself, off the event loop, before it answers (see wal-sync.ts). `migrate: false` (a command that
 * must write nothing, such as a dry run) refuses a schema older than this Writ's instead of migrating it.
 * A file moved to PostgreSQL (`writ store copy`) is refused (STORE_MOVED) unless `moved: 'allow'`,
 * before anything is written to it (its mark is read first, on a file of any schema, and the marker
 * beside it: moveMarkerOf).
 */
export function openDatabase(file: string, options: { busyTimeoutMs?: number; migrate?: boolean; moved?: 'refuse' | 'allow' } = {}): SqliteDatabase {
  if (file !== ':memory:') makeDataDirectory(dirname(file));
  const named = fileIdentity(file);
  const db = new Database(file);
  const busyTimeoutMs = options.busyTimeoutMs ?? 5000;
  db.pragma(`busy_timeout = ${busyTimeoutMs}`);
  try {
    // Read before anything is written (WAL mode, migrations): a refused file is left as it was.
    if (options.moved !== 'allow') refuseMoved(db, file);
    // `writ restore` holds the file it replaces locked until it has renamed the restored one over it:
    // a connection opened on it meanwhile gets its first lock only then, on a file no longer named so
    // (SQLite refuses to write to it, SQLITE_READONLY_DBMOVED, or the name now leads elsewhere): the
    // restored file is opened instead. Once in WAL mode this connection is seen by a restore
    // (STORE_IN_USE), so the name stays ours.
    let moved = false;
    try {
      walMode(db, busyTimeoutMs);
    } catch (e) {
      if ((e as { code?: unknown }).code !== 'SQLITE_READONLY_DBMOVED') throw e;
      moved = true;
    }
    if (moved || fileIdentity(file) !== named) {
      db.close();
      return openDatabase(file, options);
    }
    db.pragma('synchronous = FULL');
    db.pragma('foreign_keys = ON');
    if (options.migrate === false) requireCurrentSchema(db);
    else migrate(db);
  } catch (e) {
    db.close();
    const damage = sqliteDamage(e);
    throw damage === null ? lockedError(e, file, busyTimeoutMs) : storeDamagedError(file, damage, null);
  }
  return db;
}

/**
 * SQLITE_BUSY (or LOCKED) while opening: another process held the file locked for the whole busy
 * timeout, as `writ restore` and `writ store copy` hold it while they run (an exclusive lock in
 * rollback-journal mode keeps even readers out). STORE_IN_USE, saying so; any other error as it is.
 */
function lockedError(e: unknown, file: string, busyTimeoutMs: number): unknown {
  const code = (e as { code?: unknown }).code;
  if (!(typeof code === 'string' && (code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED')))) return e;
  return new WritError('STORE_IN_USE', `${file} is held locked by another process (a writ restore or writ store copy in progress, or a long write), which did not let go within the busy timeout (${busyTimeoutMs} ms): wait for it to finish (a writ store copy moves the store: start on the database it names), then start again; nothing was changed`, { data_file: file });
}

/** Which file `file` names now (device and inode), or null (none, or an in-memory database). */
function fileIdentity(file: string): string | null {
  if (file === ':memory:') return null;
  const s = statSync(file, { throwIfNoEntry: false });
  return s === undefined ? null : `${s.dev}:${s.ino}`;
}

/**
 * Makes the directory of the store file if it is missing; a path there that is not a directory (a file
 * named as the data directory, or above it) is refused with what to do, before anything is created.
 * Returns the directories it made, deepest first (for a command that fails to take them away again).
 */
export function makeDataDirectory(dir: string): string[] {
  const missing: string[] = [];
  for (let d = dir; ; d = dirname(d)) {
    const found = statBelowFile(d);
    if (found?.isDirectory()) break;
    if (found) {
      throw new WritError('UNPROCESSABLE', `the data directory ${dir} is not a directory (${d === dir ? 'it is a file' : `${d} is a file`}): name a directory with --data-dir or WRIT_DATA_DIR (it is made if missing); nothing was created`);
    }
    missing.push(d);
    if (dirname(d) === d) break;
  }
  mkdirSync(dir, { recursive: true });
  return missing;
}

/** The entry at `path`, or undefined when there is none: also when a directory above it is a file (ENOTDIR), which the caller then meets. */
function statBelowFile(path: string): Stats | undefined {
  try {
    return statSync(path, { throwIfNoEntry: false });
  } catch (e) {
    if ((e as { code?: unknown }).code === 'ENOTDIR') return undefined;
    throw e;
  }
}

/**
 * `PRAGMA journal_mode = WAL` may answer SQLITE_BUSY at once, without waiting in the busy handler,
 * while another process opens the same new file and switches it to WAL itself (seen with two processes
 * starting together on a loaded machine): tried again every 10 ms until the busy timeout.
 */
function walMode(db: SqliteDatabase, busyTimeoutMs: number): void {
  const until = Date.now() + busyTimeoutMs;
  for (;;) {
    try {
      db.pragma('journal_mode = WAL');
      return;
    } catch (e) {
      if (!String((e as { code?: string }).code).startsWith('SQLITE_BUSY') || Date.now() >= until) throw e;
      // Start-up only, before the connection is used: a short synchronous pause is what the busy handler would do.
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 10);
    }
  }
}

/** The newest schema version this code knows. */
export const SQLITE_SCHEMA_VERSION = Math.max(...MIGRATIONS.map((m) => m.version));

/** A move to PostgreSQL that stands on a file (store_moves). */
export interface StoreMove {
  at: number;
  /** The database's URL, masked. */
  moved_to: string;
  /** Marked by a `writ store copy` that did not get to confirm that the database committed the copy (migration 16). */
  pending: boolean;
}

/**
 * The move marker beside a SQLite file, `<file>.moved` (JSON: at, moved_to, pending): the same mark as
 * the file's store_moves row, kept outside the file so that it outlives the file. A damaged file cannot
 * tell whether it was moved, and a restore that replaces it (`--replace-damaged`, or the file moved aside
 * by hand) puts back a backup from before the move, which has no mark: without the marker a server would
 * start on a file whose epochs the PostgreSQL replicas have issued again. `writ store copy` writes it
 * (synced) before the file's mark commits, so before the database commits; it follows the row (confirmed,
 * taken back when the database refused the commit), and `writ lease bump-epochs --lift-move-mark` removes
 * it. The file's row is read first; the marker stands when the file has none.
 */
export function moveMarkerOf(file: string): string {
  return `${file}.moved`;
}

/** The move the marker beside `file` records, or null when there is none. A marker that cannot be read still stands (what it names is then unknown). */
function readMoveMarker(file: string): StoreMove | null {
  if (file === ':memory:') return null;
  const marker = moveMarkerOf(file);
  let text: string;
  try {
    text = readFileSync(marker, 'utf8');
  } catch (e) {
    if ((e as { code?: unknown }).code === 'ENOENT') return null;
    throw e;
  }
  try {
    const m = JSON.parse(text) as { at?: unknown; moved_to?: unknown; pending?: unknown };
    if (typeof m.at === 'number' && typeof m.moved_to === 'string' && typeof m.pending === 'boolean') return { at: m.at, moved_to: m.moved_to, pending: m.pending };
  } catch {
    // as unreadable, below
  }
  return { at: statSync(marker).mtimeMs, moved_to: `a database ${marker} does not name (it cannot be read)`, pending: false };
}

/** Writes the marker beside `file` in one rename, synced with its directory: on disk before what comes next (the file's COMMIT). */
export function writeMoveMarker(file: string, move: StoreMove): void {
  const marker = moveMarkerOf(file);
  const partial = `${marker}.partial`;
  try {
    writeFileSync(partial, `${JSON.stringify({ at: move.at, moved_to: move.moved_to, pending: move.pending })}\n`);
    syncFile(partial);
    renameSync(partial, marker);
  } catch (e) {
    rmSync(partial, { force: true });
    throw e;
  }
  syncFile(dirname(marker));
}

/** Removes the marker beside `file` (synced): the file's own row says the move was taken back. */
export function removeMoveMarker(file: string): void {
  rmSync(moveMarkerOf(file), { force: true });
  syncFile(dirname(file));
}

/** fsync of a file or a directory. */
export function syncFile(path: string): void {
  const fd = openSync(path, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** The move that stands on the file at `file`: its own row, else the marker beside it. */
function standingMove(db: SqliteDatabase, file: string): StoreMove | null {
  return storeMovedTo(db) ?? readMoveMarker(file);
}

/** The move that stands on the file (store_moves, migration 14), read only: null when it was not moved, or was taken back. The marker beside the file is not read (standingMove). */
export function storeMovedTo(db: SqliteDatabase): StoreMove | null {
  if (!db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'store_moves'").get()) return null;
  // SELECT *: a file of schema 14 or 15, read before it is migrated, has no pending column (its moves were committed).
  const row = db.prepare('SELECT * FROM store_moves WHERE lifted_at IS NULL ORDER BY seq DESC LIMIT 1').get() as { at: number; moved_to: string; pending?: number } | undefined;
  return row === undefined ? null : { at: row.at, moved_to: row.moved_to, pending: row.pending === 1 };
}

/**
 * The move that stands on the Writ file at `file` (any schema; its row, else the marker beside it),
 * without writing to it: no WAL switch, no migration. The connection is a writable one all the same, so
 * that a rollback journal left hot by a process killed in a transaction is rolled back first (a
 * read-only one cannot, and fails). A damaged file is STORE_DAMAGED (`doing`: see storeDamagedError), one held
 * locked past the busy timeout STORE_IN_USE.
 */
export function readStoreMove(file: string, doing: string | null = null): StoreMove | null {
  const db = new Database(file, { fileMustExist: true });
  try {
    db.pragma('busy_timeout = 5000');
    return standingMove(db, file);
  } catch (e) {
    const damage = sqliteDamage(e);
    throw damage === null ? lockedError(e, file, 5000) : storeDamagedError(file, damage, doing);
  } finally {
    db.close();
  }
}

/**
 * `writ lease bump-epochs --lift-move-mark` on a file moved to PostgreSQL: the deliberate way back, once
 * its epochs are raised. Records who and why on the move's row (kept; a move only the marker beside the
 * file recorded gets its row here, lifted), then removes the marker; returns where it had been moved, or null.
 */
export function liftStoreMove(file: string, by: string, reason: string, now: number): string | null {
  const db = openDatabase(file, { moved: 'allow' });
  try {
    const moved = standingMove(db, file);
    if (moved === null) return null;
    if (storeMovedTo(db) !== null) db.prepare('UPDATE store_moves SET lifted_at = ?, lifted_by = ?, lifted_reason = ? WHERE lifted_at IS NULL').run(now, by, reason);
    else db.prepare('INSERT INTO store_moves (at, moved_to, pending, lifted_at, lifted_by, lifted_reason) VALUES (?, ?, ?, ?, ?, ?)').run(moved.at, moved.moved_to, moved.pending ? 1 : 0, now, by, reason);
    removeMoveMarker(file);
    return moved.moved_to;
  } finally {
    db.close();
  }
}

/** STORE_MOVED when the Writ file at `file` was moved to PostgreSQL; writes nothing (any schema). */
export function refuseMovedStore(file: string): void {
  const moved = readStoreMove(file);
  if (moved !== null) throw storeMovedError(file, moved);
}

function refuseMoved(db: SqliteDatabase, file: string): void {
  const moved = standingMove(db, file);
  if (moved !== null) throw storeMovedError(file, moved);
}

/** What a file moved to PostgreSQL is refused with: where it went, and what to do (finish an unfinished copy; or go back deliberately). */
export function storeMovedError(file: string, moved: StoreMove): WritError {
  const when = new Date(moved.at).toISOString();
  if (moved.pending) {
    return new WritError('STORE_MOVED', `${file} was being copied to the PostgreSQL database ${moved.moved_to} (writ store copy, at ${when}), and the copy did not finish: the database may or may not have committed it, and while it may have, a server on the file could issue fencing epochs the database issued. Run \`writ store copy --to ${moved.moved_to}\` (with its password) on this data directory again: it copies the file if the database holds nothing yet, or confirms the copy the database committed. To keep the file instead, and only if the database holds no copy: \`writ lease bump-epochs --by N --reason TEXT --lift-move-mark\` on this data directory. Nothing was changed`, { moved_to: moved.moved_to, moved_at: moved.at, unfinished: true });
  }
  return new WritError('STORE_MOVED', `${file} was copied to the PostgreSQL database ${moved.moved_to} at ${when} (writ store copy), which is the store now: start with --database (WRIT_DATABASE_URL) naming it. To go back to the file anyway (what was written on the database is not in it), first raise its epochs above every epoch the database issued: \`writ lease bump-epochs --by N --reason TEXT --lift-move-mark\` on this data directory, with N at least the database's highest fencing epoch, lifts this refusal; nothing was changed`, { moved_to: moved.moved_to, moved_at: moved.at });
}

/** SQLite's own word that a file is damaged (malformed, or not a database: SQLITE_CORRUPT*, SQLITE_NOTADB), or null for any other failure. */
export function sqliteDamage(e: unknown): string | null {
  const code = (e as { code?: unknown }).code;
  return typeof code === 'string' && (code.startsWith('SQLITE_CORRUPT') || code.startsWith('SQLITE_NOTADB')) ? `${code}: ${(e as Error).message}` : null;
}

/**
 * What a command that reads the whole file (`writ backup`, `writ store copy`; `doing` names it) is refused
 * with when SQLite finds the file damaged, and what opening a damaged store, or a command reading a damaged
 * part of it, is refused with (`doing` null: `writ serve` and every command on the data directory): a copy would carry the damage, or stop halfway. What to do: put a backup back
 * (the damaged file is kept aside), or recover what SQLite can still read into a new file.
 */
export function storeDamagedError(file: string, damage: string, doing: string | null): WritError {
  const cannot = doing === null ? 'Writ cannot open it, or read all of it' : `${doing} reads the whole store, and SQLite cannot`;
  return new WritError(
    'STORE_DAMAGED',
    `${file} is damaged (${damage}): ${cannot}. Put an earlier backup back with \`writ restore BACKUP --epoch-margin N --replace-damaged\` (N above the number of acquisitions of any one key since the backup was taken; the damaged file is kept aside), or recover what can still be read with sqlite3's .recover into a new file and check it; nothing was changed`,
    { data_file: file, damage },
  );
}

/**
 * Refuses a file whose schema is not this Writ's, changing nothing: applied migrations that are not a
 * prefix of this Writ's are SCHEMA_DIVERGED, newer is SCHEMA_TOO_NEW, older is UNPROCESSABLE with what
 * to run (the words PostgreSQL's store uses for the same refusal).
 */
function requireCurrentSchema(db: SqliteDatabase): void {
  const table = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'").get();
  const recorded = table ? appliedMigrations(db) : [];
  refuseDivergedHistory(`${STORE} ${db.name}`, recorded, MIGRATIONS, { file: db.name });
  const current = Math.max(0, ...recorded.map((m) => m.version));
  if (current === SQLITE_SCHEMA_VERSION) return;
  throw new WritError(
    current > SQLITE_SCHEMA_VERSION ? 'SCHEMA_TOO_NEW' : 'UNPROCESSABLE',
    current > SQLITE_SCHEMA_VERSION
      ? `the SQLite store's schema is at version ${current}, newer than this Writ knows (${SQLITE_SCHEMA_VERSION}); run a Writ at least as new as the one that migrated it`
      : `the SQLite store's schema is at version ${current}, this Writ needs ${SQLITE_SCHEMA_VERSION}: run \`writ migrate\``,
    { schema_version: current, known_version: SQLITE_SCHEMA_VERSION },
  );
}

const STORE = 'SQLite store';

/** The migrations the file records applied (schema_migrations), with the names they were applied under. */
function appliedMigrations(db: SqliteDatabase): MigrationRecord[] {
  return db.prepare('SELECT version, name FROM schema_migrations').all() as MigrationRecord[];
}

/**
 * Applies every numbered migration not applied yet, each in its own immediate transaction (several
 * processes may start at once), and returns the versions it applied. Refuses a file whose schema is
 * newer than this code knows (written by a newer Writ), and one whose applied migrations are not a
 * prefix of this Writ's (SCHEMA_DIVERGED: refuseDivergedHistory): nothing is changed, and the error says so.
 */
export function migrate(db: SqliteDatabase): number[] {
  db.exec('CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)');
  const recorded = appliedMigrations(db);
  // Checked before anything is applied: a store migrated by a Writ numbered otherwise is left as it is.
  refuseDivergedHistory(`${STORE} ${db.name}`, recorded, MIGRATIONS, { file: db.name });
  const applied = new Set(recorded.map((r) => r.version));
  const newest = Math.max(0, ...applied);
  if (newest > SQLITE_SCHEMA_VERSION) {
    throw new WritError('SCHEMA_TOO_NEW', `the store's schema is at version ${newest}, newer than this Writ knows (${SQLITE_SCHEMA_VERSION}): run the Writ version that wrote it, or a newer one`, {
      schema_version: newest,
      known_version: SQLITE_SCHEMA_VERSION,
    });
  }
  const now: number[] = [];
  for (const m of MIGRATIONS) {
    if (applied.has(m.version)) continue;
    db.transaction(() => {
      // Another process may have applied it between our read and this immediate transaction.
      const again = db.prepare('SELECT 1 FROM schema_migrations WHERE version = ?').get(m.version);
      if (again) return;
      db.exec(m.sql);
      m.run?.(db);
      db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(m.version, m.name, Date.now());
      now.push(m.version);
    }).immediate();
  }
  return now;
}
