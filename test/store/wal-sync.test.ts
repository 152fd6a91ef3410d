import Database from 'better-sqlite3';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { openSqliteStore, type SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { WalSync, type SyncFn } from '../../src/store/sqlite/wal-sync.js';
import { WritError } from '../../src/errors.js';
import { LiveGraph } from '../../src/graph/live-graph.js';
import type { GraphEvent } from '../../src/graph/model.js';

const dirs: string[] = [];
afterAll(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));

const FAR = Date.now() + 3_600_000;
const now = () => Date.now();

/** A sync the test completes by hand: each call waits in `pending` until the test calls it back. */
function manualSync() {
  const pending: ((error: NodeJS.ErrnoException | null) => void)[] = [];
  const sync: SyncFn = (_fd, done) => pending.push(done);
  const until = async (n: number) => {
    for (let i = 0; pending.length < n; i++) {
      if (i > 1_000) throw new Error(`expected ${n} syncs, saw ${pending.length}`);
      await new Promise((r) => setImmediate(r));
    }
  };
  return { sync, pending, until };
}

async function open(sync?: SyncFn): Promise<{ store: SqliteStore; file: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'writ-wal-sync-'));
  dirs.push(dir);
  const file = join(dir, 'writ.db');
  return { store: await openSqliteStore(file, { checkpointer: false, ...(sync ? { sync } : {}) }), file };
}

/** Settles to 'pending' if `p` has not settled after a few turns of the event loop. */
async function state(p: Promise<unknown>): Promise<string> {
  const s = p.then(() => 'resolved', () => 'rejected');
  for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
  return Promise.race([s, Promise.resolve('pending')]);
}

const spend = (store: SqliteStore, id: string) => store.readWrite((tx) => tx.singleUse.spend('jti', id, FAR, now()));
const spent = (store: SqliteStore, id: string) => store.read((tx) => tx.singleUse.isSpent('jti', id, now()));

describe('the SQLite store syncs the WAL off the event loop', () => {
  it('acknowledges a write only after the WAL sync that follows its commit; writes made during a sync ride the next one', async () => {
    const { sync, pending, until } = manualSync();
    const { store } = await open(sync);
    const a = spend(store, 'a');
    await until(1);
    expect(await state(a)).toBe('pending'); // committed (the reader can see it) but not synced: not acknowledged
    const b = spend(store, 'b');
    const c = spend(store, 'c');
    expect(await state(b)).toBe('pending');
    expect(pending).toHaveLength(1); // b and c wait for the sync in flight
    pending[0]!(null);
    expect(await a).toBe(true);
    await until(2); // b and c: one batch, one sync
    expect(store.stats).toMatchObject({ commits: 2, largestBatch: 2 });
    expect(await state(Promise.all([b, c]))).toBe('pending');
    pending[1]!(null);
    expect(await Promise.all([b, c])).toEqual([true, true]);
    expect(store.syncs()).toBe(2);
    await store.close();
  });

  it('a read that can see a committed but unsynced write answers only after that write is durable', async () => {
    const { sync, pending, until } = manualSync();
    const { store } = await open(sync);
    const a = spend(store, 'a');
    await until(1);
    const read = spent(store, 'a');
    expect(await state(read)).toBe('pending');
    pending[0]!(null);
    expect(await read).toBe(true);
    await a;
    // Nothing unsynced is visible now: reads answer without a sync.
    expect(await spent(store, 'a')).toBe(true);
    expect(pending).toHaveLength(1);
    await store.close();
  });

  it('a read told which answers must wait (waitsFor) answers "nothing there" at once while a sync is in flight, and waits for the rest', async () => {
    const { sync, pending, until } = manualSync();
    const { store } = await open(sync);
    const a = spend(store, 'a');
    await until(1);
    const onlyIfSpent = (id: string) => store.read((tx) => tx.singleUse.isSpent('jti', id, now()), { waitsFor: (isSpent) => isSpent });
    // An id nobody spent: the answer owes nothing to the unsynced commit.
    expect(await state(onlyIfSpent('b'))).toBe('resolved');
    // The id the unsynced commit spent: answered only once that commit is durable.
    const sawA = onlyIfSpent('a');
    expect(await state(sawA)).toBe('pending');
    // A refusal thrown by the callback waits too, whatever waitsFor says.
    const refused = store.read(async () => {
      throw new WritError('UNPROCESSABLE', 'refused from what it saw');
    }, { waitsFor: () => false });
    expect(await state(refused)).toBe('pending');
    pending[0]!(null);
    expect(await sawA).toBe(true);
    await expect(refused).rejects.toMatchObject({ code: 'UNPROCESSABLE' });
    await a;
    await store.close();
  });

  it('the live graph: a head seen before it is durable is not applied, nor named in a refusal, until its sync completes', async () => {
    const { sync, pending, until } = manualSync();
    const { store } = await open(sync);
    // Wired as openWrit wires it: the head read skips the durability wait, the catch-up read does not.
    const graph = new LiveGraph({
      head: () => store.read((tx) => tx.graph.head(), { waitsFor: () => false }),
      read: (after, upTo) => store.read((tx) => tx.graph.read(after, upTo)),
      revisionAt: (time) => store.read((tx) => tx.graph.revisionAt(time)),
    });
    const event: GraphEvent = { type: 'principal.created', principal: { id: 'agent-1', kind: 'agent', priority_class: 'agent', priority: 10, attributes: {}, keys: [], created_at: 1 } };
    const appended = store.readWrite((tx) => tx.graph.append([event], 'governance', 1));
    await until(1); // committed, visible, not synced
    const current = graph.current();
    const beyond = graph.atRevision(2).catch((e: unknown) => e);
    expect(await state(current)).toBe('pending');
    expect(await state(beyond)).toBe('pending');
    pending[0]!(null);
    expect((await current).revision).toBe(1);
    expect(await beyond).toMatchObject({ code: 'UNPROCESSABLE', details: { revision: 2, head: 1 } });
    expect(await appended).toBe(1);
    await store.close();
  });

  it('a batch whose fsync fails rejects every callback (STORE_FAILED), refuses everything after it, and changes nothing acknowledged', async () => {
    const { sync, pending, until } = manualSync();
    const { store, file } = await open(sync);
    const first = spend(store, 'acked');
    await until(1);
    pending[0]!(null);
    expect(await first).toBe(true);

    // A refusal in the same batch (it saw state that the failing sync may lose) is STORE_FAILED too.
    const refusal = store.readWrite(async (tx) => {
      await tx.singleUse.spend('assertion', 'r', FAR, now());
      throw new WritError('RESOURCE_BUSY', 'held by what this connection saw');
    });
    const doomed = [spend(store, 'x'), spend(store, 'y'), refusal];
    await until(2);
    const later = spend(store, 'z'); // queued behind the failing sync
    const eio = Object.assign(new Error('EIO: i/o error, fdatasync'), { code: 'EIO' });
    pending[1]!(eio);
    for (const p of [...doomed, later]) await expect(p).rejects.toMatchObject({ code: 'STORE_FAILED' });
    expect(pending).toHaveLength(2); // never retried as if the failed sync had been fine
    // The process refuses every store operation from now on (a later sync could succeed without the lost pages).
    await expect(spend(store, 'w')).rejects.toMatchObject({ code: 'STORE_FAILED', message: /EIO/ });
    await expect(spent(store, 'acked')).rejects.toMatchObject({ code: 'STORE_FAILED' });
    expect(pending).toHaveLength(2);
    await store.close();

    // Restarted: what was acknowledged is there and still refuses a second spend.
    const again = await openSqliteStore(file, { checkpointer: false });
    try {
      expect(await spent(again, 'acked')).toBe(true);
      expect(await spend(again, 'acked')).toBe(false);
    } finally {
      await again.close();
    }
  });

  it('sees a graph append made by another connection, and reads the head from the log only when something was committed', async () => {
    const { store, file } = await open();
    const other = new Database(file);
    const statement = Object.getPrototypeOf(other.prepare('SELECT 1')) as { get: (...args: unknown[]) => unknown };
    const get = vi.spyOn(statement, 'get');
    const headQueries = () => get.mock.contexts.filter((s) => (s as { source: string }).source.includes('MAX(revision)')).length;
    const head = () => store.read((tx) => tx.graph.head());
    const append = (revision: number) => other.prepare('INSERT INTO graph_events (revision, at, actor, type, payload) VALUES (?, 0, ?, ?, ?)').run(revision, 'x', 'noop', '{}');
    try {
      expect(await head()).toBe(0);
      expect(await head()).toBe(0);
      expect(headQueries()).toBe(1);
      append(1);
      expect(await head()).toBe(1);
      expect(await head()).toBe(1);
      expect(await head()).toBe(1);
      expect(headQueries()).toBe(2);
      append(2);
      expect(await head()).toBe(2);
      expect(headQueries()).toBe(3);
    } finally {
      get.mockRestore();
      other.close();
      await store.close();
    }
  });
});

describe('the graph head across this store\'s own commits (one head query where three ran per lease pair)', () => {
  /** Counts the head queries of every connection of this process (the statement prototype is shared). */
  function countHeadQueries(db: Database.Database) {
    const statement = Object.getPrototypeOf(db.prepare('SELECT 1')) as { get: (...args: unknown[]) => unknown };
    const get = vi.spyOn(statement, 'get');
    return { count: () => get.mock.contexts.filter((s) => (s as { source: string }).source.includes('MAX(revision)')).length, restore: () => get.mockRestore() };
  }
  const noop = (n: number): GraphEvent[] => Array.from({ length: n }, (_, i) => ({ type: 'principal.revoked', id: `p-${i}`, at: 0, reason: 'test' }));

  it('a commit of its own that appends no graph event keeps the cached head; another connection\'s commit between two requests is seen at the next one, on the read and the write connection', async () => {
    const { store, file } = await open();
    const other = new Database(file);
    const queries = countHeadQueries(other);
    const head = () => store.read((tx) => tx.graph.head());
    const headInTx = () => store.readWrite((tx) => tx.graph.head({ lock: 'share' }));
    const spend = (id: string) => store.readWrite((tx) => tx.singleUse.spend('assertion', id, FAR, now()));
    const append = (revision: number) => other.prepare('INSERT INTO graph_events (revision, at, actor, type, payload) VALUES (?, 0, ?, ?, ?)').run(revision, 'x', 'noop', '{}');
    try {
      expect(await head()).toBe(0);
      expect(await headInTx()).toBe(0);
      expect(queries.count()).toBe(2);
      // Requests' own commits (spent ids) between head reads: no query more.
      for (let i = 0; i < 5; i++) {
        await spend(`own-${i}`);
        expect(await head()).toBe(0);
        expect(await headInTx()).toBe(0);
      }
      expect(queries.count()).toBe(2);
      // Another connection (as another process would) appends between two requests: both connections see it.
      append(1);
      expect(await head()).toBe(1);
      expect(await headInTx()).toBe(1);
      expect(queries.count()).toBe(4);
      // Another connection's append, then a commit of ours before the next read: not carried over, asked again.
      other.prepare('INSERT INTO graph_events (revision, at, actor, type, payload) VALUES (?, 0, ?, ?, ?)').run(2, 'x', 'noop', '{}');
      await spend('own-after-2');
      expect(await head()).toBe(2);
      expect(await headInTx()).toBe(2);
    } finally {
      queries.restore();
      other.close();
      await store.close();
    }
  });

  it('an append of its own is seen by both connections, also by a later operation of the same transaction; one rolled back is not', async () => {
    const { store } = await open();
    const head = () => store.read((tx) => tx.graph.head());
    try {
      expect(await head()).toBe(0);
      // Two operations queued together share one transaction: the second sees the first's uncommitted append.
      const [, seen] = await Promise.all([
        store.readWrite((tx) => tx.graph.append(noop(2), 'test', now())),
        store.readWrite((tx) => tx.graph.head({ lock: 'share' })),
      ]);
      expect(seen).toBe(2);
      expect(await head()).toBe(2);
      // An append whose operation fails is rolled back: neither connection keeps its head.
      await expect(store.readWrite(async (tx) => {
        await tx.graph.append(noop(1), 'test', now());
        expect(await tx.graph.head({ lock: 'share' })).toBe(3);
        throw new Error('refused');
      })).rejects.toThrow('refused');
      await store.readWrite((tx) => tx.singleUse.spend('assertion', 'after-rollback', FAR, now()));
      expect(await store.readWrite((tx) => tx.graph.head({ lock: 'share' }))).toBe(2);
      expect(await head()).toBe(2);
    } finally {
      await store.close();
    }
  });

  it('the events after the head are known to be none without a query while the cached head holds; another connection\'s append is read', async () => {
    const { store, file } = await open();
    const other = new Database(file);
    const statement = Object.getPrototypeOf(other.prepare('SELECT 1')) as { all: (...args: unknown[]) => unknown };
    const all = vi.spyOn(statement, 'all');
    const eventReads = () => all.mock.contexts.filter((s) => (s as { source: string }).source.includes('WHERE revision > ?')).length;
    // As an acquisition's transaction checks the graph since its decision's revision.
    const since = (revision: number) => store.readWrite(async (tx) => (await Promise.all([tx.graph.head({ lock: 'share' }), tx.graph.read(revision)]))[1]);
    try {
      expect(await since(0)).toEqual([]);
      const first = eventReads();
      for (let i = 0; i < 3; i++) {
        await store.readWrite((tx) => tx.singleUse.spend('assertion', `own-${i}`, FAR, now()));
        expect(await since(0)).toEqual([]);
      }
      expect(eventReads()).toBe(first);
      other.prepare('INSERT INTO graph_events (revision, at, actor, type, payload) VALUES (?, 0, ?, ?, ?)').run(1, 'x', 'principal.revoked', JSON.stringify(noop(1)[0]));
      expect((await since(0)).map((e) => e.revision)).toEqual([1]);
      expect(await store.read((tx) => tx.graph.read(0))).toHaveLength(1);
      await store.readWrite((tx) => tx.graph.append(noop(1), 'test', now()));
      expect((await since(1)).map((e) => e.revision)).toEqual([2]);
      expect((await store.read((tx) => tx.graph.read(1))).map((e) => e.revision)).toEqual([2]);
      expect(await since(2)).toEqual([]);
    } finally {
      all.mockRestore();
      other.close();
      await store.close();
    }
  });

  it('one commit between two WAL-index headers is told by the change counter, not by the rest of the header', () => {
    const header = (iChange: number, rest = 0) => {
      const b = Buffer.alloc(48, rest);
      b.writeUInt32LE(iChange, 8);
      return b.toString('latin1');
    };
    expect(WalSync.oneCommitBetween(header(7), header(8, 1))).toBe(true);
    expect(WalSync.oneCommitBetween(header(7), header(9))).toBe(false);
    expect(WalSync.oneCommitBetween(header(7), header(7, 1))).toBe(false);
    expect(WalSync.oneCommitBetween(header(0xffffffff), header(0))).toBe(true);
    expect(WalSync.oneCommitBetween(null, header(1))).toBe(false);
  });
});

describe('two stores on one file in one process', () => {
  /** The POSIX locks this process holds on a file, from /proc/locks (Linux): closing any descriptor of a file drops them all. */
  const locksOn = (path: string): number => {
    const st = statSync(path);
    const dev = `${(Math.floor(st.dev / 256) & 0xfff).toString(16).padStart(2, '0')}:${(st.dev & 0xff).toString(16).padStart(2, '0')}:${st.ino}`;
    return readFileSync('/proc/locks', 'utf8')
      .split('\n')
      .filter((line) => line.includes(' POSIX ') && line.includes(` ${process.pid} `) && line.includes(dev)).length;
  };

  it("closing one leaves the other's SQLite locks on -shm in place (the -shm descriptor is shared and closed with the last store)", async () => {
    const { store: first, file } = await open();
    await first.readWrite((tx) => tx.singleUse.spend('assertion', 'a', FAR, now()));
    const second = await openSqliteStore(file, { checkpointer: false });
    await second.read((tx) => tx.singleUse.isSpent('assertion', 'a', now()));
    const held = locksOn(`${file}-shm`);
    expect(held).toBeGreaterThan(0);
    await first.close();
    expect(locksOn(`${file}-shm`)).toBeGreaterThan(0);
    await second.readWrite((tx) => tx.singleUse.spend('assertion', 'b', FAR, now()));
    expect(await second.read((tx) => tx.singleUse.isSpent('assertion', 'b', now()))).toBe(true);
    await second.close();
  });
});
