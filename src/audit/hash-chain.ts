import { createHash } from 'node:crypto';
import { canonicalJson } from './canonical-json.js';
import type { GraphLogVerdict } from './graph-chain.js';
import type { EntryKind, StoredEntry } from './receipt.js';

/** prev_hash of the first entry of every chain. */
export const GENESIS_HASH = '0'.repeat(64);

/**
 * The chain the receipts of one coordination key (the resource key) are appended to: its id is the key
 * itself, so an entry's position says "the n-th receipt entry of this key" to an auditor.
 */
export type ChainId = string;

/**
 * The frozen chain of the entries written before per-key chains (one global chain, migrated as is: its
 * positions are the old seqs and its entries keep their version-1 hashes). No new receipt joins it; a
 * receipt it holds still PENDING is settled in it. Resource keys are never empty, so '' is free.
 */
export const LEGACY_CHAIN: ChainId = '';

/** The chain a new receipt of this resource key is appended to. */
export function chainOf(resourceKey: string): ChainId {
  return resourceKey;
}

/**
 * Version 1 (the legacy chain): hash = sha256_hex(prev_hash "\n" body "\n" pos "\n" kind "\n" receipt_id),
 * where body is the entry's canonical JSON exactly as stored. Canonical JSON never contains a raw
 * newline, so the separator makes the concatenation unambiguous.
 */
export function entryHash(prevHash: string, body: string, pos: number, kind: EntryKind, receiptId: string): string {
  return createHash('sha256').update(`${prevHash}\n${body}\n${pos}\n${kind}\n${receiptId}`).digest('hex');
}

/**
 * Version 2 (per-key chains): the chain's id (JSON-quoted: a key may hold a newline), the position in it
 * and the store-wide seq are hashed as well, so an entry moved to another chain, or to another place in
 * its own, or renumbered, no longer matches its hash.
 */
export function chainEntryHash(prevHash: string, body: string, chain: ChainId, pos: number, seq: number, kind: EntryKind, receiptId: string): string {
  return createHash('sha256').update(`writ-receipt-v2\n${prevHash}\n${body}\n${JSON.stringify(chain)}\n${pos}\n${seq}\n${kind}\n${receiptId}`).digest('hex');
}

/** The hash an entry must have, by the version of its chain. */
export function hashOf(e: Omit<StoredEntry, 'hash'>): string {
  return e.chain === LEGACY_CHAIN ? entryHash(e.prev_hash, e.body, e.pos, e.kind, e.receipt_id) : chainEntryHash(e.prev_hash, e.body, e.chain, e.pos, e.seq, e.kind, e.receipt_id);
}

/** The head of one chain: its last position and that entry's hash (0 and the genesis hash when empty). */
export interface ChainHead {
  chain: ChainId;
  pos: number;
  hash: string;
}

/** The entry that extends `head` (an engine calls it with the head it locked, and the seq it drew). */
export function linkEntry(head: { pos: number; hash: string }, seq: number, entry: { chain: ChainId; receipt_id: string; kind: EntryKind; body: string }): StoredEntry {
  // One literal whose hash is filled in (hashOf reads the other fields), not `{ ...unhashed, hash }`:
  // see test/architecture/spread-then-add.test.ts.
  const stored: StoredEntry = { seq, chain: entry.chain, pos: head.pos + 1, receipt_id: entry.receipt_id, kind: entry.kind, body: entry.body, prev_hash: head.hash, hash: '' };
  stored.hash = hashOf(stored);
  return stored;
}

/** sha256 of the canonical JSON of a request: what `Idempotency-Key` reuse is compared by. */
export function requestHash(request: unknown): string {
  return createHash('sha256').update(canonicalJson(request)).digest('hex');
}

export interface ReceiptChainVerdict {
  ok: boolean;
  /** Entries checked and found sound (all of them when ok), after the archived ones. */
  entries: number;
  /** Chains checked (one per coordination key, and the legacy chain when there is one). */
  chains: number;
  /**
   * Merkle root over the heads of the chains as verified (checkpoint.ts `headsRoot`): publish or anchor
   * it to detect later a rewrite of everything after it, checkpoints included.
   */
  head: string;
  /**
   * The chain, and the position in it, at which the log breaks (a missing entry is reported as itself);
   * absent when the break is in no chain: the latest checkpoint, or an index row naming no entry of its own.
   */
  chain?: ChainId;
  firstBadPos?: number;
  /** Store-wide seq of the entry at fault, when one is (not for a missing entry). */
  firstBadSeq?: number;
  problem?: string;
  /**
   * The signed checkpoint the log was verified against (and from, for archived chains), with its compact
   * JWS as stored: an auditor checks it offline with the published keys (`writ audit verify --graph-events
   * FILE --checkpoint FILE --jwks FILE`).
   */
  checkpoint?: { seq: number; at: number; chains: number; root: string; archived: number; graph_revision?: number; graph_hash?: string; jws: string };
  /** The graph event log's hash chain (graph-chain.ts); `ok` is false when it breaks too. */
  graph?: GraphLogVerdict;
}

/** Where a chain broke and why. */
export interface ChainBreak {
  chain: ChainId;
  pos: number;
  seq?: number;
  problem: string;
}

/**
 * Checks one chain as its entries are fed in position order, in as many parts as the caller likes:
 * positions consecutive from the start, each prev_hash equal to the previous hash, each hash equal to the
 * recomputed one (by the chain's version), each entry of this chain.
 */
export class ChainVerifier {
  private expectedPos: number;
  private prev: string;

  /** Starts after position `startPos` whose hash is `startHash` (a checkpoint's floor), or at the genesis. */
  constructor(
    readonly chain: ChainId,
    readonly startPos = 0,
    startHash = GENESIS_HASH,
  ) {
    this.expectedPos = startPos + 1;
    this.prev = startHash;
  }

  /** The break at the first bad entry of `entries`, or undefined when all of them are sound. */
  feed(entries: Iterable<StoredEntry>): ChainBreak | undefined {
    for (const e of entries) {
      const c = this.chain === LEGACY_CHAIN ? 'the legacy chain' : `chain ${JSON.stringify(this.chain)}`;
      if (e.chain !== this.chain) return this.bad(this.expectedPos, `entry seq ${e.seq} is in ${JSON.stringify(e.chain)}, not ${c}`, e.seq);
      if (e.pos !== this.expectedPos) {
        return e.pos > this.expectedPos
          ? this.bad(this.expectedPos, `${c}: entry ${this.expectedPos} is missing (the next entry is ${e.pos})`)
          : this.bad(e.pos, `${c}: entry ${e.pos} is out of order`, e.seq);
      }
      if (e.prev_hash !== this.prev) return this.bad(e.pos, `${c}: entry ${e.pos} does not link to entry ${e.pos - 1} (an entry was removed, inserted, moved or reordered)`, e.seq);
      if (hashOf(e) !== e.hash) return this.bad(e.pos, `${c}: entry ${e.pos} does not match its hash (its content, chain or place was altered)`, e.seq);
      this.prev = e.hash;
      this.expectedPos += 1;
    }
    return undefined;
  }

  /** The hash of the last sound entry fed (the start's before any). */
  get headHash(): string {
    return this.prev;
  }

  /** The position of the last sound entry fed (the start before any). */
  get verified(): number {
    return this.expectedPos - 1;
  }

  /** Entries fed and found sound. */
  get count(): number {
    return this.expectedPos - 1 - this.startPos;
  }

  bad(pos: number, problem: string, seq?: number): ChainBreak {
    return { chain: this.chain, pos, ...(seq !== undefined ? { seq } : {}), problem };
  }
}
