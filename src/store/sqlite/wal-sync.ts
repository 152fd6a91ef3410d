import { closeSync, fdatasync, fstatSync, fsyncSync, openSync, readSync, statSync } from 'node:fs';
import { endianness } from 'node:os';
import { dirname, resolve } from 'node:path';
import { WritError } from '../../errors.js';

/** How a WAL descriptor is synced: `fs.fdatasync` (libuv's thread pool); a test may inject a failing one. */
export type SyncFn = (fd: number, done: (error: NodeJS.ErrnoException | null) => void) => void;

/** The first copy of the WAL-index header in `<db>-shm` (struct WalIndexHdr, 48 bytes). */
const WAL_INDEX_HEADER_BYTES = 48;

/**
 * The durability of one SQLite file in WAL mode, kept off the event loop.
 *
 * The write connection commits with `synchronous=NORMAL`: COMMIT only write()s its frames into the
 * WAL (the page cache) and publishes them in the WAL index; it does not sync. This class then syncs
 * the `-wal` file with `fdatasync` on libuv's thread pool, and a commit is acknowledged only once a
 * sync that *started after* it has completed: so "durable before acknowledged" holds as with
 * `synchronous=FULL`, but the main thread keeps parsing, verifying and evaluating while the disk
 * syncs, and commits made meanwhile ride the next sync (at most one sync runs at a time).
 *
 * Why this and not a worker thread owning the connection: Writ's storage contract runs async
 * callbacks with several awaited statements per transaction (`readWrite(async tx => …)`); in a worker
 * each statement would be a message and a turn of both event loops. Here the statements stay
 * synchronous calls on the main thread (~µs each) and only the sync — the one slow step — moves off it.
 *
 * What makes it safe:
 * - fdatasync of the `-wal` inode makes every frame written to it before the call durable (whoever
 *   wrote it, this process or another one sharing the file), and WAL recovery replays a prefix of
 *   committed transactions: a crash keeps everything acknowledged.
 * - Checkpoints (the checkpoint worker, or the write connection's fallback autocheckpoint) run with
 *   NORMAL or FULL, which sync the WAL before copying it into the database file and sync the database
 *   file before the WAL is restarted; the restart itself syncs the new WAL header. `journal_size_limit`
 *   only truncates a checkpointed WAL. The descriptor's inode is checked against the path before each
 *   sync (the WAL is only deleted when the last connection closes, but if it were recreated the new
 *   file is the one synced, directory included).
 * - Reads: another connection (the store's reader, another process) sees a commit as soon as it is
 *   published, before it is synced. `visibleIsDurable()` therefore compares the WAL-index header (a
 *   48-byte pread of `-shm`, which changes with every commit) with the header as of the last completed
 *   sync, and waits for a sync when they differ: a read never answers with a state a crash can take back.
 * - fsyncgate: a failed fdatasync may have dropped the dirty pages it failed to write, and a later
 *   fdatasync can then succeed without them. So one failure is final: the batch it covered is rejected
 *   (`STORE_FAILED`: outcome unknown), and so is every later sync, read and write of this process; a
 *   restart recovers from what reached the disk (crash recovery, as PostgreSQL does with a PANIC).
 *
 * The descriptors are closed only after every connection of this process to the file is closed: on
 * Linux, closing any descriptor of a file drops the process's POSIX locks on it, which SQLite holds
 * on `-shm`. Several stores on one file in one process share one `-shm` descriptor, closed with the
 * last of them (`sharedShm`), so one store closing never pulls the locks from under another. (A bare
 * better-sqlite3 connection on the file must still be closed before the last store on it.)
 */
/** One `-shm` descriptor per file per process, shared by the WalSyncs on it and closed with the last one. */
const sharedShm = new Map<string, { fd: number; users: number }>();

function openSharedShm(path: string): number {
  const open = sharedShm.get(path);
  if (open) {
    open.users += 1;
    return open.fd;
  }
  const fd = openSync(path, 'r');
  sharedShm.set(path, { fd, users: 1 });
  return fd;
}

function releaseSharedShm(path: string): void {
  const open = sharedShm.get(path);
  if (!open || --open.users > 0) return;
  sharedShm.delete(path);
  closeSync(open.fd);
}

/** The WAL-index header's iChange (offset 8, in the host's byte order): one more with every commit. */
function changeCounter(tag: string): number {
  const byte = (i: number) => tag.charCodeAt(8 + (HOST_LITTLE_ENDIAN ? i : 3 - i));
  return (byte(0) | (byte(1) << 8) | (byte(2) << 16) | (byte(3) << 24)) >>> 0;
}
const HOST_LITTLE_ENDIAN = endianness() === 'LE';

export class WalSync {
  /** Syncs completed (a benchmark reads it). */
  syncs = 0;
  private walFd: number | null = null;
  private walIno = -1;
  private shmFd: number | null = null;
  private readonly header = Buffer.alloc(WAL_INDEX_HEADER_BYTES);
  /** The WAL-index header read just before the last successful sync began: that state is durable. */
  private durableTag: string | null = null;
  private inflight: { tag: string | null; done: Promise<void> } | null = null;
  private next: { done: Promise<void>; resolve: () => void; reject: (e: unknown) => void } | null = null;
  private failure: WritError | null = null;
  private closed = false;

  private readonly shmPath: string;

  constructor(
    private readonly file: string,
    private readonly sync: SyncFn = fdatasync,
  ) {
    this.shmPath = resolve(`${file}-shm`);
  }

  /** The error every operation gets once a sync has failed, or null. */
  get failed(): WritError | null {
    return this.failure;
  }

  /**
   * A string that changes whenever any connection (of any process) commits to the file: the first
   * copy of the WAL-index header, read with one pread (~1 µs, no SQLite call). Null if `-shm` cannot
   * be read (then callers assume a change).
   */
  changeTag(): string | null {
    if (this.shmFd === null) {
      if (this.closed) return null;
      try {
        this.shmFd = openSharedShm(this.shmPath);
      } catch {
        return null;
      }
    }
    const n = readSync(this.shmFd, this.header, 0, WAL_INDEX_HEADER_BYTES, 0);
    return n === WAL_INDEX_HEADER_BYTES ? this.header.toString('latin1') : null;
  }

  /**
   * True when the WAL-index header went from `before` to `after` by exactly one commit (its change
   * counter, iChange, moved by one): read `before` while holding the write lock, before writing, and
   * `after` right after that transaction's COMMIT, it says no other connection committed in between
   * (a WAL restart or checkpoint changes the header but not the counter, nor the database's content).
   */
  static oneCommitBetween(before: string | null, after: string | null): boolean {
    if (before === null || after === null) return false;
    return ((changeCounter(after) - changeCounter(before)) >>> 0) === 1;
  }

  /**
   * Resolves once a sync that began after this call has completed: every commit published before it is
   * durable. `tag`: the header (changeTag) the caller read just now, with nothing run since: if the sync
   * starts now, that is the state it covers (one read less).
   */
  syncNext(tag?: string | null): Promise<void> {
    if (this.failure) return Promise.reject(this.failure);
    if (!this.inflight) return this.start(tag);
    if (!this.next) {
      let resolve!: () => void;
      let reject!: (e: unknown) => void;
      const done = new Promise<void>((res, rej) => ((resolve = res), (reject = rej)));
      this.next = { done, resolve, reject };
    }
    return this.next.done;
  }

  /**
   * Undefined if every commit visible now (to any connection) is durable; else a promise that resolves
   * when it is (the sync in flight if it covers what is visible, else the next one).
   */
  visibleIsDurable(): Promise<void> | undefined {
    if (this.failure) return Promise.reject(this.failure);
    const tag = this.changeTag();
    if (tag !== null && tag === this.durableTag) return undefined;
    if (tag !== null && this.inflight && this.inflight.tag === tag) return this.inflight.done;
    return this.syncNext();
  }

  /** Waits for the syncs in flight (before the connections close). */
  async drain(): Promise<void> {
    while (this.inflight) await this.inflight.done.catch(() => {});
  }

  /** Closes the descriptors: only after every connection of this process to the file is closed. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    if (this.walFd !== null) closeSync(this.walFd);
    if (this.shmFd !== null) releaseSharedShm(this.shmPath);
    this.walFd = this.shmFd = null;
  }

  /** `known`: the header as the caller read it just now, in the same synchronous run (no commit since). */
  private start(known?: string | null): Promise<void> {
    // The header first: whatever it shows was written to the WAL before the sync begins.
    const tag = known === undefined ? this.changeTag() : known;
    let fd: number;
    try {
      fd = this.walDescriptor();
    } catch (e) {
      return Promise.reject(this.fail(e));
    }
    let resolve!: () => void;
    let reject!: (e: unknown) => void;
    const done = new Promise<void>((res, rej) => ((resolve = res), (reject = rej)));
    // In flight before the call: a sync function may call back at once (a test's synchronous one).
    this.inflight = { tag, done };
    this.sync(fd, (error) => {
      this.inflight = null;
      if (error) {
        reject(this.fail(error));
      } else if (this.failure) {
        reject(this.failure);
      } else {
        this.syncs += 1;
        this.durableTag = tag;
        resolve();
      }
      const next = this.next;
      if (next) {
        this.next = null;
        this.syncNext().then(next.resolve, next.reject);
      }
    });
    return done;
  }

  /** The `-wal` descriptor, reopened if the path now names another file (and its directory synced then). */
  private walDescriptor(): number {
    if (this.closed) throw new Error('the store is closed');
    const path = `${this.file}-wal`;
    const ino = statSync(path).ino;
    if (this.walFd !== null && ino === this.walIno) return this.walFd;
    if (this.walFd !== null) closeSync(this.walFd);
    this.walFd = openSync(path, 'r');
    this.walIno = fstatSync(this.walFd).ino;
    // A new WAL file is durable only once its directory entry is: once per file, on the main thread.
    const dir = openSync(dirname(path), 'r');
    try {
      fsyncSync(dir);
    } finally {
      closeSync(dir);
    }
    return this.walFd;
  }

  private fail(error: unknown): WritError {
    if (!this.failure) {
      const code = (error as { code?: unknown }).code;
      this.failure = new WritError(
        'STORE_FAILED',
        `the store could not make writes durable (syncing ${this.file}-wal failed: ${typeof code === 'string' ? code : String(error)}); the outcome of the writes in flight is unknown, and this process refuses every store operation until it is restarted`,
        { cause: typeof code === 'string' ? code : String(error) },
      );
    }
    return this.failure;
  }
}
