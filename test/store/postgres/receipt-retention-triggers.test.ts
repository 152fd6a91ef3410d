import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { canonicalJson } from '../../../src/audit/canonical-json.js';
import { GENESIS_HASH } from '../../../src/audit/hash-chain.js';
import { openPostgresStore } from '../../../src/store/postgres/index.js';
import { createTestDatabase } from '../conformance/engines.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

describe('receipt entries on PostgreSQL (migration 3)', () => {
  it('may be deleted only at or below the latest checkpoint, never updated; checkpoints are append-only', async () => {
    const db = await createTestDatabase('writ_ret');
    cleanups.push(db.drop);
    const store = await openPostgresStore(db.url, { poolSize: 2 });
    cleanups.push(() => store.close());
    for (const id of ['r1', 'r2', 'r3']) {
      await store.readWrite((tx) =>
        tx.receipts.appendRejection({ receipt_id: id, kind: 'rejected', body: canonicalJson({ at: 1, id }) }, {
          receipt_id: id, principal: 'p', resource_key: 'wp:post:1', status: 'REJECTED', idempotency_key: null, request_hash: null, created_at: 1, completed_at: 1,
        }));
    }
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    cleanups.push(() => client.end());
    await expect(client.query('DELETE FROM receipt_entries WHERE seq = 1')).rejects.toThrow(/append-only/);
    await expect(client.query("UPDATE receipt_entries SET body = '{}' WHERE seq = 1")).rejects.toThrow(/append-only/);
    await client.query('INSERT INTO receipt_checkpoints (seq, archived_through, hash, prev_hash, count, at, jws) VALUES (1, 2, $1, $1, 2, 1, $2)', [GENESIS_HASH, 'x']);
    await expect(client.query('DELETE FROM receipt_entries WHERE seq = 3')).rejects.toThrow(/append-only/);
    expect((await client.query('DELETE FROM receipt_entries WHERE seq <= 2')).rowCount).toBe(2);
    await expect(client.query('UPDATE receipt_checkpoints SET count = 3')).rejects.toThrow(/append-only/);
    await expect(client.query('DELETE FROM receipt_checkpoints')).rejects.toThrow(/append-only/);
  });
});
