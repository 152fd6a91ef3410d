import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { GraphEvent } from '../../src/graph/model.js';
import { checkStoreMark, measureStore, readStoreMarks, writeStoreMark } from '../../src/service/index.js';
import { openPostgresStore } from '../../src/store/postgres/index.js';
import { createTestDatabase, sql } from '../store/conformance/engines.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

const KEYS = 200_000;
/** The highest epoch, given to a key in the middle of the key order (not the last row read). */
const HIGHEST = 2 ** 40 + 7;

/** A PostgreSQL store with a graph (so it has an identity), KEYS lease keys and KEYS receipt chains (heads at 1 to 5), each inserted in one statement. */
async function storeWithManyKeys() {
  const db = await createTestDatabase('writ_mark');
  cleanups.push(db.drop);
  const store = await openPostgresStore(db.url, { poolSize: 2 });
  cleanups.push(() => store.close());
  await store.readWrite((tx) => tx.graph.append([{ type: 'principal.upsert' } as unknown as GraphEvent], 'governance', Date.now()));
  await sql(db.url, `INSERT INTO lease_keys (key, epoch) SELECT 'k:' || lpad(g::text, 6, '0'), g FROM generate_series(1, ${KEYS}) g`);
  await sql(db.url, `UPDATE lease_keys SET epoch = ${HIGHEST} WHERE key = 'k:100000'`);
  await sql(db.url, `INSERT INTO receipt_chains (chain, pos, hash) SELECT 'k:' || lpad(g::text, 6, '0'), 1 + g % 5, md5(g::text) FROM generate_series(1, ${KEYS}) g`);
  const dir = mkdtempSync(join(tmpdir(), 'writ-mark-many-'));
  cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
  return { db, store, file: join(dir, 'store-mark.json') };
}

/** The sum of the receipt chains' heads: g % 5 over 1..KEYS sums to 2 for every 5 chains, plus 1 per chain. */
const RECEIPT_ENTRIES = KEYS + (KEYS / 5) * 10;

describe('the store mark of a database with many lease keys and receipt chains', () => {
  it(`keeps the highest epoch of ${KEYS} keys, and refuses the database once that key goes back`, async () => {
    const { db, store, file } = await storeWithManyKeys();
    const figures = await measureStore(store);
    expect(figures?.max_epoch).toBe(HIGHEST);
    expect(figures?.receipt_entries).toBe(RECEIPT_ENTRIES);
    expect(writeStoreMark(file, figures!, 'postgres://postgres@127.0.0.1/x', new Date())).toBe(true);
    expect(Object.values(readStoreMarks(file).stores).map((m) => m.max_epoch)).toEqual([HIGHEST]);
    // One key back (restored from a backup taken before its last lease): the highest epoch went back.
    await sql(db.url, `UPDATE lease_keys SET epoch = 100000 WHERE key = 'k:100000'`);
    const back = await measureStore(store);
    expect(back?.max_epoch).toBe(KEYS);
    expect(() => checkStoreMark(file, back!, 'postgres://postgres@127.0.0.1/x')).toThrow(`the highest fencing epoch from ${HIGHEST} to ${KEYS}`);
  });

  it('measures without reading any key or chain head (aggregates, not a list of every key and every head)', async () => {
    const { db, store } = await storeWithManyKeys();
    // The rows stay in the database, behind views whose token_hash (hash) fails to be read: any query
    // that reads a key's row or a chain's head (listing them reads them all) fails, an aggregate does not.
    await sql(db.url, `ALTER TABLE lease_keys RENAME TO lease_key_rows`);
    await sql(db.url, `CREATE FUNCTION test_key_row_read(k text) RETURNS text LANGUAGE plpgsql STABLE AS $$
      BEGIN RAISE EXCEPTION 'the row of key % was read', k; END $$`);
    const columns = 'key, epoch, lease_id, holder, holder_instance, test_key_row_read(key) AS token_hash, priority, acquired_at, renewed_at, expires_at, duration_ms, transitions, last_holder, prev_lease_id, preempted_by';
    await sql(db.url, `CREATE VIEW lease_keys AS SELECT ${columns} FROM lease_key_rows`);
    await sql(db.url, `ALTER TABLE receipt_chains RENAME TO receipt_chain_rows`);
    await sql(db.url, `CREATE VIEW receipt_chains AS SELECT chain, pos, test_key_row_read(chain) AS hash, prev_hash FROM receipt_chain_rows`);
    await expect(store.read((tx) => tx.leases.listKeys({}).then((p) => p.keys))).rejects.toThrow('was read');
    await expect(store.read((tx) => tx.receipts.heads())).rejects.toThrow('was read');
    expect(await measureStore(store)).toMatchObject({ max_epoch: HIGHEST, receipt_entries: RECEIPT_ENTRIES });
  });
});
