import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import type { SqliteDatabase } from './database.js';

/**
 * WAL checkpoints off the request path. By default SQLite checkpoints inside the commit that takes
 * the WAL past 1,000 pages: that commit also copies the WAL into the database file and syncs it, and
 * with better-sqlite3 the whole event loop waits. A gateway write adds ~18 WAL pages, so about one
 * write in 55 paid for a checkpoint (the intent commit's p99 fell from 3.6–4.6 ms to 1.9–2.6 ms with
 * this, measured on these machines). Here a worker thread with its own connection runs a PASSIVE
 * checkpoint every `intervalMs` (it never blocks writers or readers, and skips what is in use), so
 * the WAL is recycled from its start instead of growing, and no request waits for it.
 *
 * Recycling has a sync of its own: the first write after a checkpoint that copied the whole WAL restarts
 * it from its start, and SQLite syncs the new WAL header inside that write (with any `synchronous` but
 * OFF). Left to the serving connection, that was an fsync on the event loop in one commit of every few
 * at 100 commits/s (32 of 150 commits at 50/s, traced). So right after such a checkpoint the worker makes
 * that write itself (a one-row update of `wal_restarts`, migration 12), and leaves the WAL alone while
 * nobody else has written since (no busy loop on an idle store).
 *
 * That write changes the WAL-index header, which the store's reads compare with the header its last
 * sync covered (WalSync.visibleIsDurable): the first read after it would wait for a sync of its own
 * (21% of reads at 50 writes/s did, measured). So the worker tells the serving thread (`onWalRestart`),
 * which starts that sync at once, off the event loop, long before the next request reads.
 *
 * If the worker cannot run, the serving connection's own automatic checkpoint stays on at a higher
 * threshold (`fallbackPages`): the WAL is bounded either way.
 */
export interface Checkpointer {
  /** Ends the worker (its connection closes with it) and gives checkpoints back to the connection. */
  stop(): Promise<void>;
}

export interface CheckpointerOptions {
  intervalMs?: number;
  /** The serving connection's wal_autocheckpoint while the worker runs (default 10,000 pages, ~40 MB). */
  fallbackPages?: number;
  /** Called on the event loop after the worker restarted the WAL with a write of its own (see above). */
  onWalRestart?: () => void;
}

const SQLITE_DEFAULT_AUTOCHECKPOINT = 1_000;

// Dynamic imports, not require: the source runs as CommonJS or as an ES module, whichever the host's flags
// (--input-type, --experimental-default-type) make eval'd code, so it is written to run as either.
const WORKER_SOURCE = `(async () => {
const { workerData, parentPort } = await import('node:worker_threads');
const { createRequire } = await import('node:module');
const Database = createRequire(workerData.library)(workerData.library);
const db = new Database(workerData.file, { fileMustExist: true });
db.pragma('busy_timeout = 0');
// A checkpoint syncs the WAL before copying it into the database file, and the database file before
// the WAL may restart: the write connection commits with synchronous=NORMAL and relies on that.
db.pragma('synchronous = FULL');
// It reads little (a checkpoint copies frames without the page cache): a small cache, and statements
// prepared once (a tick allocates next to nothing).
db.pragma('cache_size = -256');
const dataVersion = db.prepare('PRAGMA data_version').pluck();
const checkpoint = db.prepare('PRAGMA wal_checkpoint(PASSIVE)');
// Missing on a file whose schema predates it (a tool that opened the store without migrating).
let restart = null;
try { restart = db.prepare('UPDATE wal_restarts SET restarts = restarts + 1 WHERE id = 1'); } catch (e) { /* no table */ }
// data_version as of this worker's last restart: unchanged means nobody else has written since.
let restartedAt = null;
setInterval(() => {
  try {
    // Nobody else has written since this worker restarted the WAL: nothing to copy (copying its own
    // update would leave the WAL to be restarted by the next request's commit).
    const version = dataVersion.get();
    if (version === restartedAt) return;
    const done = checkpoint.get();
    // The whole WAL is in the database file now: the next write restarts the WAL from its start and
    // syncs its new header (with any synchronous but OFF). Make that this thread's write, not a
    // request's commit on the event loop.
    if (restart && done.busy === 0 && done.log > 0 && done.checkpointed === done.log) {
      // The update itself need not be durable (the next sync of the WAL covers it).
      db.exec('PRAGMA synchronous = NORMAL');
      try { restart.run(); restartedAt = version; } finally { db.exec('PRAGMA synchronous = FULL'); }
      parentPort.postMessage('wal-restarted');
    }
  } catch (e) { /* busy: the next tick tries again */ }
}, workerData.intervalMs);
})();`;

/** Starts the checkpoint worker for `db` (a file database in WAL mode); does not wait for it. */
export function startCheckpointer(db: SqliteDatabase, options: CheckpointerOptions = {}): Checkpointer {
  if (db.memory) return { stop: async () => {} };
  const worker = new Worker(WORKER_SOURCE, {
    eval: true,
    workerData: { library: createRequire(import.meta.url).resolve('better-sqlite3'), file: db.name, intervalMs: options.intervalMs ?? 100 },
  });
  let stopping = false;
  const giveBack = () => {
    if (db.open) db.pragma(`wal_autocheckpoint = ${SQLITE_DEFAULT_AUTOCHECKPOINT}`);
  };
  worker.on('message', (message) => {
    if (message === 'wal-restarted') options.onWalRestart?.();
  });
  // A CLI command that opened the store must still exit when it is done. After the 'message'
  // listener: adding one refs the worker again.
  worker.unref();
  // A worker that fails (or dies) hands checkpoints back to the serving connection.
  worker.on('error', giveBack);
  worker.on('exit', () => stopping || giveBack());
  db.pragma(`wal_autocheckpoint = ${options.fallbackPages ?? 10_000}`);
  return {
    async stop() {
      stopping = true;
      giveBack();
      await worker.terminate();
    },
  };
}
