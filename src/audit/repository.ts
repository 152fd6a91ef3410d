import type { StoredCheckpoint } from './checkpoint.js';
import type { EntryKind, ReceiptStatus, StoredEntry } from './receipt.js';

/**
 * Storage port of the receipt log, used inside a transaction of the datastore contract
 * (src/store/contract.ts). Every append assigns the next seq, links prev_hash to the current head and
 * computes the hash (hash-chain.ts `entryHash`) in the transaction it is given, so several processes
 * appending to the same store cannot fork the chain. The receipts index (one row per receipt: what
 * queries filter on, and the idempotency key) is updated in the same transaction.
 */
export interface ReceiptRepository {
  /**
   * Appends an intent unless (index.principal, index.idempotency_key) already names a receipt, in
   * which case nothing is written and that receipt is returned. Check and insert are atomic.
   */
  appendIntent(entry: NewEntry, index: ReceiptIndexRow): Promise<IntentAppend>;
  /** Appends a single-entry receipt (status REJECTED). Rejections never occupy an idempotency key. */
  appendRejection(entry: NewEntry, index: ReceiptIndexRow): Promise<StoredEntry>;
  /** Appends a settling entry only while the receipt is PENDING (first settlement wins). */
  appendSettlement(entry: NewEntry, status: Exclude<ReceiptStatus, 'PENDING' | 'REJECTED'>, completedAt: number): Promise<SettlementAppend>;
  /** The receipt this principal's idempotency key names, if any. */
  findByIdempotencyKey(principal: string, idempotencyKey: string): Promise<{ receipt_id: string; request_hash: string | null } | null>;
  /** The receipt's entries in seq order (empty when unknown). */
  entriesOf(receiptId: string): Promise<StoredEntry[]>;
  /** Receipts matching the filter, ordered by the seq of their first entry, each with its entries. */
  find(filter: ReceiptFilter): Promise<FoundReceipt[]>;
  /** Up to `limit` entries with seq > `afterSeq`, in seq order (the chain is read in chunks). */
  entriesAfter(afterSeq: number, limit: number): Promise<StoredEntry[]>;
  /** Highest seq the receipts index refers to (0 when empty): a cut tail shows up against it. */
  indexedHead(): Promise<number>;
  /**
   * The index rows of these receipts (those that have one), each with the entries its first_seq and
   * last_seq name, in seq order: what `writ audit verify` compares with the hashed entries.
   */
  indexOf(receiptIds: readonly string[]): Promise<IndexedReceipt[]>;
  /**
   * Index rows whose first entry is at or below `upToSeq`, and how many of them name a settling
   * entry at or below it: they must match the intents/rejections and settlements of the chain.
   */
  indexCounts(upToSeq: number): Promise<{ receipts: number; settled: number }>;
  /** The newest checkpoint (the one the chain in the store starts after), or null before any archive. */
  latestCheckpoint(): Promise<StoredCheckpoint | null>;
  /**
   * The smallest first_seq of a receipt that may not be archived yet: PENDING, or with an entry at or
   * after `before` (created_at, or completed_at, at or after it). Null when there is none.
   */
  firstUnarchivable(before: number): Promise<number | null>;
  /** The smallest first_seq of a receipt that starts at or below `seq` and ends after it (null if none). */
  firstStraddling(seq: number): Promise<number | null>;
  /**
   * Records the checkpoint and deletes the entries up to `checkpoint.archived_through` and the index
   * rows of the receipts they open, in this transaction: the only way entries ever leave the store
   * (the engines' triggers refuse a delete above the latest checkpoint). Returns the rows deleted, or
   * null (and does nothing) when a checkpoint with that seq exists already: another archive won.
   */
  archiveThrough(checkpoint: StoredCheckpoint): Promise<{ entries: number; receipts: number } | null>;
}

/** A receipts index row as stored, with the entries it names. */
export interface IndexedReceipt {
  row: ReceiptIndexRow & { first_seq: number; last_seq: number };
  entries: StoredEntry[];
}

export interface NewEntry {
  receipt_id: string;
  kind: EntryKind;
  /** Canonical JSON. */
  body: string;
}

export interface ReceiptIndexRow {
  receipt_id: string;
  principal: string;
  resource_key: string;
  status: ReceiptStatus;
  idempotency_key: string | null;
  request_hash: string | null;
  created_at: number;
  completed_at: number | null;
}

export type IntentAppend =
  | { appended: true; entry: StoredEntry }
  | { appended: false; existing: { receipt_id: string; request_hash: string | null } };

export type SettlementAppend = { appended: true; entry: StoredEntry } | { appended: false; reason: 'unknown' | 'settled' };

export interface ReceiptFilter {
  resource?: string;
  principal?: string;
  status?: ReceiptStatus;
  after?: number;
  createdAtOrBefore?: number;
  createdAtOrAfter?: number;
  /** Receipts whose first entry has a seq below this (paging newest first). */
  before?: number;
  /** Newest first (descending first seq) instead of chain order. */
  newestFirst?: boolean;
  limit: number;
}

export interface FoundReceipt {
  first_seq: number;
  entries: StoredEntry[];
}
