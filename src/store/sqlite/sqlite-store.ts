import Database from 'better-sqlite3';
import { WritError } from '../../errors.js';
import type { StoreTx, WritStore } from '../contract.js';
import { startCheckpointer } from './checkpointer.js';
import { openDatabase, type SqliteDatabase } from './database.js';
import { SqliteGraphEventStore } from './graph-event-log.js';
import { GroupCommit, type GroupCommitStats } from './group-commit.js';
import { SqliteIncidentRepository } from './incident-repository.js';
import { SqliteLeaseAuthorityRepository } from './lease-authority-repository.js';
import { SqliteLeaseRepository } from './lease-repository.js';
import { SqliteReceiptRepository } from './receipt-repository.js';
import { SqliteSingleUseStore } from './single-use-store.js';
import { WalSync, type SyncFn } from './wal-sync.js';

export interface SqliteStoreOptions {
  busyTimeoutMs?: number;
  /** Operations per group transaction (default 256). */
  maxBatch?: number;
  /** WAL checkpoints in a worker thread (default true; a `:memory:` database has none). */
  checkpointer?: boolean;
  /** How the WAL is synced (default `fs.fdatasync` on libuv's thread pool): a test injects a failing one. */
  sync?: SyncFn;
  /** false: refuse a schema older than this Writ's instead of migrating it (a command that writes nothing). */
  migrate?: boolean;
  /** 'allow': open a file moved to PostgreSQL (`writ store copy`), for the ways back (bump-epochs, restore); default refuse (STORE_MOVED). */
  moved?: 'refuse' | 'allow';
}

/** The SQLite engine, with what a benchmark or a test may look at. */
export interface SqliteStore extends WritStore {
  readonly engine: 'sqlite';
  readonly stats: GroupCommitStats;
  /** WAL syncs completed (a benchmark reads it); 0 for `:memory:`. */
  readonly syncs: () => number;
  /**
   * The write connection, for the engine's own tools and tests (online backup, tampering tests).
   * Never for Writ's use cases: they go through `readWrite`. Taking it gives the connection its busy
   * timeout back for good (until then the group commit keeps it at 0 between its transactions).
   */
  readonly writer: SqliteDatabase;
}

/**
 * The embedded engine: one SQLite file in WAL mode. Every `readWrite` callback goes through one group
 * commit on the write connection: callbacks that arrive together share one `BEGIN IMMEDIATE … COMMIT`,
 * each in its own savepoint, in arrival order, so each sees the effects of those before it exactly as
 * if they had committed one by one; each promise resolves only once the commit is durable — synced by
 * `fdatasync` of the WAL on libuv's thread pool, never on the event loop (WalSync). Reads go to a
 * second connection, which sees only committed data and never waits for the writer's lock; a read
 * answers only once what it could see is durable (it waits for the sync in flight when a commit is
 * visible but not yet synced). Several processes may share the file: writers are serialized by
 * SQLite's lock (a busy timeout, then OVERLOADED).
 *
 * Freshness without a query: the graph head is read from the log only when the WAL-index header (a
 * pread of `-shm` that changes with every commit of any process) changed since the last read.
 */
export async function openSqliteStore(file: string, options: SqliteStoreOptions = {}): Promise<SqliteStore> {
  const writer = openDatabase(file, { migrate: options.migrate ?? true, moved: options.moved ?? 'refuse', ...(options.busyTimeoutMs === undefined ? {} : { busyTimeoutMs: options.busyTimeoutMs }) });
  try {
    // A `:memory:` database exists only on its own connection: reads share the writer there (tests only).
    const reader = file === ':memory:' ? writer : openReader(file, options.busyTimeoutMs ?? 5000);
    return storeOver(writer, reader, options.checkpointer !== false && file !== ':memory:', options);
  } catch (e) {
    writer.close();
    throw e;
  }
}

/**
 * The store over a database opened (and migrated) by the caller, on that one connection for reads
 * and writes: for the engine's own tests and tools. Closing the store closes the database.
 */
export function sqliteStoreOn(db: SqliteDatabase, options: Pick<SqliteStoreOptions, 'maxBatch' | 'sync'> = {}): SqliteStore {
  return storeOver(db, db, false, options);
}

function storeOver(writer: SqliteDatabase, reader: SqliteDatabase, checkpoints: boolean, options: Pick<SqliteStoreOptions, 'maxBatch' | 'sync'>): SqliteStore {
  // A file in WAL mode is synced off the event loop; anything else (`:memory:`) keeps its own `synchronous`.
  const wal = !writer.memory && writer.pragma('journal_mode', { simple: true }) === 'wal' ? new WalSync(writer.name, options.sync) : null;
  // After each commit of this process: a graph head cached before it still holds if only that commit
  // came in between and it appended no graph event (see SqliteGraphEventStore.committed).
  const committed = (before: string | null, after: string | null) => {
    const graphUnchanged = !writeTx.graph.takeAppended();
    for (const g of graphs) g.committed(before, after, graphUnchanged);
  };
  // `sole`: with a read connection of its own, nothing but the group uses the writer (until a tool or test takes `writer`).
  // spread-then-add: once, when the store opens
  const group = new GroupCommit(writer, { ...(options.maxBatch === undefined ? {} : { maxBatch: options.maxBatch }), ...(wal ? { wal, committed, sole: reader !== writer } : {}) });
  // The write connection's graph log reads the header once a transaction (GroupCommit.tagInTransaction).
  const writeTx = storeTx(writer, wal ? () => group.tagInTransaction() : null);
  const readTx = reader === writer ? writeTx : storeTx(reader, wal ? () => wal.changeTag() : null);
  const graphs = reader === writer ? [writeTx.graph] : [writeTx.graph, readTx.graph];
  let closed = false;
  // Last, when nothing more can throw (a started worker must be stopped). The worker's WAL restart is
  // synced at once, so that no read waits for it (checkpointer.ts); not once the store is closing. A
  // sync that fails fails the store (WalSync): nothing to do with the rejection here.
  const onWalRestart = () => {
    if (!closed) wal?.syncNext().catch(() => {});
  };
  const checkpointer = checkpoints ? startCheckpointer(writer, { onWalRestart }) : null;
  return {
    engine: 'sqlite',
    stats: group.stats,
    syncs: () => wal?.syncs ?? 0,
    get writer() {
      // Used beside the group from now on: its statements wait for locks as the connection was opened to.
      group.lend();
      return writer;
    },
    async read(fn, options) {
      if (wal?.failed) throw wal.failed;
      let value: Awaited<ReturnType<typeof fn>>;
      try {
        value = await fn(readTx);
      } catch (e) {
        // A refusal may tell what the read saw, too: answered once that is durable.
        await wal?.visibleIsDurable();
        throw engineError(e);
      }
      if (options?.waitsFor && !options.waitsFor(value)) return value;
      const durable = wal?.visibleIsDurable();
      if (durable) await durable;
      return value;
    },
    async readWrite(fn) {
      try {
        return await group.run(() => fn(writeTx));
      } catch (e) {
        throw engineError(e);
      }
    },
    async close() {
      if (closed) return;
      closed = true;
      await group.flush().catch(() => {});
      await wal?.drain();
      await checkpointer?.stop();
      if (reader !== writer) reader.close();
      writer.close();
      // Only now: closing a descriptor of `-shm` would drop the locks SQLite holds on it.
      wal?.close();
    },
  };
}

function openReader(file: string, busyTimeoutMs: number): SqliteDatabase {
  const db = new Database(file);
  db.pragma(`busy_timeout = ${busyTimeoutMs}`);
  return db;
}

/** `changeTag`: what tells the graph log that nothing was committed since its last head read. */
function storeTx(db: SqliteDatabase, changeTag: (() => string | null) | null): StoreTx & { graph: SqliteGraphEventStore } {
  return {
    graph: new SqliteGraphEventStore(db, changeTag ?? undefined),
    singleUse: new SqliteSingleUseStore(db),
    leases: new SqliteLeaseRepository(db),
    leaseAuthority: new SqliteLeaseAuthorityRepository(db),
    incidents: new SqliteIncidentRepository(db),
    receipts: new SqliteReceiptRepository(db),
  };
}

/** SQLite's own errors never leave the engine: a locked or full store sheds the request (503). */
function engineError(e: unknown): unknown {
  const code = (e as { code?: unknown }).code;
  if (typeof code !== 'string' || !code.startsWith('SQLITE_')) return e;
  if (code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED')) {
    // Another process held a long write past the busy timeout: shed, don't fail.
    return new WritError('OVERLOADED', 'the store is busy; retry shortly', { retry_after_ms: 1000 });
  }
  if (code === 'SQLITE_FULL' || code.startsWith('SQLITE_IOERR')) {
    return new WritError('OVERLOADED', `the store cannot write (${code}); nothing was changed; retry later`, { retry_after_ms: 5000 });
  }
  return e;
}
