import Database from 'better-sqlite3';
import { copyFileSync, existsSync, linkSync, renameSync, rmdirSync, rmSync, statSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { WritError } from '../../errors.js';
import { checkEpochBump, type EpochBump } from '../../lease/index.js';
import { makeDataDirectory, openDatabase, sqliteDamage, SQLITE_SCHEMA_VERSION, storeDamagedError, syncFile, type SqliteDatabase } from './database.js';
import { openSqliteStore } from './sqlite-store.js';
import { MIGRATIONS } from './migrations/index.js';
import { refuseDivergedHistory, type MigrationRecord } from '../migration-history.js';

/** What a backup holds, read from the copy itself once it is complete. */
export interface BackupSummary {
  file: string;
  bytes: number;
  schema_version: number;
  /** The newest receipt entry in the copy (its store-wide seq and hash): what the copy holds of the log ends there. */
  receipt_head: { seq: number; hash: string | null };
  graph_revision: number;
  /**
   * The graph log's hash chain head in the copy: its newest hashed event (revision and hash, what `writ
   * audit verify` and a signed checkpoint name; 0 and the genesis hash when none is). Below
   * `graph_revision` when a Writ from before the chain appended events not hashed yet; null when the copy
   * is from before the chain (SQLite migration 20: a restore hashes it when it migrates the copy).
   */
  graph_head: { revision: number; hash: string } | null;
  lease_keys: number;
  /** The highest fencing epoch in the copy (0 when no key was ever leased). */
  max_epoch: number;
}

export interface RestoreSummary {
  restored_from: BackupSummary;
  data_file: string;
  /** Where the data file that the restore replaced was kept (null when there was none). */
  previous_kept_at: string | null;
  /** The restore's own record, with the margin added to every epoch (margin 0: trusted as the latest state). */
  bump: EpochBump;
  /**
   * The restored store's graph chain head (its newest hashed event), after the copy was migrated: what `writ
   * audit verify` and the next checkpoint name. Differs from `restored_from.graph_head` only for a backup
   * from before the graph chain (null there), whose events the migration hashed: `graph_hashed_by_migration`.
   */
  graph_head: { revision: number; hash: string };
  graph_hashed_by_migration: boolean;
}

export interface RestoreOptions {
  /** Added to every fencing epoch and to the floor of keys first leased later; 0 trusts the backup as the latest state. */
  epochMargin: number;
  /** Who restores (recorded). */
  actor: string;
  reason: string;
  /** Lease time of the restore's record (ms). */
  now: number;
  /**
   * Replace the current store even when it is damaged (SQLite finds it malformed, or not a database)
   * so that its epochs cannot be read: it is kept aside as usual, and only the margin keeps epochs from
   * repeating (a margin is required). Without it such a store is refused (STORE_DAMAGED).
   */
  replaceDamaged?: boolean;
  /** For tests: runs just before the swap, once the current file is found not in use (and held so). */
  beforeSwap?: () => Promise<void>;
}

/**
 * Takes a consistent copy of the store behind `source` into `destination` while other connections,
 * in this process or others, keep writing: SQLite's online backup API copying every page in one
 * step, i.e. inside one read transaction, which in WAL mode never blocks writers and sees exactly
 * the commits before it (a multi-step copy would restart whenever another connection commits between
 * steps). The copy is written beside the destination, checked (`integrity_check`), turned into a
 * self-contained file (rollback journal, no -wal), synced, and only then renamed into place, so a
 * crash never leaves a partial file under the name asked for. An existing destination is refused.
 */
export async function backupSqliteStore(source: SqliteDatabase, destination: string): Promise<BackupSummary> {
  if (existsSync(destination)) throw new WritError('UNPROCESSABLE', `${destination} exists; a backup never overwrites a file (choose a new name)`);
  const partial = join(dirname(destination), `.${basename(destination)}.partial`);
  removeDatabaseFiles(partial);
  try {
    // After the first step, each step asks for every page: one read transaction copies them all.
    await source.backup(partial, { progress: ({ totalPages }) => Math.max(totalPages, 1) * 2 });
    const copy = new Database(partial);
    try {
      // The copy holds the store's pages as they are: a copy that fails the check is of a damaged store.
      const check = copy.pragma('integrity_check', { simple: true });
      if (check !== 'ok') throw storeDamagedError(source.name, `integrity_check: ${String(check)}`, 'writ backup');
      copy.pragma('journal_mode = DELETE');
    } finally {
      copy.close();
    }
    syncFile(partial);
    renameSync(partial, destination);
    syncFile(dirname(destination));
  } catch (e) {
    removeDatabaseFiles(partial);
    const damage = sqliteDamage(e);
    throw damage === null ? e : storeDamagedError(source.name, damage, 'writ backup');
  }
  return summarize(destination);
}

/** Opens a Writ SQLite file without migrating it (a running server of another version may own it), for a backup. */
export function openForBackup(file: string): SqliteDatabase {
  if (!existsSync(file)) throw new WritError('NOT_FOUND', `no Writ store at ${file}`);
  const db = new Database(file, { fileMustExist: true });
  db.pragma('busy_timeout = 5000');
  let writ: boolean;
  try {
    writ = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'").get() !== undefined;
  } catch (e) {
    db.close();
    const damage = sqliteDamage(e);
    throw damage === null ? e : storeDamagedError(file, damage, 'writ backup');
  }
  if (!writ) {
    db.close();
    throw new WritError('UNPROCESSABLE', `${file} is not a Writ store (it has no schema_migrations table)`);
  }
  // Refused before the copy is written: the backup's summary would refuse it only once the file was in place.
  try {
    schemaKnown(db, file, ': back it up with the Writ version that wrote it, or a newer one; nothing was written');
  } catch (e) {
    db.close();
    throw e;
  }
  return db;
}

/**
 * STORE_DAMAGED (saying what to do) when SQLite finds the Writ file at `file` damaged: not a database,
 * or failing `integrity_check`. Read only; for a command about to read the whole file (`doing`), before
 * it changes anything.
 */
export function assertSound(file: string, doing: string): void {
  let check: unknown;
  try {
    const db = new Database(file, { readonly: true, fileMustExist: true });
    try {
      check = db.pragma('integrity_check', { simple: true });
    } finally {
      db.close();
    }
  } catch (e) {
    const damage = sqliteDamage(e);
    throw damage === null ? e : storeDamagedError(file, damage, doing);
  }
  if (check !== 'ok') throw storeDamagedError(file, `integrity_check: ${String(check)}`, doing);
}

/**
 * Puts a backup in place of the data file of a stopped Writ:
 *
 * 1. The backup is copied aside (`.<name>.restoring` beside the data file) and checked: a SQLite file
 *    that passes `integrity_check`, of a Writ store, with no `-wal` beside it (a live database is
 *    not a backup; take one with `writ backup`). Its schema is migrated if it is older.
 * 2. The fencing epochs are made safe (`epochMargin`, LeaseRepository.bumpEpochs): when a store is
 *    replaced, the copy first takes its epochs where they are higher and its record of bumps and
 *    restores (carryReplacedEpochs: the replaced store may itself be a restore, with epochs the backup
 *    never saw); then every key's epoch and the floor of keys never leased rise by the margin, live
 *    leases of the backup end, and the restore is recorded in the lease_epoch_bumps table with the
 *    backup's receipt head, graph revision and highest epoch — the visible mark of the gap.
 * 3. Refuses (STORE_IN_USE) when any process has the data file open: SQLite refuses to take a WAL
 *    database out of WAL mode while another connection has it open, so switching the current file to
 *    a rollback journal is both the test and, when it succeeds, folds its WAL into it. It is done once
 *    the backup is found sound (to fail before the real work) and again just before the swap, holding
 *    the file locked from there to the rename (holdNotInUse): a Writ that opens it meanwhile waits, then
 *    finds the name moved on and opens the restored file (openDatabase).
 * 4. The current data file is kept as `<name>.pre-restore-<time>` (a hard link: nothing is deleted),
 *    and the prepared copy is renamed over the data file, atomically.
 *
 * A move to PostgreSQL stands on the restored file: the replaced file's row is carried
 * (carryReplacedEpochs), and the marker beside the data file (moveMarkerOf), which a restore leaves as
 * it is, covers a replaced file that cannot be read (damaged, or moved aside by hand).
 */
export async function restoreSqliteStore(backupFile: string, dataFile: string, options: RestoreOptions): Promise<RestoreSummary> {
  checkEpochBump({ margin: options.epochMargin, reason: options.reason });
  if (options.replaceDamaged === true && options.epochMargin === 0) {
    throw new WritError('UNPROCESSABLE', 'replacing a damaged store needs --epoch-margin N, not --trust-backup: the epochs the damaged store issued cannot be read, so only a margin keeps them from being issued again; nothing was changed');
  }
  if (!existsSync(backupFile)) throw new WritError('NOT_FOUND', `no backup at ${backupFile}`);
  if (statSync(backupFile).isDirectory()) throw new WritError('UNPROCESSABLE', `${backupFile} is a directory, not a backup: name the file \`writ backup FILE\` wrote; nothing was changed`);
  if (existsSync(`${backupFile}-wal`)) {
    throw new WritError('UNPROCESSABLE', `${backupFile} has a -wal file beside it: it is a live database, not a backup (take one with \`writ backup\`)`);
  }
  const madeDirectories = makeDataDirectory(dirname(dataFile));
  const restoring = join(dirname(dataFile), `.${basename(dataFile)}.restoring`);
  removeDatabaseFiles(restoring);
  try {
    const from = await copyChecked(backupFile, restoring);
    // A damaged current store: SQLite cannot even check whether it is in use (not a database), or cannot
    // read its epochs (malformed). Either is refused unless the operator says to replace it anyway.
    let damaged: Damage | null = null;
    try {
      await assertNotInUse(dataFile);
    } catch (e) {
      damaged = damageOf(e, 'check');
    }
    if (!existsSync(dataFile) && existsSync(`${dataFile}-wal`)) {
      // SQLite would take it as the restored file's own WAL and apply its pages (a store moved aside by hand without it).
      throw new WritError('UNPROCESSABLE', `${dataFile}-wal is there without ${basename(dataFile)}: it belongs to a store that was moved or deleted, and SQLite would apply it to the restored file; move it (and any -shm) to where that store went. Nothing was changed`);
    }
    const previous = existsSync(dataFile) ? `${dataFile}.pre-restore-${new Date(options.now).toISOString().replace(/[:.]/g, '-')}` : null;
    let replaced: ReplacedEpochs | null = null;
    if (previous !== null && damaged === null) {
      try {
        replaced = carryReplacedEpochs(dataFile, restoring);
      } catch (e) {
        damaged = damageOf(e, 'read');
      }
    }
    if (damaged !== null) acceptDamaged(dataFile, damaged, options);
    // A copy of a file moved to PostgreSQL stays marked so (its record is kept, and the replaced store's carried).
    const store = await openSqliteStore(restoring, { checkpointer: false, moved: 'allow' });
    let bump: EpochBump;
    // Opening migrated the copy: one from before the graph chain (no head) has its events hashed now.
    const hashedByMigration = from.graph_head === null;
    let graphHead: RestoreSummary['graph_head'];
    try {
      const chain = await store.read((tx) => tx.graph.chainHead());
      graphHead = { revision: chain.hashed, hash: chain.hash };
      bump = await store.readWrite((tx) =>
        tx.leases.bumpEpochs({
          kind: 'RESTORE',
          margin: options.epochMargin,
          actor: options.actor,
          reason: options.reason,
          now: options.now,
          detail: {
            backup_file: backupFile,
            backup_receipt_head: from.receipt_head,
            backup_graph_revision: from.graph_revision,
            // A backup from before the chain: the head its events have once migrated, said to be the migration's.
            backup_graph_head: from.graph_head ?? graphHead,
            ...(hashedByMigration ? { backup_graph_hashed_by_migration: true } : {}),
            backup_max_epoch: from.max_epoch,
            backup_schema_version: from.schema_version,
            ...(replaced === null ? {} : { replaced_file_kept_at: previous, replaced_max_epoch: replaced.max_epoch, replaced_floor: replaced.floor, replaced_bumps_carried: replaced.bumps_carried }),
            // Replaced without its epochs: the gap only the margin covers is on record.
            ...(damaged === null ? {} : { replaced_file_kept_at: previous, replaced_damaged: damaged.message }),
          },
        }),
      );
    } finally {
      await store.close();
    }
    const prepared = new Database(restoring);
    prepared.pragma('journal_mode = DELETE');
    prepared.close();
    syncFile(restoring);

    // Held from the check to the swap: a Writ that opens the current file meanwhile cannot use it until
    // it is renamed away, and then finds its name moved on and opens the restored file (openDatabase).
    let unlock: (() => void) | null = null;
    if (damaged?.at === 'check') refuseIfOpenedInWal(dataFile);
    else unlock = await holdNotInUse(dataFile);
    try {
      await options.beforeSwap?.();
      // The current file gets a second name first, then the copy replaces it in one rename: at every
      // instant the data file's name holds a whole store (the old one or the restored one), so a crash
      // never leaves a directory in which the next start would create an empty store.
      if (previous !== null) {
        linkSync(dataFile, previous);
        renameSync(restoring, dataFile);
      } else {
        // No store to hold: the name is taken only if still free (a Writ started meanwhile made a store there).
        try {
          linkSync(restoring, dataFile);
        } catch (e) {
          if ((e as { code?: unknown }).code !== 'EEXIST') throw e;
          throw new WritError('STORE_IN_USE', `${dataFile} was created while restoring (a Writ started on the data directory?): stop it before restoring; nothing was changed`);
        }
        rmSync(restoring);
      }
      syncFile(dirname(dataFile));
    } finally {
      unlock?.();
    }
    return { restored_from: { ...from, file: backupFile }, data_file: dataFile, previous_kept_at: previous, bump, graph_head: graphHead, graph_hashed_by_migration: hashedByMigration };
  } catch (e) {
    removeDatabaseFiles(restoring);
    removeEmptyDirectories(madeDirectories);
    throw e;
  }
}

/** The directories a failed command made, deepest first, taken away again while empty (something else may have put a file there meanwhile). */
function removeEmptyDirectories(made: string[]): void {
  for (const d of made) {
    try {
      rmdirSync(d);
    } catch {
      return;
    }
  }
}

/** The store being replaced is damaged: found so when checking whether it is in use, or when reading its epochs. */
interface Damage {
  at: 'check' | 'read';
  message: string;
}

/** `e` as damage of the file (SQLite: malformed, or not a database); any other failure is thrown as it is. */
function damageOf(e: unknown, at: Damage['at']): Damage {
  const message = sqliteDamage(e);
  if (message !== null) return { at, message };
  throw e;
}

/**
 * A damaged store is replaced only when the operator said so (`replaceDamaged`, with a margin): restore
 * carries the replaced store's epochs so that they keep rising, and silently dropping them would let
 * the restored store issue again epochs it issued after the backup. Else STORE_DAMAGED, saying what to do.
 */
function acceptDamaged(dataFile: string, damaged: Damage, options: RestoreOptions): void {
  if (options.replaceDamaged === true) {
    if (damaged.at === 'check') refuseIfOpenedInWal(dataFile);
    return;
  }
  throw new WritError(
    'STORE_DAMAGED',
    `the current store ${dataFile} is damaged (${damaged.message}): a restore reads the fencing epochs it issued, and its record of restores and bumps, so that epochs keep rising above them, and cannot. ` +
      'To replace it anyway, without its epochs, restore again with --replace-damaged and an --epoch-margin N above the number of acquisitions of any one key since the backup was taken ' +
      `(the damaged file is kept as ${basename(dataFile)}.pre-restore-<time>); or move it aside yourself (with any -wal and -shm file beside it) and restore with such a margin. Nothing was changed`,
    { data_file: dataFile, damage: damaged.message },
  );
}

/**
 * For a file SQLite cannot open as a database: a process that had it open in WAL mode before it was
 * damaged keeps a -shm (and -wal) file beside it, and may still write to it; without one, no process has
 * it open in WAL mode, and none can open it now (a Writ starting on it fails at once).
 */
function refuseIfOpenedInWal(dataFile: string): void {
  const beside = [`${dataFile}-wal`, `${dataFile}-shm`].filter((f) => existsSync(f));
  if (beside.length === 0) return;
  throw new WritError(
    'STORE_DAMAGED',
    `the current store ${dataFile} is not a database SQLite can open, and ${beside.map((f) => basename(f)).join(' and ')} beside it may belong to a process that still has it open: make sure no Writ runs on it, then move it and ${beside.length === 1 ? 'that file' : 'those files'} aside yourself and restore with an --epoch-margin N above the number of acquisitions of any one key since the backup. Nothing was changed`,
    { data_file: dataFile, beside },
  );
}

/** What a restore took over from the store it replaces. */
interface ReplacedEpochs {
  max_epoch: number;
  floor: number;
  bumps_carried: number;
}

/**
 * Brings into the prepared copy (`restoring`, migrated here) what the store being replaced knows of
 * fencing epochs, so that the restore's margin is added above both: each key's epoch where the replaced
 * store's is higher (a key the backup never saw gets the replaced store's epoch), and the replaced
 * store's record of bumps and restores, every row the copy does not already hold, after the copy's own
 * (the floor of new keys is the highest floor recorded). Without this a second restore of the same
 * backup gives out again every epoch issued since the first: the backup knows nothing of them, and the
 * replaced store, kept aside as pre-restore-*, is the only place that does. The replaced file was folded
 * into a self-contained file by assertNotInUse and is only read. A replaced store of an older schema
 * may lack the record (before migration 9): its epochs are still taken.
 */
function carryReplacedEpochs(dataFile: string, restoring: string): ReplacedEpochs {
  const old = new Database(dataFile, { readonly: true, fileMustExist: true });
  let keys: { key: string; epoch: number }[];
  let bumps: CarriedRows;
  let moves: CarriedRows;
  try {
    keys = allRows(old, 'SELECT key, epoch FROM lease_keys WHERE epoch > 0 ORDER BY key');
    bumps = carriedRows(old, 'lease_epoch_bumps');
    moves = carriedRows(old, 'store_moves');
  } finally {
    old.close();
  }
  const db = openDatabase(restoring, { moved: 'allow' });
  try {
    const ensureKey = db.prepare('INSERT OR IGNORE INTO lease_keys (key, epoch, transitions) VALUES (?, 0, 0)');
    const raiseKey = db.prepare('UPDATE lease_keys SET epoch = MAX(epoch, ?) WHERE key = ?');
    const carryBump = appendUnlessHeld(db, 'lease_epoch_bumps', bumps.columns, dataFile);
    const carryMove = appendUnlessHeld(db, 'store_moves', moves.columns, dataFile);
    let carried = 0;
    db.transaction(() => {
      // The record first: a key row inserted below starts at the highest floor of the merged record (the
      // trigger of migration 15; a carried row may have a lower floor than the backup's), then rises to the replaced epoch.
      for (const b of bumps.rows) carried += carryBump(b);
      // A replaced file that was moved to PostgreSQL: the restored one is refused as it was (pending or
      // confirmed), until taken back.
      for (const m of moves.rows) carryMove(m);
      for (const k of keys) {
        ensureKey.run(k.key);
        raiseKey.run(k.epoch, k.key);
      }
    }).immediate();
    const floor = bumps.rows.reduce((max, b) => Math.max(max, Number(b.floor)), 0);
    return { max_epoch: keys.reduce((max, k) => Math.max(max, k.epoch), 0), floor, bumps_carried: carried };
  } finally {
    db.close();
  }
}

/** The rows of a record table of the replaced store, with every column it has but seq. */
interface CarriedRows {
  columns: string[];
  rows: Record<string, unknown>[];
}

/**
 * Every row of `table` (lease_epoch_bumps, store_moves) in seq order, with every column the replaced
 * store's table has (PRAGMA table_info) but seq: a carried row is appended after the copy's own, with
 * the next seq, and a column a later migration adds is carried without being named here. None when the
 * table is of a later migration than the replaced store's schema.
 */
function carriedRows(db: SqliteDatabase, table: string): CarriedRows {
  const columns = (db.prepare(`SELECT name FROM pragma_table_info('${table}') ORDER BY cid`).all() as { name: string }[]).map((c) => c.name).filter((c) => c !== 'seq');
  if (columns.length === 0) return { columns, rows: [] };
  return { columns, rows: db.prepare(`SELECT ${columns.map((c) => `"${c}"`).join(', ')} FROM ${table} ORDER BY seq`).all() as Record<string, unknown>[] };
}

/**
 * Appends a carried row to `table` of the prepared copy unless the copy holds it already (every column
 * the same: the backup's own rows); returns 1 when appended. A column the copy's table lacks means the
 * replaced store was written by a newer Writ: refused rather than dropped.
 */
function appendUnlessHeld(db: SqliteDatabase, table: string, columns: string[], dataFile: string): (row: Record<string, unknown>) => number {
  if (columns.length === 0) return () => 0;
  const known = new Set((db.prepare(`SELECT name FROM pragma_table_info('${table}')`).all() as { name: string }[]).map((c) => c.name));
  const unknown = columns.filter((c) => !known.has(c));
  if (unknown.length > 0) {
    throw new WritError('SCHEMA_TOO_NEW', `the current store ${dataFile} has columns this Writ does not know in ${table} (${unknown.join(', ')}): it was written by a newer Writ, and a restore by this one would drop them; restore with that version or a newer one. Nothing was changed`);
  }
  const insert = db.prepare(`INSERT INTO ${table} (${columns.map((c) => `"${c}"`).join(', ')}) SELECT ${columns.map((c) => `:${c}`).join(', ')}
    WHERE NOT EXISTS (SELECT 1 FROM ${table} WHERE ${columns.map((c) => `"${c}" IS :${c}`).join(' AND ')})`);
  return (row) => insert.run(row).changes;
}

/**
 * Refuses (STORE_IN_USE) when another connection has `file` open; otherwise leaves it a self-contained
 * file in rollback-journal mode (its WAL folded in), which the next Writ to open it turns back to WAL.
 * A connection that is closing (a process exiting) gets `graceMs` to let go. `doing` names the
 * operation in the message ("restoring", "copying").
 */
export async function assertNotInUse(file: string, doing = 'restoring', graceMs = 1_000): Promise<void> {
  (await notInUse(file, doing, graceMs, false))?.close();
}

/**
 * As assertNotInUse, and then holds the file so until the returned function is called: an exclusive
 * transaction on it (rollback journal), so that no other connection can read or write it, nor switch it
 * to WAL. A process that opens it meanwhile waits (its busy timeout) at its first statement. Null when
 * there is no file.
 */
async function holdNotInUse(file: string, doing = 'restoring', graceMs = 1_000): Promise<(() => void) | null> {
  const db = await notInUse(file, doing, graceMs, true);
  if (db === null) return null;
  return () => {
    db.exec('ROLLBACK');
    db.close();
  };
}

async function notInUse(file: string, doing: string, graceMs: number, hold: boolean): Promise<SqliteDatabase | null> {
  const giveUpAt = Date.now() + graceMs;
  for (;;) {
    if (!existsSync(file)) return null;
    const db = new Database(file, { fileMustExist: true });
    let handed = false;
    try {
      db.pragma('busy_timeout = 0');
      if (db.pragma('journal_mode = DELETE', { simple: true }) === 'delete') {
        if (hold) {
          db.exec('BEGIN EXCLUSIVE');
          // Another process may have opened it and switched it to WAL between the two statements.
          handed = db.pragma('journal_mode', { simple: true }) === 'delete';
          if (!handed) db.exec('ROLLBACK');
        } else {
          handed = true;
        }
        if (handed) return db;
      }
    } catch (e) {
      const code = (e as { code?: unknown }).code;
      if (!(typeof code === 'string' && (code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED')))) throw e;
    } finally {
      if (!handed) db.close();
    }
    if (Date.now() >= giveUpAt) {
      throw new WritError('STORE_IN_USE', `${file} is open in another process (a running Writ?): stop it before ${doing}; nothing was changed`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * Copies the backup to `to` (the prepared copy, beside the data file: on the data's own filesystem, so
 * that the final rename stays on one device, and not in a temporary directory that may be small) and
 * checks the copy there. The backup itself is only read, never opened by SQLite: opening a WAL-mode
 * file (even read-only) makes -wal and -shm files beside it, and a refusal must leave the user's folder
 * as it was. `to` and whatever SQLite makes beside it are the caller's to remove when this fails.
 */
async function copyChecked(backupFile: string, to: string): Promise<BackupSummary> {
  copyFileSync(backupFile, to);
  try {
    const src = new Database(to, { readonly: true, fileMustExist: true });
    try {
      src.pragma('schema_version');
    } finally {
      src.close();
    }
  } catch (e) {
    throw new WritError('UNPROCESSABLE', `${backupFile} is not a SQLite database (${(e as Error).message.replaceAll(to, backupFile)})`);
  }
  const copy = new Database(to);
  try {
    const check = copy.pragma('integrity_check', { simple: true });
    if (check !== 'ok') throw new WritError('UNPROCESSABLE', `${backupFile} fails SQLite's integrity check: ${String(check)}`);
    if (!copy.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'").get()) {
      throw new WritError('UNPROCESSABLE', `${backupFile} is not a Writ store (it has no schema_migrations table)`);
    }
    // Judged here, naming the backup: migrating the copy would refuse it as "the SQLite store", which reads as the data directory's.
    refuseDivergedHistory(`backup ${backupFile}`, copy.prepare('SELECT version, name FROM schema_migrations').all() as MigrationRecord[], MIGRATIONS, {
      file: backupFile,
      remedy: 'restore it with the Writ that migrated it, or restore a backup taken by a Writ whose migrations are numbered as this one\'s',
    });
  } finally {
    copy.close();
  }
  return summarize(to);
}

/** The file's schema version; SCHEMA_TOO_NEW (its message ending in `then`) when a newer Writ migrated it. */
function schemaKnown(db: SqliteDatabase, file: string, then = ''): number {
  const schema = firstRow<{ v: number | null }>(db, 'SELECT MAX(version) AS v FROM schema_migrations')?.v ?? 0;
  if (schema > SQLITE_SCHEMA_VERSION) {
    throw new WritError('SCHEMA_TOO_NEW', `${file} has schema version ${schema}, newer than this Writ knows (${SQLITE_SCHEMA_VERSION})${then}`, { schema_version: schema, known_version: SQLITE_SCHEMA_VERSION });
  }
  return schema;
}

/** What the SQLite file holds (read-only). */
export function summarize(file: string): BackupSummary {
  const db = new Database(file, { readonly: true, fileMustExist: true });
  try {
    const schema = schemaKnown(db, file);
    const heads = storeHeads(db);
    return { file, bytes: statSync(file).size, schema_version: schema, receipt_head: heads.receipt_head, graph_revision: heads.graph_revision, graph_head: graphChainHead(db), lease_keys: heads.lease_keys, max_epoch: heads.max_epoch };
  } finally {
    db.close();
  }
}

/** Where a store's logs stand: its receipt head, graph revision, lease keys and highest epoch (a backup's summary; what `writ store copy` compares). */
export function storeHeads(db: SqliteDatabase): Pick<BackupSummary, 'receipt_head' | 'graph_revision' | 'lease_keys' | 'max_epoch'> {
  const head = firstRow<{ seq: number; hash: string }>(db, 'SELECT seq, hash FROM receipt_entries ORDER BY seq DESC LIMIT 1');
  const keys = firstRow<{ n: number; max: number | null }>(db, 'SELECT COUNT(*) AS n, MAX(epoch) AS max FROM lease_keys');
  return {
    receipt_head: { seq: head?.seq ?? 0, hash: head?.hash ?? null },
    graph_revision: firstRow<{ r: number | null }>(db, 'SELECT MAX(revision) AS r FROM graph_events')?.r ?? 0,
    lease_keys: keys?.n ?? 0,
    max_epoch: keys?.max ?? 0,
  };
}

/** The graph log's hash chain head (newest hashed revision and its hash), or null in a file from before the chain (no graph_chain_head table). */
export function graphChainHead(db: SqliteDatabase): BackupSummary['graph_head'] {
  return firstRow<{ revision: number; hash: string }>(db, 'SELECT revision, hash FROM graph_chain_head') ?? null;
}

/** The first row of `sql`, or undefined (also when it names a table of a later migration, absent in an older backup). */
function firstRow<T>(db: SqliteDatabase, sql: string): T | undefined {
  try {
    return db.prepare(sql).get() as T | undefined;
  } catch {
    return undefined;
  }
}

/** Every row of `sql`, or none when it names a table of a later migration (an older store); any other failure is thrown. */
function allRows<T>(db: SqliteDatabase, sql: string): T[] {
  try {
    return db.prepare(sql).all() as T[];
  } catch (e) {
    if (/no such table/.test((e as Error).message)) return [];
    throw e;
  }
}

function removeDatabaseFiles(file: string): void {
  for (const f of [file, `${file}-wal`, `${file}-shm`, `${file}-journal`]) rmSync(f, { force: true });
}
