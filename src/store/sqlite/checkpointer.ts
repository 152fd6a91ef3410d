import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import type { SqliteDatabase } from './database.js';

/**
 * WAL checkpoints off the request path. By default SQLite checkpoints inside the commit that takes
 * the WAL past 1,000 pages: that commit also copies the WAL into the database file and syncs it, and
 * with better-sqlite3 the whole event loop waits. A gateway write adds ~18 WAL pages, so about one
 * write in 55 paid for a checkpoint (the intent commit's p99 fell from 3.6–4.6 ms to 1.9–2.6 ms with
 * this, measured on these machines). Here a worker thread with its own connection runs a PASSIVE
 * checkpoint (it never blocks writers or readers, and skips what is in use), so the WAL is recycled from
 * its start instead of growing, and no request waits for it.
 *
 * When: looked at every `intervalMs`, a checkpoint runs once the WAL holds `minFrames` (SQLite's own 1,000
 * pages by default: the WAL-index header, read through the store's `-shm` descriptor, says how many), or
 * after an interval with no commit (an idle or lightly used store is copied at once). Not at every
 * interval: each checkpoint syncs the WAL and the database file and restarts the WAL (below), and a
 * request's commit that meets one waits for the disk behind it. At 50 gateway writes a second (~100
 * frames an interval) one commit in five overlapped a checkpoint, with twice the latency at p50 (traced,
 * 2026-12-06: bench/RESULTS.md "Where the gateway's own-share tail comes from").
 *
 * Recycling has a sync of its own: the first write after a checkpoint that copied the whole WAL restarts
 * it from its start, and SQLite syncs the new WAL header inside that write (with any `synchronous` but
 * OFF). Left to the serving connection, that was an fsync on the event loop in one commit of every few
 * at 100 commits/s (32 of 150 commits at 50/s, traced). So right after such a checkpoint the worker makes
 * that write itself (a one-row update of `wal_restarts`, migration 12), and leaves the WAL alone while
 * nobody else has written since (no busy loop on an idle store). It makes it only when the WAL can
 * restart (every frame in it is in the database file): a commit made meanwhile would keep it from
 * restarting, and the update would be one more frame for nothing.
 *
 * That write changes the WAL-index header, which the store's reads compare with the header its last
 * sync covered (WalSync.visibleIsDurable): the first read after it would wait for a sync of its own
 * (21% of reads at 50 writes/s did, measured). A sync made for it at once instead was one more sync a
 * request's commit could find in flight and wait behind. So the worker reads the header right after its
 * update and sends it (`onWalRestart`) when that update restarted the WAL and no other commit came
 * since (the salts changed, the commit counter grew by one): every page that state shows is then in the
 * database file, which the checkpoint synced, except the update's own counter, which nothing answers
 * from; the store takes that header as durable (WalSync.restartedTo).
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
  /**
   * Called on the event loop after the worker restarted the WAL with a write of its own (see above), with
   * the WAL-index header (48 bytes, latin1) right after that write when the worker made sure it was the
   * only commit since its checkpoint copied the whole WAL into the database file and synced it; else null.
   */
  onWalRestart?: (header: string | null) => void;
  /**
   * A descriptor of the file's `-shm` that stays open while the worker runs (the store's WalSync's): the
   * worker reads the WAL-index header through it. Without one it checkpoints at every interval and the
   * restart reports no header.
   */
  walIndexFd?: number | null;
  /** While commits keep coming, the WAL frames to wait for before a checkpoint (default 1,000: SQLite's own threshold). */
  minFrames?: number;
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
// The serving thread's descriptor of \`-shm\` (never closed here: closing any descriptor of the file would drop
// the process's POSIX locks on it, which SQLite holds), or null. Its first 48 bytes are the WAL-index header.
const fs = await import('node:fs');
const os = await import('node:os');
const walIndexFd = workerData.walIndexFd;
// The WAL-index header (48 bytes), its copy, and nBackfill (bytes 96–99: the WAL frames in the database file).
const header = Buffer.alloc(100);
const readHeader = () => {
  if (walIndexFd === null) return null;
  try { return fs.readSync(walIndexFd, header, 0, 100, 0) === 100 ? Buffer.from(header) : null; } catch (e) { return null; }
};
const u32 = (h, at) => (os.endianness() === 'LE' ? h.readUInt32LE(at) : h.readUInt32BE(at));
// data_version as of this worker's last restart: unchanged means nobody else has written since.
let restartedAt = null;
// data_version at the last tick: unchanged means nobody else committed in the last interval.
let lastVersion = null;
setInterval(() => {
  try {
    const version = dataVersion.get();
    const quiet = version === lastVersion;
    lastVersion = version;
    // Nobody else has written since this worker restarted the WAL: nothing to copy (copying its own
    // update would leave the WAL to be restarted by the next request's commit).
    if (version === restartedAt) return;
    // While commits keep coming, wait for the WAL to hold minFrames: each checkpoint syncs both files and
    // holds the write lock for its restart, and a request's commit that meets it waits for the disk.
    // A quiet interval checkpoints what there is.
    const h = quiet ? null : readHeader();
    if (h !== null && u32(h, 16) < workerData.minFrames) return;
    const done = checkpoint.get();
    // The whole WAL is in the database file now: the next write restarts the WAL from its start and
    // syncs its new header (with any synchronous but OFF). Make that this thread's write, not a
    // request's commit on the event loop.
    if (restart && done.busy === 0 && done.log > 0 && done.checkpointed === done.log) {
      // The update itself need not be durable (the next sync of the WAL covers it).
      db.exec('PRAGMA synchronous = NORMAL');
      // The WAL-index header after the restart, when it is certain that this update is the only commit
      // since the checkpoint copied everything (and synced the database file): see onWalRestart.
      let restarted = null;
      let wrote = false;
      try {
        db.exec('BEGIN IMMEDIATE');
        try {
          // Under the write lock: no other commit can change it until this one's.
          const before = readHeader();
          // A commit made while the checkpoint copied (or since) is not in the database file: the WAL cannot
          // restart now, and an update would only add a frame that the next read waits to see synced.
          if (before !== null && u32(before, 16) !== u32(before, 96)) {
            db.exec('ROLLBACK');
          } else {
            restart.run();
            db.exec('COMMIT');
            wrote = true;
            const after = readHeader();
            // The salts (bytes 32–39) change only when the WAL restarts, and iChange (bytes 8–11) grows by
            // one with each commit: so this commit restarted the WAL, and no other has been made since.
            if (before !== null && after !== null && !before.subarray(32, 40).equals(after.subarray(32, 40)) && u32(after, 8) === ((u32(before, 8) + 1) >>> 0)) {
              restarted = after.subarray(0, 48).toString('latin1');
            }
            restartedAt = version;
          }
        } catch (e) {
          if (db.inTransaction) db.exec('ROLLBACK');
          throw e;
        }
      } finally { db.exec('PRAGMA synchronous = FULL'); }
      if (wrote) parentPort.postMessage({ walRestarted: restarted });
    }
  } catch (e) { /* busy: the next tick tries again */ }
}, workerData.intervalMs);
})();`;

/** Starts the checkpoint worker for `db` (a file database in WAL mode); does not wait for it. */
export function startCheckpointer(db: SqliteDatabase, options: CheckpointerOptions = {}): Checkpointer {
  if (db.memory) return { stop: async () => {} };
  const worker = new Worker(WORKER_SOURCE, {
    eval: true,
    workerData: { library: createRequire(import.meta.url).resolve('better-sqlite3'), file: db.name, intervalMs: options.intervalMs ?? 100, walIndexFd: options.walIndexFd ?? null, minFrames: options.minFrames ?? SQLITE_DEFAULT_AUTOCHECKPOINT },
  });
  let stopping = false;
  const giveBack = () => {
    if (db.open) db.pragma(`wal_autocheckpoint = ${SQLITE_DEFAULT_AUTOCHECKPOINT}`);
  };
  worker.on('message', (message) => {
    if (typeof message === 'object' && message !== null && 'walRestarted' in message) options.onWalRestart?.((message as { walRestarted: string | null }).walRestarted);
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
