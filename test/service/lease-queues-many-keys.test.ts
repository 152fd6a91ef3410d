import { afterEach, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/clock.js';
import { LeaseManager } from '../../src/lease/index.js';
import { openPostgresStore } from '../../src/store/postgres/index.js';
import { createTestDatabase, sql } from '../store/conformance/engines.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

const KEYS = 200_000;
/** The keys the waiters wait on (k:zzz was never leased: a multi-key waiter holds its place there too). */
const WAITED = ['k:000007', 'k:100000', 'k:199999', 'k:zzz'];

/** A PostgreSQL store with KEYS lease keys (inserted in one statement) and a few waiters, one of them past its deadline. */
async function storeWithManyKeys() {
  const db = await createTestDatabase('writ_queues');
  cleanups.push(db.drop);
  const store = await openPostgresStore(db.url, { poolSize: 2 });
  cleanups.push(() => store.close());
  await sql(db.url, `INSERT INTO lease_keys (key, epoch) SELECT 'k:' || lpad(g::text, 6, '0'), g FROM generate_series(1, ${KEYS}) g`);
  await sql(db.url, 'ANALYZE lease_keys');
  const now = Date.now();
  const enqueue = (holder: string, priority: number, keys: string[], waitMs = 60_000) =>
    store.readWrite((tx) => tx.leases.enqueue({ keys, holder, instance: null, priority, enqueuedAt: now, deadline: now + waitMs }));
  await enqueue('low', 1, ['k:100000']);
  await enqueue('high', 5, ['k:100000', 'k:zzz']);
  await enqueue('low-2', 1, ['k:199999', 'k:100000']);
  await enqueue('other', 0, ['k:000007']);
  await enqueue('gone', 9, ['k:000007'], 0);
  return { db, store, leases: new LeaseManager(store, systemClock) };
}

const EXPECTED = [
  ['k:000007', ['other']],
  ['k:100000', ['high', 'low', 'low-2']],
  ['k:199999', ['low-2']],
];

describe(`the lease wait queues of a database with ${KEYS} lease keys`, () => {
  it('lists the keys with live waiters, in key order, each in service order', async () => {
    const { leases } = await storeWithManyKeys();
    expect((await leases.queues()).map((q) => [q.key, q.waiters.map((w) => w.holder)])).toEqual(EXPECTED);
  });

  it('reads only the rows of the keys waited on (one query for the live waiters, not one per key ever leased)', async () => {
    const { db, leases } = await storeWithManyKeys();
    // The keys stay in the database, behind a view whose epoch fails to be read for any key but those
    // waited on: listing every key, or a query per key, fails; looking up the waited keys does not.
    await sql(db.url, 'ALTER TABLE lease_keys RENAME TO lease_key_rows');
    await sql(db.url, `CREATE FUNCTION test_key_row_read(k text) RETURNS bigint LANGUAGE plpgsql STABLE AS $$
      BEGIN RAISE EXCEPTION 'the row of key % was read', k; END $$`);
    const waited = WAITED.map((k) => `'${k}'`).join(', ');
    const columns = `key, CASE WHEN key IN (${waited}) THEN epoch ELSE test_key_row_read(key) END AS epoch, lease_id, holder, holder_instance, token_hash, priority, acquired_at, renewed_at, expires_at, duration_ms, transitions, last_holder, prev_lease_id, preempted_by`;
    await sql(db.url, `CREATE VIEW lease_keys AS SELECT ${columns} FROM lease_key_rows`);
    await expect(leases.list()).rejects.toThrow('was read');
    expect((await leases.queues()).map((q) => [q.key, q.waiters.map((w) => w.holder)])).toEqual(EXPECTED);
  });
});
