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
  /** Entries checked and found sound (all of them when ok), from the checkpoint on when there is one. */
  entries: number;
  /** Hash of the last sound entry: publish or anchor it to detect truncation of the tail later. */
  head: string;
  /** The first seq at which the chain breaks (a missing seq is reported as itself). */
  firstBadSeq?: number;
  problem?: string;
  /** The signed checkpoint the chain was verified from (entries up to its archived_through are archived). */
  checkpoint?: { seq: number; archived_through: number; hash: string; at: number };
}

/**
 * Checks the chain as its entries are fed in seq order, in as many parts as the caller likes (the
 * whole log streamed, or chunks between which the caller yields): seq numbers consecutive from 1,
 * each prev_hash equal to the previous hash, each hash equal to the recomputed one.
 */
export class ChainVerifier {
  private expectedSeq: number;
  private prev: string;

  /** Starts after entry `startSeq` whose hash is `startHash` (a checkpoint's), or at the genesis. */
  constructor(
    private readonly startSeq = 0,
    startHash = GENESIS_HASH,
  ) {
    this.expectedSeq = startSeq + 1;
    this.prev = startHash;
  }

  /** The verdict at the first bad entry of `entries`, or undefined when all of them are sound. */
  feed(entries: Iterable<StoredEntry>): ReceiptChainVerdict | undefined {
    for (const e of entries) {
      if (e.seq !== this.expectedSeq) {
        return this.bad(this.expectedSeq, e.seq > this.expectedSeq ? `entry ${this.expectedSeq} is missing (the next entry is ${e.seq})` : `entry ${e.seq} is out of order`);
      }
      if (e.prev_hash !== this.prev) return this.bad(e.seq, `entry ${e.seq} does not link to entry ${e.seq - 1} (an entry was removed, inserted or reordered)`);
      if (entryHash(e.prev_hash, e.body, e.seq, e.kind, e.receipt_id) !== e.hash) {
        return this.bad(e.seq, `entry ${e.seq} does not match its hash (its content was altered)`);
      }
      this.prev = e.hash;
      this.expectedSeq += 1;
    }
    return undefined;
  }

  /**
   * The verdict once every entry was fed. `indexedHead` is the highest seq that the receipts index
   * said was written (read before the entries): entries missing after the last one fed mean the tail was cut.
   */
  finish(indexedHead: number): ReceiptChainVerdict {
    if (indexedHead >= this.expectedSeq) {
      return this.bad(this.expectedSeq, `entries ${this.expectedSeq}..${indexedHead} are missing (the receipts index refers to them)`);
    }
    return { ok: true, entries: this.expectedSeq - 1 - this.startSeq, head: this.prev };
  }

  /** The hash of the last sound entry fed (the start's before any). */
  get headHash(): string {
    return this.prev;
  }

  /** The seq of the last sound entry fed (the start before any). */
  get verified(): number {
    return this.expectedSeq - 1;
  }

  /** A verdict for a problem found beside the chain (the receipts index), at the entry `seq`. */
  broken(seq: number, problem: string): ReceiptChainVerdict {
    return this.bad(seq, problem);
  }

  private bad(seq: number, problem: string): ReceiptChainVerdict {
    return { ok: false, entries: this.expectedSeq - 1 - this.startSeq, head: this.prev, firstBadSeq: seq, problem };
  }
}
