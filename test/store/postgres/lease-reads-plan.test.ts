import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { PostgresLeaseRepository } from '../../../src/store/postgres/lease-repository.js';
import { openPostgresStore } from '../../../src/store/postgres/index.js';
import type { Sql } from '../../../src/store/postgres/session.js';
import { createTestDatabase, sql } from '../conformance/engines.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

interface PlanNode { 'Node Type': string; 'Index Name'?: string; 'Actual Rows': number; 'Actual Loops': number; 'Rows Removed by Filter'?: number; Plans?: PlanNode[] }

/** The rows each scan of lease_keys in `node` read: what it returned and what its filter threw away. */
function keyScans(node: PlanNode): { node: string; index?: string; read: number }[] {
  const own = /Scan/.test(node['Node Type']) && node['Node Type'] !== 'CTE Scan'
    ? [{ node: node['Node Type'], ...(node['Index Name'] ? { index: node['Index Name'] } : {}), read: (node['Actual Rows'] + (node['Rows Removed by Filter'] ?? 0)) * node['Actual Loops'] }]
    : [];
  return [...own, ...(node.Plans ?? []).flatMap(keyScans)];
}

/**
 * The lease repository's own statements, run under EXPLAIN ANALYZE on a database with 200 000 lease keys,
 * 50 000 of them leased and lapsed without a release (their holder still recorded), 3 held: how many rows
 * of lease_keys each read. Reads that must not grow with the keys ever leased read only what they return.
 */
describe('PostgreSQL lease reads with 200 000 keys, 50 000 lapsed without a release', () => {
  async function plans() {
    const db = await createTestDatabase('writ_lease_plan');
    cleanups.push(db.drop);
    const store = await openPostgresStore(db.url, { poolSize: 1 });
    await store.close();
    await sql(db.url, `INSERT INTO lease_keys (key, epoch, lease_id, holder, token_hash, expires_at)
      SELECT 'k:' || lpad(g::text, 6, '0'), g, CASE WHEN g % 4 = 0 THEN 'lease_' || g END, CASE WHEN g % 4 = 0 THEN 'agent-lapsed' END,
             CASE WHEN g % 4 = 0 THEN md5(g::text) END, CASE WHEN g % 4 = 0 THEN writ_now_ms() - 3600000 END
        FROM generate_series(1, 200000) g`);
    await sql(db.url, `UPDATE lease_keys SET holder = 'agent-a', lease_id = 'lease_held_' || key, token_hash = md5(key), expires_at = writ_now_ms() + 3600000
      WHERE key IN ('k:000007', 'k:100000', 'k:199999')`);
    await sql(db.url, 'VACUUM ANALYZE lease_keys');
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    cleanups.push(() => client.end());
    const explained: PlanNode[] = [];
    const explaining: Sql = {
      deferring: false,
      defer: () => { throw new Error('not in a read'); },
      async query<R>(text: string, values?: readonly unknown[]): Promise<R[]> {
        const { rows } = await client.query(`EXPLAIN (ANALYZE, FORMAT JSON) ${text}`, values as unknown[]);
        explained.push((rows[0]['QUERY PLAN'] as { Plan: PlanNode }[])[0]!.Plan);
        return (await client.query(text, values as unknown[])).rows as R[];
      },
    };
    return { repo: new PostgresLeaseRepository(explaining), explained };
  }

  it('the held read reads the 3 live leases through the index by expiry, not the lapsed ones', async () => {
    const { repo, explained } = await plans();
    const held = await repo.heldKeys(Date.now());
    expect(held.keys.map((k) => k.key)).toEqual(['k:000007', 'k:100000', 'k:199999']);
    expect(keyScans(explained[0]!)).toEqual([{ node: 'Index Scan', index: 'lease_keys_held_until', read: 3 }]);
  });

  it('a page of the list reads the page (and one key more), in key order, wherever it starts', async () => {
    const { repo, explained } = await plans();
    const page = await repo.listKeys({ after: 'k:150000', limit: 101 });
    expect(page.keys.map((k) => k.key)).toEqual(Array.from({ length: 101 }, (_, i) => `k:${String(150_001 + i)}`));
    expect(keyScans(explained[0]!)).toEqual([{ node: 'Index Scan', index: 'lease_keys_key_c', read: 101 }]);
  });
});
