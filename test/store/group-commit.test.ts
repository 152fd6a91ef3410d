import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { GroupCommit } from '../../src/store/sqlite/group-commit.js';

const dirs: string[] = [];
afterAll(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));

/** A WAL file with one table, the GroupCommit over it, and a second connection that sees only committed rows. */
function setup(options: { maxBatch?: number; busyTimeoutMs?: number } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'writ-group-commit-'));
  dirs.push(dir);
  const file = join(dir, 'g.db');
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
  db.pragma(`busy_timeout = ${options.busyTimeoutMs ?? 5000}`);
  db.pragma('foreign_keys = ON');
  db.exec(`CREATE TABLE t (x INTEGER PRIMARY KEY);
    CREATE TABLE parent (id INTEGER PRIMARY KEY);
    CREATE TABLE child (id INTEGER PRIMARY KEY, parent INTEGER REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED)`);
  const other = new Database(file);
  other.pragma(`busy_timeout = ${options.busyTimeoutMs ?? 5000}`);
  const group = new GroupCommit(db, { maxBatch: options.maxBatch });
  const insert = db.prepare('INSERT INTO t (x) VALUES (?)');
  const seen = () => other.prepare('SELECT x FROM t ORDER BY x').pluck().all() as number[];
  return { db, other, group, insert, seen };
}

const outcome = (p: Promise<unknown>) =>
  p.then(
    (value) => ({ ok: true, value }),
    (e: Error) => ({ ok: false, error: e.message }),
  );

describe('group commit', () => {
  it('commits operations that arrive together in one transaction, each with its own result', async () => {
    const { group, insert, seen } = setup();
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => group.run(() => insert.run(i).lastInsertRowid)));
    expect(results).toEqual(Array.from({ length: 20 }, (_, i) => i));
    expect(group.stats).toMatchObject({ commits: 1, committedOperations: 20, largestBatch: 20 });
    expect(seen()).toHaveLength(20);
  });

  it('starts a new transaction when a batch is full', async () => {
    const { group, insert, seen } = setup({ maxBatch: 4 });
    await Promise.all(Array.from({ length: 10 }, (_, i) => group.run(() => insert.run(i))));
    expect(group.stats).toMatchObject({ commits: 3, committedOperations: 10, largestBatch: 4 });
    expect(seen()).toHaveLength(10);
  });

  it('runs operations of later turns in later transactions, in arrival order', async () => {
    const { group, insert, seen } = setup();
    await group.run(() => insert.run(1));
    await group.run(() => insert.run(2));
    expect(group.stats.commits).toBe(2);
    expect(seen()).toEqual([1, 2]);
  });

  it('settles a promise only after the COMMIT: another connection sees the write when it resolves, not before', async () => {
    const { group, insert, seen } = setup();
    const seenAtResolve: number[][] = [];
    const runs = [1, 2, 3].map((x) => group.run(() => insert.run(x)).then(() => seenAtResolve.push(seen())));
    expect(seen()).toEqual([]);
    await Promise.all(runs);
    expect(seenAtResolve).toEqual([
      [1, 2, 3],
      [1, 2, 3],
      [1, 2, 3],
    ]);
  });

  it('rolls back only the writes of an operation that throws, and rejects only its promise', async () => {
    const { group, insert, seen } = setup();
    const results = await Promise.all([
      outcome(group.run(() => insert.run(1))),
      outcome(
        group.run(() => {
          insert.run(2);
          insert.run(3);
          throw new Error('refused');
        }),
      ),
      outcome(group.run(() => insert.run(1))), // a constraint error thrown by SQLite itself
      outcome(group.run(() => insert.run(4).changes)),
    ]);
    expect(results).toMatchObject([{ ok: true }, { ok: false, error: 'refused' }, { ok: false, error: /UNIQUE/ }, { ok: true, value: 1 }]);
    expect(seen()).toEqual([1, 4]);
    expect(group.stats).toMatchObject({ commits: 1, committedOperations: 2, failedOperations: 2, failedCommits: 0 });
  });

  it('rolls back a lone operation that throws', async () => {
    const { group, insert, seen, db } = setup();
    const r = await outcome(
      group.run(() => {
        insert.run(7);
        throw new Error('alone');
      }),
    );
    expect(r).toEqual({ ok: false, error: 'alone' });
    expect(seen()).toEqual([]);
    expect(db.inTransaction).toBe(false);
    await group.run(() => insert.run(8));
    expect(seen()).toEqual([8]);
  });

  it('keeps db.transaction(...).immediate() working inside a batch: it becomes a savepoint of its own', async () => {
    const { group, db, insert, seen } = setup();
    const tx = insertsThenMaybeFails(db, insert);
    const results = await Promise.all([
      outcome(group.run(() => tx.immediate([1, 2], false))),
      outcome(
        group.run(() => {
          insert.run(3);
          try {
            tx.immediate([4, 5], true);
          } catch {
            // the inner transaction function rolled back its own savepoint only
          }
          return 'kept 3';
        }),
      ),
      outcome(group.run(() => tx.immediate([6], true))),
    ]);
    expect(results).toEqual([
      { ok: true, value: 2 },
      { ok: true, value: 'kept 3' },
      { ok: false, error: 'inner' },
    ]);
    expect(seen()).toEqual([1, 2, 3]);
    expect(group.stats.commits).toBe(1);
  });

  it('rejects every operation of a batch whose COMMIT fails, and commits none of it', async () => {
    const { group, db, insert, seen } = setup();
    const child = db.prepare('INSERT INTO child (id, parent) VALUES (?, ?)');
    // A deferred foreign key is checked at COMMIT: the batch's commit fails after every operation succeeded.
    const results = await Promise.all([
      outcome(group.run(() => insert.run(1))),
      outcome(group.run(() => child.run(1, 999))),
      outcome(group.run(() => insert.run(2))),
    ]);
    expect(results.map((r) => r.ok)).toEqual([false, false, false]);
    expect(results[0]).toMatchObject({ error: /FOREIGN KEY/ });
    expect(seen()).toEqual([]);
    expect(db.inTransaction).toBe(false);
    expect(group.stats).toMatchObject({ commits: 0, committedOperations: 0, failedCommits: 1 });
    await group.run(() => insert.run(3));
    expect(seen()).toEqual([3]);
  });

  it('rejects every operation of a batch that cannot take the write lock (SQLITE_BUSY), then recovers', async () => {
    const { group, insert, seen, other } = setup({ busyTimeoutMs: 0 });
    other.exec('BEGIN IMMEDIATE');
    const results = await Promise.all([outcome(group.run(() => insert.run(1))), outcome(group.run(() => insert.run(2)))]);
    expect(results).toMatchObject([
      { ok: false, error: /locked|busy/i },
      { ok: false, error: /locked|busy/i },
    ]);
    other.exec('COMMIT');
    expect(seen()).toEqual([]);
    await group.run(() => insert.run(3));
    expect(seen()).toEqual([3]);
  });

  it('waits for another connection\'s write lock without blocking the event loop, and commits once it is free (what arrives meanwhile joins the batch)', async () => {
    const { group, insert, seen, other } = setup({ busyTimeoutMs: 5000 });
    other.exec('BEGIN IMMEDIATE');
    // SQLite's busy handler would sleep on this thread until the lock is free: no timer would fire meanwhile.
    let ticks = 0;
    const ticker = setInterval(() => (ticks += 1), 5);
    const first = group.run(() => insert.run(1));
    await new Promise((r) => setTimeout(r, 100));
    const second = group.run(() => insert.run(2));
    await new Promise((r) => setTimeout(r, 200));
    expect(seen()).toEqual([]);
    other.exec('COMMIT');
    await Promise.all([first, second]);
    clearInterval(ticker);
    expect(ticks, 'timers fired while the batch waited for the lock').toBeGreaterThan(10);
    expect(seen()).toEqual([1, 2]);
    expect(group.stats).toMatchObject({ commits: 1, committedOperations: 2, failedCommits: 0 });
  });

  it('gives up on a write lock held past the connection\'s busy timeout (SQLITE_BUSY), still without blocking the event loop', async () => {
    const { group, insert, seen, other } = setup({ busyTimeoutMs: 150 });
    other.exec('BEGIN IMMEDIATE');
    let ticks = 0;
    const ticker = setInterval(() => (ticks += 1), 5);
    const started = Date.now();
    const result = await outcome(group.run(() => insert.run(1)));
    clearInterval(ticker);
    expect(result).toMatchObject({ ok: false, error: /locked|busy/i });
    expect(Date.now() - started).toBeGreaterThanOrEqual(140);
    expect(ticks).toBeGreaterThan(5);
    other.exec('COMMIT');
    await group.run(() => insert.run(2));
    expect(seen()).toEqual([2]);
  });

  it('counts the busy timeout per operation: one that joined a waiting batch later keeps waiting when an older one gives up', async () => {
    const { group, insert, seen, other, db } = setup({ busyTimeoutMs: 250 });
    other.exec('BEGIN IMMEDIATE');
    const older = outcome(group.run(() => insert.run(1)));
    await new Promise((r) => setTimeout(r, 150));
    const younger = outcome(group.run(() => insert.run(2)));
    expect(await older).toMatchObject({ ok: false, error: /locked|busy/i });
    other.exec('COMMIT');
    expect(await younger).toMatchObject({ ok: true });
    expect(seen()).toEqual([2]);
    // Only BEGIN ran without the connection's busy timeout: it is the one it was opened with.
    expect(db.pragma('busy_timeout', { simple: true })).toBe(250);
  });

  it('counts the busy timeout from when each operation was queued behind the lock, batches beyond the first included', async () => {
    const { group, insert, other } = setup({ busyTimeoutMs: 100, maxBatch: 2 });
    other.exec('BEGIN IMMEDIATE');
    const started = Date.now();
    const results = await Promise.all(Array.from({ length: 6 }, (_, i) => outcome(group.run(() => insert.run(i)))));
    const elapsed = Date.now() - started;
    other.exec('COMMIT');
    expect(results.every((r) => !r.ok)).toBe(true);
    // All six gave up after about one busy timeout, not one timeout per batch of two (300 ms).
    expect(elapsed).toBeLessThan(250);
  });

  it('rejects the operations whose writes SQLite threw away with the whole transaction, and runs the rest anew', async () => {
    const { group, db, insert, seen } = setup();
    const results = await Promise.all([
      outcome(group.run(() => insert.run(1))),
      outcome(
        group.run(() => {
          insert.run(2);
          db.exec('ROLLBACK'); // what SQLite does by itself on an I/O error or a full disk
          throw new Error('transaction lost');
        }),
      ),
      outcome(group.run(() => insert.run(3))),
    ]);
    expect(results).toMatchObject([
      { ok: false, error: 'transaction lost' },
      { ok: false, error: 'transaction lost' },
      { ok: true },
    ]);
    expect(seen()).toEqual([3]);
  });

  it('flush() commits what is queued at once (before a connection closes)', async () => {
    const { group, insert, seen, db } = setup();
    const p = group.run(() => insert.run(5));
    await group.flush();
    expect(seen()).toEqual([5]);
    db.close();
    await expect(p).resolves.toMatchObject({ changes: 1 });
    await expect(group.run(() => 1)).rejects.toThrow(/not open/);
  });
});

/** A transaction function that inserts each x, then throws 'inner' when asked to. */
function insertsThenMaybeFails(db: ReturnType<typeof setup>['db'], insert: ReturnType<typeof setup>['insert']) {
  return db.transaction((xs: number[], fail: boolean) => {
    for (const x of xs) insert.run(x);
    if (fail) throw new Error('inner');
    return xs.length;
  });
}
