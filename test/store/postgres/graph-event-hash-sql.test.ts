import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { graphEventHash } from '../../../src/audit/graph-chain.js';
import { GENESIS_HASH } from '../../../src/audit/hash-chain.js';
import { migratePostgres, POSTGRES_MIGRATIONS } from '../../../src/store/postgres/index.js';
import { createTestDatabase } from '../conformance/engines.js';

/**
 * PostgreSQL migration 13 hashes the graph events already in the log with `writ_graph_event_hash`, and
 * every later check recomputes those hashes with graph-chain.ts `graphEventHash`: if the two quoted an
 * actor or a type differently (`to_json(text)::text` against JSON.stringify), an upgraded log would be
 * reported BROKEN at its first such event, a false tamper alarm. Strings with every character JSON
 * escapes, and some it does not, give the same hash both ways.
 */
let db: { url: string; drop(): Promise<void> };
let client: pg.Client;
beforeAll(async () => {
  db = await createTestDatabase('writ_graph_hash_sql');
  client = new pg.Client(db.url);
  await client.connect();
  await migratePostgres(client, POSTGRES_MIGRATIONS.filter((m) => m.version <= 13));
});
afterAll(async () => {
  await client?.end();
  await db?.drop();
});

const controls = Array.from({ length: 0x1f }, (_, i) => String.fromCharCode(i + 1)).join('');
const strings = ['governance', 'edge.revoked', 'say "hi" \\ back/slash', controls, '\u007f\u0080\u00e9\u2028\u2029', 'agent-\u{1f916}', ''];

it('writ_graph_event_hash gives the bytes graphEventHash does, whatever the actor, type and payload hold', async () => {
  let prev = GENESIS_HASH;
  let revision = 0;
  for (const actor of strings) {
    for (const type of strings) {
      revision += 1;
      const e = { revision, at: 1_700_000_000_000 + revision, actor, type, payload: JSON.stringify({ actor, type, n: revision }) };
      const [row] = (await client.query<{ hash: string }>('SELECT writ_graph_event_hash($1, $2, $3, $4, $5, $6) AS hash', [prev, e.revision, e.at, e.actor, e.type, e.payload])).rows;
      const expected = graphEventHash(prev, e);
      expect(row!.hash, `actor ${JSON.stringify(actor)}, type ${JSON.stringify(type)}`).toBe(expected);
      prev = expected;
    }
  }
});
