/**
 * Fills a SQLite store's receipt log directly (no gateway), as the gateway writes it: N entries, each
 * receipt an intent and its completion with gateway-shaped bodies, on `keys` resource keys (so `keys`
 * chains), hashed and linked as the store links them. bench/verify.ts and bench/store-copy.ts build
 * their long logs with it.
 */
import { canonicalJson, chainEntryHash, entryHash, GENESIS_HASH } from '../src/audit/index.js';
import type { SqliteDatabase } from '../src/store/sqlite/database.js';

export function fillReceipts(db: SqliteDatabase, options: { entries: number; keys: number; at: (seq: number) => number }): void {
  const N = options.entries;
  const insertEntry = db.prepare('INSERT INTO receipt_entries (seq, chain, pos, receipt_id, kind, body, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?)');
  const insertRow = db.prepare(`INSERT INTO receipts (receipt_id, principal, resource_key, status, idempotency_key, request_hash, created_at, completed_at, first_seq, last_seq)
    VALUES (?, ?, ?, 'COMPLETED', ?, ?, ?, ?, ?, ?)`);
  const heads = new Map<string, { pos: number; hash: string }>();
  const fill = db.transaction((from: number, to: number) => {
    for (let seq = from; seq < to; seq += 2) {
      const id = `rcpt_${seq}`;
      const at = options.at(seq);
      const principal = `agent-${seq % 97}`;
      const resource = `wp:post:${((seq - 1) / 2) % options.keys}`;
      const reqHash = entryHash(GENESIS_HASH, id, seq, 'intent', 'r');
      const intent = canonicalJson({
        at, principal, action: 'update_post', resource_key: resource, fields: ['title'], owners: ['content-team'], authority_epoch: 12, ownership_epoch: 3,
        decision_id: `dec_${seq}`, policy_revision: 'sha256:4f0c3a9d', graph_revision: 1200, chain: ['g-orchestrator', 'd-orch-seo'], lease_id: `lease_${seq}`, lease_epoch: seq,
        expected_version: 31, idempotency_key: `k-${seq}`, request_hash: reqHash,
      });
      const head = heads.get(resource) ?? { pos: 0, hash: GENESIS_HASH };
      const h1 = chainEntryHash(head.hash, intent, resource, head.pos + 1, seq, 'intent', id);
      insertEntry.run(seq, resource, head.pos + 1, id, 'intent', intent, head.hash, h1);
      const done = canonicalJson({ at: at + 20, status: 'COMPLETED', final_version: 32, upstream_status: 200, error: null, conflicts: [] });
      const h2 = chainEntryHash(h1, done, resource, head.pos + 2, seq + 1, 'completed', id);
      insertEntry.run(seq + 1, resource, head.pos + 2, id, 'completed', done, h1, h2);
      insertRow.run(id, principal, resource, `k-${seq}`, reqHash, at, at + 20, seq, seq + 1);
      heads.set(resource, { pos: head.pos + 2, hash: h2 });
    }
  });
  for (let seq = 1; seq <= N; seq += 100_000) fill(seq, Math.min(N + 1, seq + 100_000));
}
