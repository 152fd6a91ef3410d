import { createHash } from 'node:crypto';
import { canonicalJson } from './canonical-json.js';
import type { EntryKind, StoredEntry } from './receipt.js';

/** prev_hash of the first entry. */
export const GENESIS_HASH = '0'.repeat(64);

/**
 * hash = sha256_hex(prev_hash "\n" body "\n" seq "\n" kind "\n" receipt_id), where body is the
 * entry's canonical JSON exactly as stored. Canonical JSON never contains a raw newline, so the
 * separator makes the concatenation unambiguous.
 */
export function entryHash(prevHash: string, body: string, seq: number, kind: EntryKind, receiptId: string): string {
  return createHash('sha256').update(`${prevHash}\n${body}\n${seq}\n${kind}\n${receiptId}`).digest('hex');
}

/** sha256 of the canonical JSON of a request: what `Idempotency-Key` reuse is compared by. */
export function requestHash(request: unknown): string {
  return createHash('sha256').update(canonicalJson(request)).digest('hex');
}

export interface ReceiptChainVerdict {
  ok: boolean;
  /** Entries checked and found sound (all of them when ok). */
  entries: number;
  /** Hash of the last sound entry: publish or anchor it to detect truncation of the tail later. */
  head: string;
  /** The first seq at which the chain breaks (a missing seq is reported as itself). */
  firstBadSeq?: number;
  problem?: string;
}

/**
 * Walks entries in seq order (the iterable may stream from disk) and checks the chain: seq numbers
 * consecutive from 1, each prev_hash equal to the previous hash, each hash equal to the recomputed
 * one. `indexedHead` is the highest seq that the receipts index says was written; entries missing
 * after the last one read mean the tail was cut.
 */
export function verifyEntries(entries: Iterable<StoredEntry>, indexedHead: number): ReceiptChainVerdict {
  let expectedSeq = 1;
  let prev = GENESIS_HASH;
  const bad = (seq: number, problem: string): ReceiptChainVerdict => ({ ok: false, entries: expectedSeq - 1, head: prev, firstBadSeq: seq, problem });
  for (const e of entries) {
    if (e.seq !== expectedSeq) {
      return bad(expectedSeq, e.seq > expectedSeq ? `entry ${expectedSeq} is missing (the next entry is ${e.seq})` : `entry ${e.seq} is out of order`);
    }
    if (e.prev_hash !== prev) return bad(e.seq, `entry ${e.seq} does not link to entry ${e.seq - 1} (an entry was removed, inserted or reordered)`);
    if (entryHash(e.prev_hash, e.body, e.seq, e.kind, e.receipt_id) !== e.hash) {
      return bad(e.seq, `entry ${e.seq} does not match its hash (its content was altered)`);
    }
    prev = e.hash;
    expectedSeq += 1;
  }
  if (indexedHead >= expectedSeq) {
    return bad(expectedSeq, `entries ${expectedSeq}..${indexedHead} are missing (the receipts index refers to them)`);
  }
  return { ok: true, entries: expectedSeq - 1, head: prev };
}
