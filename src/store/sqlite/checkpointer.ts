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
}

const SQLITE_DEFAULT_AUTOCHECKPOINT = 1_000;

const WORKER_SOURCE = `
const { workerData } = require('node:worker_threads');
const Database = require(workerData.library);
const db = new Database(workerData.file, { fileMustExist: true });
db.pragma('busy_timeout = 0');
// A checkpoint syncs the WAL before copying it into the database file, and the database file before
// the WAL may restart: the write connection commits with synchronous=NORMAL and relies on that.
db.pragma('synchronous = FULL');
setInterval(() => {
  try { db.pragma('wal_checkpoint(PASSIVE)'); } catch (e) { /* busy: the next tick tries again */ }
}, workerData.intervalMs);
`;

/** Starts the checkpoint worker for `db` (a file database in WAL mode); does not wait for it. */
export function startCheckpointer(db: SqliteDatabase, options: CheckpointerOptions = {}): Checkpointer {
  if (db.memory) return { stop: async () => {} };
  const worker = new Worker(WORKER_SOURCE, {
    eval: true,
    workerData: { library: createRequire(import.meta.url).resolve('better-sqlite3'), file: db.name, intervalMs: options.intervalMs ?? 100 },
  });
  // A CLI command that opened the store must still exit when it is done.
  worker.unref();
  let stopping = false;
  const giveBack = () => {
    if (db.open) db.pragma(`wal_autocheckpoint = ${SQLITE_DEFAULT_AUTOCHECKPOINT}`);
  };
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
