import { afterEach, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/clock.js';
import { LeaseManager } from '../../src/lease/index.js';
import { openPostgresStore } from '../../src/store/postgres/index.js';
import { createTestDatabase, sleep, sql } from '../store/conformance/engines.js';
import { take } from '../store/conformance/helpers.js';
import { decideOk, leaseOk } from '../support/agent.js';
import { startHarness } from '../support/harness.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

const KEYS = 200_000;
const HELD = ['k:000007', 'k:150000', 'k:never-before'];

/**
 * Keeps the keys in the database behind a security-barrier view whose own condition fails for a row
 * without a holder, and is checked before anything a query asks: listing every key, or scanning them
 * for the held ones, fails; the keys with a holder (held, or lapsed without a release) pass.
 */
async function failOnRowsWithoutHolder(url: string): Promise<void> {
  await sql(url, 'ALTER TABLE lease_keys RENAME TO lease_key_rows');
  await sql(url, `CREATE FUNCTION test_key_row_read(k text) RETURNS boolean LANGUAGE plpgsql STABLE AS $$
    BEGIN RAISE EXCEPTION 'the row of key % was read', k; END $$`);
  await sql(url, 'CREATE VIEW lease_keys WITH (security_barrier) AS SELECT * FROM lease_key_rows WHERE holder IS NOT NULL OR test_key_row_read(key)');
}

async function insertKeys(url: string): Promise<void> {
  await sql(url, `INSERT INTO lease_keys (key, epoch) SELECT 'k:' || lpad(g::text, 6, '0'), g FROM generate_series(1, ${KEYS}) g`);
  await sql(url, 'ANALYZE lease_keys');
}

/**
 * A PostgreSQL store with KEYS lease keys no one holds (inserted in one statement, as if leased and
 * released), three held now (one of them a key leased for the first time), one whose lease lapsed
 * without a release (its holder still recorded) and one released.
 */
async function storeWithManyKeys() {
  const db = await createTestDatabase('writ_held');
  cleanups.push(db.drop);
  const store = await openPostgresStore(db.url, { poolSize: 2 });
  cleanups.push(() => store.close());
  await insertKeys(db.url);
  await take(store, ['k:000007', 'k:150000'], 'agent-a', { ttlMs: 600_000 });
  await take(store, ['k:never-before'], 'agent-b', { ttlMs: 600_000 });
  await take(store, ['k:000100'], 'agent-c', { ttlMs: 1 });
  const released = await take(store, ['k:199999'], 'agent-d', { ttlMs: 600_000 });
  await store.readWrite((tx) => tx.leases.release({ leaseId: released.leaseId, tokenHash: released.tokenHash, now: Date.now() }));
  await sleep(20);
  return { db, store, leases: new LeaseManager(store, systemClock) };
}

describe(`the held leases of a database with ${KEYS} lease keys`, () => {
  it('lists the keys held now, in key order, as HELD records', async () => {
    const { leases } = await storeWithManyKeys();
    const held = await leases.held();
    expect(held.map((r) => [r.key, r.holderIdentity, r.state])).toEqual([
      ['k:000007', 'agent-a', 'HELD'],
      ['k:150000', 'agent-a', 'HELD'],
      ['k:never-before', 'agent-b', 'HELD'],
    ]);
    expect(held.map((r) => r.epoch)).toEqual([8, 150_001, 1]);
  });

  it('reads no row of a key without a holder (one read through the index of held keys, not every key ever leased)', async () => {
    const { db, leases } = await storeWithManyKeys();
    await failOnRowsWithoutHolder(db.url);
    await expect(leases.list()).rejects.toThrow('was read');
    expect((await leases.held()).map((r) => r.key)).toEqual(HELD);
  });

  it('an impact analysis finds the live leases it reports without reading a key no one holds', async () => {
    const h = await startHarness({ engine: 'postgres' });
    cleanups.push(() => h.close());
    const d = await decideOk(h, 'seo-agent-7', { resource: 'wp:post:7', fields: ['title'] });
    await leaseOk(h, 'seo-agent-7', [d.token], { ttl_ms: 60_000 });
    await insertKeys(h.config.databaseUrl!);
    await failOnRowsWithoutHolder(h.config.databaseUrl!);
    const r = await h.call('governance', { method: 'POST', url: '/v1/impact', payload: { revoke: { edge: 'd-orch-seo' } } });
    expect(r.status, r.raw).toBe(200);
    expect(r.body.leases_ending.map((l: { holder: string; keys: string[] }) => [l.holder, l.keys])).toEqual([['seo-agent-7', ['wp:post:7#title']]]);
  });
});
