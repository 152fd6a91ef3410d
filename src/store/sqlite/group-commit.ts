import type { Statement } from 'better-sqlite3';
import type { SqliteDatabase } from './database.js';
import type { WalSync } from './wal-sync.js';

export interface GroupCommitOptions {
  /** Operations per transaction; a full queue is committed at once instead of waiting. */
  maxBatch?: number;
  /**
   * Makes commits durable off the event loop: the connection then commits with `synchronous=NORMAL`
   * (no sync inside COMMIT) and every operation is answered only after `wal` has synced the WAL past
   * its commit (see WalSync). Without it the connection's own `synchronous` decides (FULL: COMMIT
   * syncs on the main thread; `:memory:` has nothing to sync).
   */
  wal?: WalSync;
  /**
   * With `wal`: called right after each COMMIT with two WAL-index headers (WalSync.changeTag): `before`,
   * one read while this transaction held the write lock (`tagInTransaction`) or, if it read none, the
   * one read right after this GroupCommit's previous COMMIT; and `after`, read right after this COMMIT
   * (the store carries its cached graph head across a commit of its own that appended no graph event).
   * Every commit between the two, this one included, moved the header's commit counter.
   */
  committed?: (before: string | null, after: string | null) => void;
  /**
   * With `wal`, for a connection nothing but this GroupCommit uses: it keeps `busy_timeout = 0` from its
   * first BEGIN on, instead of switching it off for each BEGIN and back after (two statements a
   * transaction). In WAL mode only BEGIN IMMEDIATE waits for another connection's lock: once it holds
   * the write lock, no statement of the transaction (COMMIT, its passive automatic checkpoint, a WAL
   * restart) calls the busy handler. `lend()` gives the connection its busy timeout back for good.
   */
  sole?: boolean;
}

/** Counters since the GroupCommit was made (a benchmark reads them; nothing depends on them). */
export interface GroupCommitStats {
  /** Transactions committed. */
  commits: number;
  /** Operations whose promise resolved (each inside a committed transaction). */
  committedOperations: number;
  /** Operations that threw: their own writes were rolled back, their promise rejected with their error. */
  failedOperations: number;
  /** Transactions that could not begin, commit or be synced: every operation in them was rejected. */
  failedCommits: number;
  largestBatch: number;
}

interface Pending {
  fn: () => unknown;
  /** When a BEGIN first found another connection holding the write lock while this was queued (performance.now()). */
  lockWaitSince?: number;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

type Settled = { op: Pending; ok: true; value: unknown } | { op: Pending; ok: false; error: unknown };

/**
 * Group commit on one SQLite connection: write operations that arrive together share one
 * `BEGIN IMMEDIATE … COMMIT`, so one sync of the WAL makes them all durable. Each operation runs in
 * its own savepoint (a throwing one rolls back only its own writes and rejects only its own promise),
 * and every promise settles after the transaction is durable: nothing is acknowledged before. If the
 * transaction cannot begin, commit or be synced (SQLITE_BUSY after the busy timeout, an I/O error, a
 * failed fdatasync), every operation of that batch is rejected. While another connection (another
 * process on the file) holds the write lock, the batch waits for it without blocking the event loop.
 *
 * With a WalSync (what the store wires) the sync runs on libuv's thread pool, not in COMMIT: while it
 * runs, the main thread keeps serving requests and new operations queue up; when it completes, its
 * batch is answered and everything queued meanwhile is committed as the next batch and synced in turn
 * (one sync in flight at a time, so a batch grows with the sync's duration: the classic group commit).
 *
 * An operation may be async (the datastore contract's callbacks are), but it must only await calls on
 * this connection, which better-sqlite3 runs synchronously: the batch then runs within microtasks, and
 * no timer or I/O callback runs between its BEGIN and COMMIT. Operations run one after another, never
 * interleaved. A `db.transaction(...)` function called inside one (even with `.immediate()`) becomes a
 * savepoint in better-sqlite3, so repositories work unchanged inside a batch. Nothing but the
 * GroupCommit may use this connection (reads go to another connection): it would see a batch's
 * uncommitted writes, and with a WalSync its commits would not be synced.
 */
export class GroupCommit {
  readonly stats: GroupCommitStats = { commits: 0, committedOperations: 0, failedOperations: 0, failedCommits: 0, largestBatch: 0 };
  private readonly maxBatch: number;
  private readonly wal: WalSync | null;
  private readonly committed: ((before: string | null, after: string | null) => void) | null;
  private readonly s: Record<'begin' | 'commit' | 'rollback' | 'savepoint' | 'release' | 'rollbackTo', Statement>;
  /** The connection's busy timeout: how long an operation waits for another connection's write lock before it fails. */
  private readonly busyTimeoutMs: number;
  /** The connection is this GroupCommit's alone (`sole`, until `lend()`): its busy timeout stays 0 between transactions. */
  private sole: boolean;
  /** The connection's busy timeout is 0 now (switched off by tryBegin, and left so because it is `sole`). */
  private timeoutOff = false;
  /** The WAL-index header as read in the open transaction (null: none read yet), and right after the last COMMIT. */
  private inTransactionTag: string | null = null;
  private lastCommitTag: string | null = null;
  private queue: Pending[] = [];
  private scheduled = false;
  private flushing = false;
  private idle: Promise<void> = Promise.resolve();
  /** Committed batches waiting for their sync; while any does, new operations wait in the queue. */
  private syncing = 0;
  private syncWaiters: (() => void)[] = [];

  constructor(
    private readonly db: SqliteDatabase,
    options: GroupCommitOptions = {},
  ) {
    this.maxBatch = Math.max(1, options.maxBatch ?? 256);
    this.wal = options.wal ?? null;
    this.committed = this.wal ? (options.committed ?? null) : null;
    this.sole = this.wal !== null && options.sole === true;
    // Savepoints inside a transaction that already dirtied pages keep those pages in a sub-journal;
    // in a temp file that cost three times the operation itself (measured: bench/lease.ts).
    db.pragma('temp_store = MEMORY');
    // NORMAL, not OFF: checkpoints on this connection (the fallback autocheckpoint) must still sync the
    // WAL before copying it into the database file, and the database file before the WAL restarts.
    if (this.wal) db.pragma('synchronous = NORMAL');
    this.busyTimeoutMs = Number(db.pragma('busy_timeout', { simple: true }));
    this.s = {
      begin: db.prepare('BEGIN IMMEDIATE'),
      commit: db.prepare('COMMIT'),
      rollback: db.prepare('ROLLBACK'),
      savepoint: db.prepare('SAVEPOINT writ_group_op'),
      release: db.prepare('RELEASE writ_group_op'),
      rollbackTo: db.prepare('ROLLBACK TO writ_group_op'),
    };
  }

  /** Queues `fn` for the next group transaction; resolves with its result once that transaction is durable. */
  run<T>(fn: () => T | Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ fn, resolve: resolve as (value: unknown) => void, reject });
      if (this.queue.length >= this.maxBatch && !this.flushing) void this.commitQueued();
      else if (!this.scheduled && this.syncing === 0) {
        this.scheduled = true;
        // The next turn, not a microtask: a batch awaits between its BEGIN and COMMIT, and another
        // GroupCommit on the same file in this process (a test's second store) had better not try its
        // BEGIN in those gaps (it would find the lock held and wait a turn).
        // Measured: committing at the next microtask gained nothing above this machine's noise.
        setImmediate(() => void this.commitQueued());
      }
    });
  }

  /** Commits everything queued now (e.g. before the connection closes); resolves once all of it is settled (durable or rejected). */
  async flush(): Promise<void> {
    await this.commitQueued();
    while (this.syncing > 0 || this.queue.length > 0) {
      if (this.syncing > 0) await new Promise<void>((resolve) => this.syncWaiters.push(resolve));
      await this.commitQueued();
    }
  }

  private async commitQueued(): Promise<void> {
    this.scheduled = false;
    if (this.flushing) return this.idle;
    this.flushing = true;
    let done!: () => void;
    this.idle = new Promise<void>((resolve) => (done = resolve));
    try {
      while (this.queue.length > 0) {
        const batch = this.queue.splice(0, this.maxBatch);
        try {
          await this.commitBatch(batch);
        } catch (e) {
          // A rollback or release statement itself failed: end the transaction and answer every caller.
          if (this.db.inTransaction) {
            try {
              this.s.rollback.run();
            } catch {
              // The next BEGIN reports the connection's state.
            }
          }
          this.fail(batch, e);
        }
        // While a sync runs, what arrives waits for it and is committed as one batch when it ends.
        if (this.syncing > 0 && this.queue.length < this.maxBatch) break;
      }
    } finally {
      this.flushing = false;
      done();
    }
  }

  private async commitBatch(batch: Pending[]): Promise<void> {
    if (this.wal?.failed) {
      this.fail(batch, this.wal.failed);
      return;
    }
    let busy: unknown;
    try {
      busy = this.tryBegin();
    } catch (e) {
      // Begun, then the busy timeout could not be restored: end the transaction, or no later BEGIN could start.
      if (this.db.inTransaction) this.s.rollback.run();
      this.fail(batch, e);
      return;
    }
    if (busy !== null) {
      // Another connection (another process) holds the write lock. Operations that have waited for it
      // for the busy timeout fail with SQLITE_BUSY (OVERLOADED); the others go back to the front of the
      // queue (what arrives meanwhile joins them), and the event loop runs on while they wait.
      // Every queued operation waits for the lock from now on, not only this batch's (the queue keeps
      // growing while the event loop runs); the oldest come first, so those that expired are a prefix.
      const now = performance.now();
      const all = [...batch, ...this.queue];
      for (const op of all) op.lockWaitSince ??= now;
      const expired = all.filter((op) => now - op.lockWaitSince! >= this.busyTimeoutMs);
      this.queue = all.filter((op) => now - op.lockWaitSince! < this.busyTimeoutMs);
      if (expired.length > 0) this.fail(expired, busy);
      if (this.queue.length > 0) await this.lockWait();
      return;
    }
    // Their wait is over: one put back after a rolled-back transaction waits anew. (Those that waited
    // are a prefix of the queue, so a batch whose first did not wait has none.)
    if (batch[0]!.lockWaitSince !== undefined) for (const op of batch) delete op.lockWaitSince;
    this.inTransactionTag = null;
    // A batch of one needs no savepoint: rolling back the transaction rolls back only its writes.
    const alone = batch.length === 1;
    const settled: Settled[] = [];
    for (let i = 0; i < batch.length; i++) {
      const op = batch[i]!;
      if (!alone) this.s.savepoint.run();
      try {
        const value = await op.fn();
        if (!alone) this.s.release.run();
        settled.push({ op, ok: true, value });
      } catch (error) {
        if (!this.db.inTransaction) {
          // SQLite rolled the whole transaction back (I/O error, disk full, …): the operations before this
          // one lost their writes too, and those after it have not run: they go first into a new batch.
          this.queue.unshift(...batch.slice(i + 1));
          settled.push({ op, ok: false, error });
          this.fail(settled.map((s) => s.op), error, settled);
          return;
        }
        if (alone) this.s.rollback.run();
        else {
          this.s.rollbackTo.run();
          this.s.release.run();
        }
        settled.push({ op, ok: false, error });
      }
    }
    if (alone && !settled[0]!.ok) {
      // Nothing was written, but the refusal may tell what this connection saw (a holder, a version):
      // it is answered once that state is durable.
      const wait = this.wal?.visibleIsDurable();
      // If that sync fails, the refusal's reason may never reach the disk: STORE_FAILED, not the refusal.
      if (wait) wait.then(() => this.settle(settled), (e: unknown) => this.fail(batch, e));
      else this.settle(settled);
      return;
    }
    try {
      this.s.commit.run();
    } catch (e) {
      if (this.db.inTransaction) {
        try {
          this.s.rollback.run();
        } catch {
          // The connection will report its own state on the next BEGIN.
        }
      }
      this.fail(batch, e, settled);
      return;
    }
    this.stats.commits += 1;
    this.stats.largestBatch = Math.max(this.stats.largestBatch, batch.length);
    if (!this.wal) {
      this.settle(settled);
      return;
    }
    // Read once, for the store's graph cache and as the header the sync below covers (no commit can
    // come in between: the sync starts in this same synchronous run, or waits for the one in flight).
    const after = this.wal.changeTag();
    if (this.committed) {
      this.committed(this.inTransactionTag ?? this.lastCommitTag, after);
      this.lastCommitTag = after;
    }
    this.inTransactionTag = null;
    this.syncing += 1;
    this.wal.syncNext(after).then(
      () => this.settle(settled),
      // fsyncgate: the pages may be lost although SQLite has them; never answered as if fine (and
      // WalSync refuses everything after this). A refusal in the batch gets STORE_FAILED too: what it
      // saw may be lost with them.
      (e: unknown) => this.fail(batch, e),
    ).finally(() => {
      this.syncing -= 1;
      if (this.syncing > 0) return;
      for (const wake of this.syncWaiters.splice(0)) wake();
      if (this.queue.length > 0) void this.commitQueued();
    });
  }

  /**
   * BEGIN IMMEDIATE without SQLite's busy handler, which would sleep on the event loop (1, 2, 5, 10 …
   * ms at a time) while another connection holds the write lock, stalling every request of this
   * process: null once begun, the SQLITE_BUSY error while the lock is held. Only this statement runs
   * with no busy timeout; every other statement on the connection keeps the timeout it was opened with.
   * The pragma acts when it is prepared, so each switch prepares it again: with `exec`, not `db.pragma`
   * (which also builds a Statement and reads its result): 0.7 against 3.9 µs warm, and 36 against 84 µs
   * as a commit's first call after 20 ms idle (measured: the gateway's pace).
   */
  private tryBegin(): unknown {
    if (!this.timeoutOff) {
      this.db.exec('PRAGMA busy_timeout = 0');
      this.timeoutOff = true;
    }
    try {
      this.s.begin.run();
      return null;
    } catch (e) {
      if (!String((e as { code?: unknown }).code).startsWith('SQLITE_BUSY')) throw e;
      return e;
    } finally {
      // A connection that is this GroupCommit's alone keeps it off (see GroupCommitOptions.sole).
      if (!this.sole) this.restoreBusyTimeout();
    }
  }

  /**
   * The WAL-index header (WalSync.changeTag) for a read on this connection: inside one of this
   * GroupCommit's transactions, read once and kept until it ends (with the write lock held no other
   * connection commits: the committed state it shows cannot change meanwhile); outside, read now.
   */
  tagInTransaction(): string | null {
    if (!this.wal) return null;
    if (!this.db.inTransaction) return this.wal.changeTag();
    return (this.inTransactionTag ??= this.wal.changeTag());
  }

  /**
   * The connection is to be used outside this GroupCommit's transactions too (a tool, a test, an
   * online backup): it gets its busy timeout back now, and every BEGIN from now on switches it off
   * only for itself. Call it with nothing in flight on the connection, or between two operations.
   */
  lend(): void {
    this.sole = false;
    if (!this.db.inTransaction) this.restoreBusyTimeout();
  }

  private restoreBusyTimeout(): void {
    if (!this.timeoutOff) return;
    this.db.exec(`PRAGMA busy_timeout = ${this.busyTimeoutMs}`);
    this.timeoutOff = false;
  }

  /**
   * Until the next try for the write lock: the next turn of the event loop for the first millisecond the
   * queue's head has waited (another process's batch holds the lock for well under that), then 1 ms
   * timers (a long holder, e.g. a migration or a tool, is not polled in a busy loop).
   */
  private lockWait(): Promise<void> {
    const waited = performance.now() - (this.queue[0]?.lockWaitSince ?? performance.now());
    return new Promise((resolve) => (waited < 1 ? setImmediate(resolve) : setTimeout(resolve, 1)));
  }

  private settle(settled: Settled[]): void {
    for (const s of settled) {
      if (s.ok) {
        this.stats.committedOperations += 1;
        s.op.resolve(s.value);
      } else {
        this.stats.failedOperations += 1;
        s.op.reject(s.error);
      }
    }
  }

  /** Nothing of `batch` is acknowledged: an operation that threw keeps its own error, the others get `error`. */
  private fail(batch: Pending[], error: unknown, settled: Settled[] = []): void {
    this.stats.failedCommits += 1;
    const own = new Map(settled.filter((s) => !s.ok).map((s) => [s.op, (s as { error: unknown }).error]));
    for (const op of batch) op.reject(own.has(op) ? own.get(op) : error);
  }
}
