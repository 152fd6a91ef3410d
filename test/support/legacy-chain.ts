import { entryHash, GENESIS_HASH, type EntryKind } from '../../src/audit/index.js';

/** Entries of the single global chain from before per-key chains (hash version 1), linked from genesis: seq = position. */
export function legacyChain<K extends EntryKind>(rows: readonly [receiptId: string, kind: K, body: string][]): { seq: number; receipt_id: string; kind: K; body: string; prev_hash: string; hash: string }[] {
  let prev = GENESIS_HASH;
  return rows.map(([receipt_id, kind, body], i) => {
    const seq = i + 1;
    const hash = entryHash(prev, body, seq, kind, receipt_id);
    const e = { seq, receipt_id, kind, body, prev_hash: prev, hash };
    prev = hash;
    return e;
  });
}
