import type { Statement } from 'better-sqlite3';
import type { SqliteDatabase } from './database.js';

export interface GroupCommitOptions {
  /** Operations per transaction; a full queue is flushed at once instead of waiting for the next turn. */
  maxBatch?: number;
}

/** Counters since the GroupCommit was made (a benchmark reads them; nothing depends on them). */
export interface GroupCommitStats {
  /** Transactions committed. */
  commits: number;
  /** Operations whose promise resolved (each inside a committed transaction). */
  committedOperations: number;
  /** Operations that threw: their own writes were rolled back, their promise rejected with their error. */
  failedOperations: number;
  /** Transactions that could not begin or commit: every operation in them was rejected. */
  failedCommits: number;
  largestBatch: number;
}

/** How `run` treats an operation. */
export interface GroupOperationOptions {
  /**
   * The operation is all-or-nothing by itself: a `db.transaction(...)` function (a savepoint of its
   * own inside the batch, rolled back by better-sqlite3 before it throws), a single statement, or
   * reads after either. It then runs without the per-operation savepoint (two statements fewer).
   */
  atomic?: boolean;
}

interface Pending {
  fn: () => unknown;
  atomic: boolean;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

type Settled = { op: Pending; ok: true; value: unknown } | { op: Pending; ok: false; error: unknown };

/**
 * Group commit on one SQLite connection: write operations that arrive in the same turn of the event
 * loop share one `BEGIN IMMEDIATE … COMMIT`, so one sync of the WAL makes them all durable. Each
 * operation runs in its own savepoint (a throwing one rolls back only its own writes and rejects only
 * its own promise), and every promise settles after the COMMIT has returned: nothing is acknowledged
 * before it is durable. If the transaction cannot begin or commit (SQLITE_BUSY after the busy timeout,
 * an I/O error), every operation of that batch is rejected.
 *
 * An operation may be async (the datastore contract's callbacks are), but it must only await calls on
 * this connection, which better-sqlite3 runs synchronously: the batch then runs within microtasks, and
 * no timer or I/O callback runs between its BEGIN and COMMIT. Operations run one after another, never
 * interleaved. One that is all-or-nothing by itself can say so (`atomic`) and skip its savepoint. A
 * `db.transaction(...)` function called inside one (even with `.immediate()`) becomes a savepoint in
 * better-sqlite3, so repositories work unchanged inside a batch. Nothing but the GroupCommit may use
 * this connection (reads go to another connection): it would see a batch's uncommitted writes.
 */
export class GroupCommit {
  readonly stats: GroupCommitStats = { commits: 0, committedOperations: 0, failedOperations: 0, failedCommits: 0, largestBatch: 0 };
  private readonly maxBatch: number;
  private readonly s: Record<'begin' | 'commit' | 'rollback' | 'savepoint' | 'release' | 'rollbackTo', Statement>;
  private queue: Pending[] = [];
  private scheduled = false;
  private flushing = false;
  private idle: Promise<void> = Promise.resolve();

  constructor(
    private readonly db: SqliteDatabase,
    options: GroupCommitOptions = {},
  ) {
    this.maxBatch = Math.max(1, options.maxBatch ?? 256);
    // Savepoints inside a transaction that already dirtied pages keep those pages in a sub-journal;
    // in a temp file that cost three times the operation itself (measured: bench/lease.ts).
    db.pragma('temp_store = MEMORY');
    this.s = {
      begin: db.prepare('BEGIN IMMEDIATE'),
      commit: db.prepare('COMMIT'),
      rollback: db.prepare('ROLLBACK'),
      savepoint: db.prepare('SAVEPOINT writ_group_op'),
      release: db.prepare('RELEASE writ_group_op'),
      rollbackTo: db.prepare('ROLLBACK TO writ_group_op'),
    };
  }

  /** Queues `fn` for the next group transaction; resolves with its result once that transaction has committed. */
  run<T>(fn: () => T | Promise<T>, options: GroupOperationOptions = {}): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ fn, atomic: options.atomic === true, resolve: resolve as (value: unknown) => void, reject });
      if (this.queue.length >= this.maxBatch && !this.flushing) void this.flush();
      else if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => void this.flush());
      }
    });
  }

  /** Runs and commits everything queued now (e.g. before the connection is closed); resolves when the queue is empty. */
  async flush(): Promise<void> {
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
      }
    } finally {
      this.flushing = false;
      done();
    }
  }

  private async commitBatch(batch: Pending[]): Promise<void> {
    try {
      this.s.begin.run();
    } catch (e) {
      this.fail(batch, e);
      return;
    }
    // A batch of one needs no savepoint: rolling back the transaction rolls back only its writes.
    const alone = batch.length === 1;
    const settled: Settled[] = [];
    for (let i = 0; i < batch.length; i++) {
      const op = batch[i]!;
      const savepoint = !alone && !op.atomic;
      if (savepoint) this.s.savepoint.run();
      try {
        const value = await op.fn();
        if (savepoint) this.s.release.run();
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
        else if (savepoint) {
          this.s.rollbackTo.run();
          this.s.release.run();
        }
        // else: an atomic operation has already undone its own writes.
        settled.push({ op, ok: false, error });
      }
    }
    if (alone && !settled[0]!.ok) {
      this.settle(settled);
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
    this.settle(settled);
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

  /** Nothing of `batch` was committed: an operation that threw keeps its own error, the others get `error`. */
  private fail(batch: Pending[], error: unknown, settled: Settled[] = []): void {
    this.stats.failedCommits += 1;
    const own = new Map(settled.filter((s) => !s.ok).map((s) => [s.op, (s as { error: unknown }).error]));
    for (const op of batch) op.reject(own.has(op) ? own.get(op) : error);
  }
}
