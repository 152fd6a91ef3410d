import pg from 'pg';
import { WritError } from '../../../src/errors.js';
import { afterEach, describe, expect, it } from 'vitest';
import { openPostgresStore, POSTGRES_MIGRATIONS, type PostgresStore } from '../../../src/store/postgres/index.js';
import { inlineValues } from '../../../src/store/postgres/session.js';
import type { StoreTx } from '../../../src/store/contract.js';
import { hashOf } from '../../../src/audit/hash-chain.js';
import { createTestDatabase, sleep, sql } from '../conformance/engines.js';
import { acquireCommand, release, renew, take } from '../conformance/helpers.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

async function database() {
  const db = await createTestDatabase('writ_pg');
  cleanups.push(db.drop);
  return db;
}

async function open(url: string, options: Parameters<typeof openPostgresStore>[1] = {}): Promise<PostgresStore> {
  const s = await openPostgresStore(url, { poolSize: 4, ...options });
  cleanups.push(() => s.close());
  return s;
}

/** What the driver throws for a SQLSTATE (the engine decides on `code`). */
function dbError(code: string): pg.DatabaseError {
  const e = new pg.DatabaseError(`simulated ${code}`, 0, 'error');
  e.code = code;
  return e;
}

describe('PostgreSQL migrations', () => {
  it('records each numbered migration in schema_migrations; replicas starting at once migrate once', async () => {
    const db = await database();
    await Promise.all([open(db.url), open(db.url), open(db.url), open(db.url)]);
    const rows = await sql<{ version: number; name: string }>(db.url, 'SELECT version, name FROM schema_migrations ORDER BY version');
    expect(rows.map((r) => r.version)).toEqual(POSTGRES_MIGRATIONS.map((m) => m.version));
  });

  it('a replica that starts while another holds the migration lock waits for it, past its own lock timeout', async () => {
    const db = await database();
    const holder = new pg.Client(db.url);
    await holder.connect();
    cleanups.push(() => holder.end());
    await holder.query('SELECT pg_advisory_lock($1)', [0x77726974]);
    const opening = open(db.url, { lockTimeoutMs: 100 });
    await sleep(400);
    await holder.query('SELECT pg_advisory_unlock($1)', [0x77726974]);
    const store = await opening;
    expect(await store.read((tx) => tx.graph.head())).toBe(0);
  });

  it('refuses to open a schema newer than the code knows, and one older when told not to migrate', async () => {
    const db = await database();
    await (await open(db.url)).close();
    await sql(db.url, "INSERT INTO schema_migrations (version, name) VALUES (999, 'from the future')");
    await expect(openPostgresStore(db.url)).rejects.toMatchObject({ code: 'SCHEMA_TOO_NEW', message: expect.stringMatching(/schema is at version 999, newer than this Writ knows/) });
    await expect(openPostgresStore(db.url, { migrate: false })).rejects.toMatchObject({ code: 'SCHEMA_TOO_NEW', message: expect.stringMatching(/newer/) });
    const empty = await database();
    await expect(openPostgresStore(empty.url, { migrate: false })).rejects.toMatchObject({ message: expect.stringMatching(/run `writ migrate`/) });
  });
});

describe('PostgreSQL engine errors', () => {
  it('an unreachable database is OVERLOADED with retry_after_ms, not a driver error', async () => {
    await expect(openPostgresStore('postgres://postgres@127.0.0.1:1/postgres', { connectTimeoutMs: 1_000 })).rejects.toMatchObject({
      name: 'WritError',
      code: 'OVERLOADED',
      details: { retry_after_ms: 1_000 },
    });
  });

  it('retries a callback that lost a serialization race or a deadlock, then gives up with OVERLOADED', async () => {
    const db = await database();
    const store = await open(db.url, { maxAttempts: 3, retryAfterMs: 250 });
    let runs = 0;
    const value = await store.readWrite(async (tx) => {
      runs += 1;
      await tx.graph.head();
      if (runs === 1) throw dbError('40001');
      if (runs === 2) throw dbError('40P01');
      return 'done';
    });
    expect([value, runs, store.stats().retries]).toEqual(['done', 3, 2]);
    runs = 0;
    await expect(
      store.readWrite(async () => {
        runs += 1;
        throw dbError('40001');
      }),
    ).rejects.toMatchObject({ code: 'OVERLOADED', details: { retry_after_ms: 250 } });
    expect(runs).toBe(3);
  });

  it('a real deadlock between two replicas is retried inside the adapter: both calls return', async () => {
    const db = await database();
    const [s1, s2] = [await open(db.url), await open(db.url)];
    let arrived = 0;
    let go!: () => void;
    const bothHoldOne = new Promise<void>((r) => (go = r));
    const meet = async () => {
      if (++arrived === 2) go();
      await bothHoldOne;
    };
    let runs1 = 0;
    let runs2 = 0;
    const [o1, o2] = await Promise.all([
      s1.readWrite(async (tx) => {
        runs1 += 1;
        await tx.leases.acquire(acquireCommand(['k:a'], 'one'));
        if (runs1 === 1) await meet();
        return tx.leases.acquire(acquireCommand(['k:b'], 'one'));
      }),
      s2.readWrite(async (tx) => {
        runs2 += 1;
        await tx.leases.acquire(acquireCommand(['k:b'], 'two'));
        if (runs2 === 1) await meet();
        return tx.leases.acquire(acquireCommand(['k:a'], 'two'));
      }),
    ]);
    // One deadlock at least (PostgreSQL aborts one side); a loaded machine has shown up to three in a row.
    expect(s1.stats().retries + s2.stats().retries).toBeGreaterThanOrEqual(1);
    expect([o1.granted, o2.granted].filter(Boolean)).toHaveLength(1);
  }, 20_000);

  it('a connection killed mid-transaction: OVERLOADED, nothing committed, and the next transaction works', async () => {
    const db = await database();
    const store = await open(db.url, { poolSize: 1 });
    const err = await store
      .readWrite(async (tx) => {
        await tx.leases.acquire(acquireCommand(['k:1'], 'agent'));
        await sql(db.url, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()");
        return tx.leases.acquire(acquireCommand(['k:2'], 'agent'));
      })
      .catch((e) => e);
    expect(err).toMatchObject({ name: 'WritError', code: 'OVERLOADED' });
    expect(await store.read((tx) => tx.leases.listKeys({}).then((p) => p.keys))).toEqual([]);
  });

  it('a lock held too long by someone else: OVERLOADED after lockTimeoutMs, not a hang', async () => {
    const db = await database();
    const store = await open(db.url, { lockTimeoutMs: 300 });
    const other = new pg.Client(db.url);
    await other.connect();
    cleanups.push(() => other.end());
    // The head row of chain 'k' (what an append to that key locks), held by another session.
    await other.query("INSERT INTO receipt_chains (chain, pos, hash) VALUES ('k', 0, repeat('0', 64))");
    await other.query('BEGIN');
    await other.query("SELECT * FROM receipt_chains WHERE chain = 'k' FOR UPDATE");
    const started = Date.now();
    const err = await store
      .readWrite((tx) => tx.receipts.appendRejection({ chain: 'k', receipt_id: 'r', kind: 'rejected', body: '{}' }, { receipt_id: 'r', principal: 'p', resource_key: 'k', status: 'REJECTED', idempotency_key: null, request_hash: null, created_at: 1, completed_at: 1 }))
      .catch((e) => e);
    expect(err).toMatchObject({ name: 'WritError', code: 'OVERLOADED', details: { retry_after_ms: expect.any(Number) } });
    expect(Date.now() - started).toBeLessThan(5_000);
    await other.query('ROLLBACK');
    expect((await store.readWrite((tx) => tx.receipts.appendRejection({ chain: 'k', receipt_id: 'r', kind: 'rejected', body: '{}' }, { receipt_id: 'r', principal: 'p', resource_key: 'k', status: 'REJECTED', idempotency_key: null, request_hash: null, created_at: 1, completed_at: 1 }))).pos).toBe(1);
  });

  it("a callback's own errors come out as they are, whatever their message says", async () => {
    const db = await database();
    const store = await open(db.url);
    const own = new WritError('UPSTREAM_FAILED', 'the upstream had a connection error');
    await expect(store.readWrite(async () => Promise.reject(own))).rejects.toBe(own);
    // Not even one that looks like a driver error, when none of the callback's statements failed.
    const plain = Object.assign(new Error('Connection terminated by the upstream'), { code: 'ECONNRESET' });
    await expect(
      store.readWrite(async (tx) => {
        await tx.graph.head();
        throw plain;
      }),
    ).rejects.toBe(plain);
  });

  it('a callback that swallows an engine error is not reported as committed', async () => {
    const db = await database();
    const store = await open(db.url);
    await store.readWrite((tx) => tx.leaseAuthority.record('lease_1', 'a', [], 1));
    const err = await store
      .readWrite(async (tx) => {
        await tx.incidents.declare({ id: 'i', declared_by: 'x', reason: 'r', decision_id: 'd', environment: 'production', declared_at: 1, ends_at: 2 });
        await tx.leaseAuthority.record('lease_1', 'a', [], 1).catch(() => undefined); // duplicate key: the transaction is aborted
        return 'looks fine';
      })
      .catch((e) => e);
    expect(err).toMatchObject({ name: 'WritError', code: 'INTERNAL', details: { sqlstate: '23505' } });
    expect(await store.read((tx) => tx.incidents.get('i'))).toBeUndefined();
  });
});

describe('PostgreSQL transaction handles', () => {
  // The contract asks callbacks not to keep `tx`; this engine also refuses a handle used too late.
  it('refuses use of a transaction handle after its callback returned', async () => {
    const db = await database();
    const store = await open(db.url);
    const kept = await store.readWrite(async (tx) => tx);
    await expect(Promise.resolve().then(() => kept.graph.head())).rejects.toThrow(/after its callback returned/);
    expect(await store.read((tx) => tx.graph.head())).toBe(0);
  });
});

describe('PostgreSQL lease time is the database clock', () => {
  it('ignores the `now` a replica passes: a clock 30 s ahead neither sees a live lease as expired nor makes its own lease longer', async () => {
    const db = await database();
    const store = await open(db.url);
    const skew = 30_000;
    const a = await take(store, ['k:1'], 'honest', { ttlMs: 5_000 });
    const ahead = await take(store, ['k:1'], 'ahead', { now: Date.now() + skew });
    expect(ahead.outcome).toMatchObject({ granted: false, holder: 'honest' });
    expect(await renew(store, { ...a, tokenHash: a.tokenHash })).toMatchObject({ ok: true });
    await release(store, a);
    const mine = await take(store, ['k:1'], 'ahead', { now: Date.now() + skew, ttlMs: 1_000 });
    if (!mine.outcome.granted) throw new Error('expected a grant');
    expect(Math.abs(mine.outcome.expiresAt - (Date.now() + 1_000))).toBeLessThan(2_000);
    const fence = await store.read((tx) => tx.leases.fenceState('k:1', mine.tokenHash, mine.leaseId));
    expect(Math.abs(fence.now! - Date.now())).toBeLessThan(2_000);
    // A replica 30 s behind cannot keep a lease alive past its expiry either.
    await sleep(1_100);
    expect(await store.readWrite((tx) => tx.leases.renew({ leaseId: mine.leaseId, tokenHash: mine.tokenHash, ttlMs: null, now: Date.now() - skew }))).toEqual({
      ok: false,
      reason: 'EXPIRED',
    });
  });
});

describe('PostgreSQL single-use ids', () => {
  const refused = () => new WritError('UNAUTHENTICATED', 'replayed');
  const ids = async (url: string) => (await sql<{ id: string }>(url, 'SELECT id FROM single_use_ids ORDER BY id')).map((r) => r.id);
  /** Rows whose expiry is `offsetMs` from the database's clock (negative: expired that long ago). */
  const seed = (url: string, prefix: string, count: number, offsetMs: number) =>
    sql(url, `INSERT INTO single_use_ids (namespace, id, expires_at) SELECT 'assertion', $1 || g, writ_now_ms() + $2 - g FROM generate_series(1, $3) g`, [prefix, offsetMs, count]);

  it('deletes expired ids in the background, outside the spend\'s transaction, in bites of 1,000 while they come back full, 10 s after they expired, at most once a second', async () => {
    const db = await database();
    const store = await open(db.url);
    await seed(db.url, 'old-', 2_500, -60_000);
    await seed(db.url, 'recent-', 3, -2_000); // expired, but within the grace
    await seed(db.url, 'live-', 3, 600_000);
    const now = Date.now();
    const before = store.stats().roundTrips;
    // The spend that starts the purge costs its own transaction nothing: one message, as without a purge.
    await store.readWrite((tx) => tx.singleUse.spendOrRefuse('assertion', 'jti-1', now + 60_000, now, refused));
    expect(store.stats().roundTrips - before).toBe(1);
    await store.purgeSettled();
    expect(store.stats()).toMatchObject({ purgeBites: 3, purgedIds: 2_500, purgeFailures: 0 });
    expect(await ids(db.url)).toEqual(['jti-1', 'live-1', 'live-2', 'live-3', 'recent-1', 'recent-2', 'recent-3']);
    // Within the second: no purge. A second on (by the spends' clock): one bite, nothing left to delete.
    expect(await store.readWrite((tx) => tx.singleUse.spend('assertion', 'jti-2', now + 60_000, now + 500))).toBe(true);
    await store.purgeSettled();
    expect(store.stats().purgeBites).toBe(3);
    expect(await store.readWrite((tx) => tx.singleUse.spend('assertion', 'jti-3', now + 60_000, now + 1_000))).toBe(true);
    await store.purgeSettled();
    expect(store.stats()).toMatchObject({ purgeBites: 4, purgedIds: 2_500 });
    // A purged id stays spent: past the database's clock, it can never be spent again.
    expect(await store.readWrite((tx) => tx.singleUse.spend('assertion', 'old-1', Date.now() + 60_000, Date.now() - 120_000))).toBe(true); // a new expiry: a new id
    await expect(store.readWrite((tx) => tx.singleUse.spendOrRefuse('assertion', 'old-2', Date.now() - 50_000, Date.now() - 120_000, refused))).rejects.toThrow('replayed');
  });

  it('a purge skips rows another transaction holds, so replicas purging at once never wait on each other; what it skipped goes with a later purge', async () => {
    const db = await database();
    const [a, b] = [await open(db.url), await open(db.url)];
    await seed(db.url, 'old-', 1_500, -60_000);
    // Another replica's purge (or a spend replacing an expired id) holds 100 of them.
    const holder = new pg.Client(db.url);
    await holder.connect();
    cleanups.push(() => holder.end());
    await holder.query('BEGIN');
    await holder.query(`SELECT 1 FROM single_use_ids WHERE id LIKE 'old-%' ORDER BY expires_at LIMIT 100 FOR UPDATE`);
    const now = Date.now();
    await a.readWrite((tx) => tx.singleUse.spend('assertion', 'a-1', now + 60_000, now));
    await b.readWrite((tx) => tx.singleUse.spend('assertion', 'b-1', now + 60_000, now));
    // Both end while the rows are held (a wait would run into the test's timeout).
    await Promise.all([a.purgeSettled(), b.purgeSettled()]);
    expect(a.stats().purgedIds + b.stats().purgedIds).toBe(1_400);
    expect(a.stats().purgeFailures + b.stats().purgeFailures).toBe(0);
    expect((await ids(db.url)).filter((id) => id.startsWith('old-'))).toHaveLength(100);
    await holder.query('COMMIT');
    await a.readWrite((tx) => tx.singleUse.spend('assertion', 'a-2', now + 60_000, now + 1_000));
    await a.purgeSettled();
    expect(await ids(db.url)).toEqual(['a-1', 'a-2', 'b-1']);
  });

  it('close() waits for the purge running, and then ends the pool', async () => {
    const db = await database();
    const store = await openPostgresStore(db.url, { poolSize: 2 });
    await seed(db.url, 'old-', 2_500, -60_000);
    const now = Date.now();
    await store.readWrite((tx) => tx.singleUse.spend('assertion', 'a-1', now + 60_000, now));
    await store.close(); // waits for the bite in flight, and ends the run after it
    // Without the wait, the next bite would meet an ended pool (a failure).
    expect(store.stats().purgeFailures).toBe(0);
    expect(store.stats().purgedIds).toBeGreaterThan(0);
    expect(store.stats().purgedIds).toBeLessThan(2_500);
  });
});

describe('PostgreSQL round trips', () => {
  const refused = () => new WritError('UNAUTHENTICATED', 'replayed');
  const counter = (store: PostgresStore) => async (fn: () => Promise<unknown>) => {
    const before = store.stats().roundTrips;
    await fn();
    return store.stats().roundTrips - before;
  };

  it('leases: acquire, renew and release two each; the service\'s acquisition with its authority and the spent assertion two; a spend alone one', async () => {
    const db = await database();
    const store = await open(db.url);
    const count = counter(store);
    let t!: Awaited<ReturnType<typeof take>>;
    expect(await count(async () => (t = await take(store, ['k:1', 'k:2', 'k:3'], 'a')))).toBe(2);
    expect(await count(() => take(store, ['k:2'], 'b'))).toBe(2); // a refusal too
    expect(await count(() => renew(store, t))).toBe(2);
    expect(await count(() => release(store, t))).toBe(2);
    expect(await count(() => store.read((tx) => tx.leases.fenceState('k:1', t.tokenHash, t.leaseId)))).toBe(1); // a read: its COMMIT is not waited for
    // The first spend of a process also starts a purge of expired ids: on a connection of its own, not this transaction's round trips.
    expect(await count(() => store.readWrite((tx) => tx.singleUse.spendOrRefuse('assertion', 'jti-0', Date.now() + 60_000, Date.now(), refused)))).toBe(1);
    // A decision's spend of the caller's assertion: BEGIN, the spend and COMMIT in one message.
    expect(await count(() => store.readWrite((tx) => tx.singleUse.spendOrRefuse('assertion', 'jti-d', Date.now() + 60_000, Date.now(), refused)))).toBe(1);
    // The service's acquisition: lease + its authority + the caller's assertion spent, in one transaction.
    let lease!: ReturnType<typeof acquireCommand>;
    expect(
      await count(() =>
        store.readWrite(async (tx) => {
          lease = acquireCommand(['k:9'], 'c');
          await tx.leases.acquire(lease);
          await tx.leaseAuthority.record(lease.leaseId, 'c', [], Date.now());
          await tx.singleUse.spendOrRefuse('assertion', 'jti-1', Date.now() + 60_000, Date.now(), refused);
        }),
      ),
    ).toBe(2);
    // A renewal (or release) with the caller's assertion spent.
    expect(
      await count(() =>
        store.readWrite(async (tx) => {
          await tx.leases.renew({ leaseId: lease.leaseId, tokenHash: lease.tokenHash, ttlMs: null, now: Date.now() });
          await tx.singleUse.spendOrRefuse('assertion', 'jti-2', Date.now() + 60_000, Date.now(), refused);
        }),
      ),
    ).toBe(2);
    expect(await count(() => store.readWrite(async () => 'nothing'))).toBe(0);
    expect(store.stats().eagerRuns).toBe(0);
  });

  it("receipts: an append is one statement (lock, advance and hash the key's chain head, write): two round trips in a transaction, one alone (oneStatement); the gateway's intent transaction two", async () => {
    const db = await database();
    const store = await open(db.url);
    const count = counter(store);
    const index = (id: string) => ({ receipt_id: id, principal: 'p', resource_key: 'k', status: 'PENDING' as const, idempotency_key: null, request_hash: 'h', created_at: 1, completed_at: null });
    expect(await count(() => store.readWrite((tx) => tx.receipts.appendIntent({ chain: 'k', receipt_id: 'r1', kind: 'intent', body: '{"resource_key":"k"}' }, index('r1'))))).toBe(2);
    expect(await count(() => store.readWrite((tx) => tx.receipts.appendSettlement({ receipt_id: 'r1', kind: 'completed', body: '{}' }, 'COMPLETED', 2)))).toBe(2);
    // As service/actions.ts records an intent: spend the caller's assertion, append and re-read the
    // graph since the decision (one message), spend the decision with the COMMIT.
    const intent = () =>
      store.readWrite(async (tx) => {
        await tx.singleUse.spendOrRefuse('assertion', 'jti-2', Date.now() + 60_000, Date.now(), refused);
        const [appended] = await Promise.all([tx.receipts.appendIntent({ chain: 'k', receipt_id: 'r2', kind: 'intent', body: '{"resource_key":"k"}' }, index('r2')), tx.graph.read(0)]);
        await tx.singleUse.spendOrRefuse('decision', 'dec-2', Date.now() + 60_000, Date.now(), refused);
        return appended;
      });
    expect(await count(intent)).toBe(2);
    // The gateway's settlement: the append is the whole transaction, so it is one implicit transaction.
    const settled = await store.readWrite((tx) => tx.receipts.appendSettlement({ receipt_id: 'r2', kind: 'completed', body: '{}' }, 'COMPLETED', 2), { oneStatement: true });
    expect(settled).toMatchObject({ appended: true, first: { receipt_id: 'r2', kind: 'intent', chain: 'k', pos: 3 }, entry: { receipt_id: 'r2', kind: 'completed', chain: 'k', pos: 4 } });
    expect(await count(() => store.readWrite((tx) => tx.receipts.appendSettlement({ receipt_id: 'r2', kind: 'completed', body: '{}' }, 'COMPLETED', 3), { oneStatement: true }))).toBe(1);
    expect(await store.read((tx) => tx.receipts.entriesOf('r2'))).toEqual([settled.appended && settled.first, settled.appended && settled.entry]);
    // The database hashed them as hash-chain.ts does, each linked to the one before.
    const entries = await store.read((tx) => tx.receipts.entriesFrom(null, 10));
    expect(entries.map((e) => [e.pos, e.hash === hashOf(e)])).toEqual([[1, true], [2, true], [3, true], [4, true]]);
    expect(entries.slice(1).every((e, i) => e.prev_hash === entries[i]!.hash)).toBe(true);
  });

  it('hashes in the database byte for byte as hash-chain.ts does, for keys with quotes, backslashes, newlines, control characters and non-ASCII', async () => {
    const db = await database();
    const store = await open(db.url);
    const keys = ['wp:post:"quoted"', 'back\\slash', 'new\nline\ttab\r', 'ctl\u0001\u001f\u007f', 'é中文😀', 'sep\u2028\u2029', ' '];
    for (const [i, key] of keys.entries()) {
      const index = { receipt_id: `r${i}`, principal: 'p', resource_key: key, status: 'PENDING' as const, idempotency_key: null, request_hash: 'h', created_at: 1, completed_at: null };
      await store.readWrite((tx) => tx.receipts.appendIntent({ chain: key, receipt_id: `r${i}`, kind: 'intent', body: JSON.stringify({ resource_key: key, note: 'ü\n"' }) }, index));
      await store.readWrite((tx) => tx.receipts.appendSettlement({ receipt_id: `r${i}`, kind: 'completed', body: '{"status":"COMPLETED"}' }, 'COMPLETED', 2), { oneStatement: true });
    }
    const entries = await store.read((tx) => tx.receipts.entriesFrom(null, 100));
    expect(entries).toHaveLength(keys.length * 2);
    expect(entries.filter((e) => e.hash !== hashOf(e)).map((e) => e.chain)).toEqual([]);
  });

  it('a one-statement transaction: deferred statements ride its message (one implicit transaction, nothing lands when it fails); a second answered statement is refused', async () => {
    const db = await database();
    const store = await open(db.url);
    const count = counter(store);
    const index = (id: string) => ({ receipt_id: id, principal: 'p', resource_key: 'k', status: 'REJECTED' as const, idempotency_key: null, request_hash: 'h', created_at: 1, completed_at: 1 });
    const reject = (id: string, jti: string) => async (tx: StoreTx) => {
      await tx.singleUse.spendOrRefuse('assertion', jti, Date.now() + 60_000, Date.now(), refused);
      return tx.receipts.appendRejection({ chain: 'k', receipt_id: id, kind: 'rejected', body: '{}' }, index(id));
    };
    expect(await count(() => store.readWrite(reject('r1', 'jti-1'), { oneStatement: true }))).toBe(1);
    // The assertion replayed: the message fails as a whole (no rejection written), the transaction runs
    // again as an ordinary one, and refuses with the domain's error.
    const err = await store.readWrite(reject('r2', 'jti-1'), { oneStatement: true }).catch((e) => e);
    expect(err).toMatchObject({ code: 'UNAUTHENTICATED', message: 'replayed' });
    expect(await store.read((tx) => tx.receipts.entriesOf('r2'))).toEqual([]);
    const twice = await store
      .readWrite(async (tx) => {
        await tx.receipts.appendRejection({ chain: 'k', receipt_id: 'r3', kind: 'rejected', body: '{}' }, index('r3'));
        return tx.receipts.entriesOf('r3');
      }, { oneStatement: true })
      .catch((e) => e);
    expect(String(twice)).toMatch(/one-statement transaction/);
    // Also when the second is asked while the first is still in flight, and a deferral after it:
    // refused when asked, so nothing goes out as a transaction of its own.
    const inFlight = await store
      .readWrite(async (tx) => {
        const first = tx.receipts.appendRejection({ chain: 'k', receipt_id: 'r4', kind: 'rejected', body: '{}' }, index('r4'));
        await Promise.resolve();
        const second = tx.receipts.appendRejection({ chain: 'k', receipt_id: 'r5', kind: 'rejected', body: '{}' }, index('r5'));
        return Promise.all([first, second]);
      }, { oneStatement: true })
      .catch((e) => e);
    expect(String(inFlight)).toMatch(/one-statement transaction/);
    expect(await store.read((tx) => tx.receipts.entriesOf('r5'))).toEqual([]);
    const deferredAfter = await store
      .readWrite(async (tx) => {
        await tx.receipts.appendRejection({ chain: 'k', receipt_id: 'r6', kind: 'rejected', body: '{}' }, index('r6'));
        await tx.singleUse.spendOrRefuse('assertion', 'jti-6', Date.now() + 60_000, Date.now(), refused);
      }, { oneStatement: true })
      .catch((e) => e);
    expect(String(deferredAfter)).toMatch(/one-statement transaction/);
  });

  it('a replayed id in a deferred batch: the transaction runs once more without deferring, refuses with the domain\'s error, and nothing lands', async () => {
    const db = await database();
    const store = await open(db.url);
    const now = Date.now();
    await store.readWrite((tx) => tx.singleUse.spendOrRefuse('decision', 'dec-used', now + 60_000, now, refused));
    const index = { receipt_id: 'r-replay', principal: 'p', resource_key: 'k', status: 'PENDING' as const, idempotency_key: null, request_hash: 'h', created_at: 1, completed_at: null };
    let runs = 0;
    const err = await store
      .readWrite(async (tx) => {
        runs += 1;
        await tx.singleUse.spendOrRefuse('assertion', 'jti-fresh', now + 60_000, now, refused);
        await tx.receipts.appendIntent({ chain: 'k', receipt_id: 'r-replay', kind: 'intent', body: '{}' }, index);
        await tx.singleUse.spendOrRefuse('decision', 'dec-used', now + 60_000, now, () => new WritError('DECISION_REPLAYED', 'used'));
      })
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ name: 'WritError', code: 'DECISION_REPLAYED' });
    expect([runs, store.stats().eagerRuns, store.stats().retries]).toEqual([2, 1, 0]);
    expect(await store.read((tx) => tx.receipts.entriesOf('r-replay'))).toEqual([]);
    expect(await store.read((tx) => tx.receipts.heads())).toEqual([]);
    expect(await store.read((tx) => tx.singleUse.isSpent('assertion', 'jti-fresh', Date.now()))).toBe(false);
    // The next transaction defers again.
    const before = store.stats().roundTrips;
    await store.readWrite((tx) => tx.singleUse.spendOrRefuse('assertion', 'jti-fresh', now + 60_000, now, refused));
    expect([store.stats().roundTrips - before, store.stats().eagerRuns]).toEqual([1, 1]);
  });

  it('an id already past by the database\'s clock is refused, though the replica\'s clock says it is live', async () => {
    const db = await database();
    const store = await open(db.url);
    const slow = Date.now() - 60_000; // a replica a minute behind
    await expect(store.readWrite((tx) => tx.singleUse.spendOrRefuse('assertion', 'jti-late', slow + 30_000, slow, refused))).rejects.toMatchObject({ code: 'UNAUTHENTICATED' });
    expect(await sql(db.url, "SELECT 1 FROM single_use_ids WHERE id = 'jti-late'")).toEqual([]);
  });

  it('inlines values as literals that PostgreSQL reads back exactly', async () => {
    const db = await database();
    const tricky = ["it's", 'back\\slash', 'dollar $1 and $$', 'ünïcødé', ''];
    const [row] = await sql<{ a: string[]; n: string; b: boolean; z: null }>(db.url, inlineValues('SELECT $1 AS a, $2::bigint AS n, $3 AS b, $4 AS z', [tricky, -1_700_000_000_000, true, null]));
    expect(row).toEqual({ a: tricky, n: '-1700000000000', b: true, z: null });
  });
});
