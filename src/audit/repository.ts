import type { CheckpointLeaf, StoredCheckpoint, StoredLegacyCheckpoint } from './checkpoint.js';
import type { ChainHead, ChainId } from './hash-chain.js';
import type { EntryKind, ReceiptStatus, StoredEntry } from './receipt.js';

/**
 * Storage port of the receipt log, used inside a transaction of the datastore contract
 * (src/store/contract.ts). The log is one hash chain per coordination key: every append locks only
 * its chain's head (so appends on different keys never wait on each other), draws the next store-wide
 * seq, links to the head (hash-chain.ts `linkEntry`) and writes the entry, the receipts index row
 * (what queries filter on, and the idempotency key) and the new head in the transaction it is given.
 */
export interface ReceiptRepository {
  /**
   * Appends an intent to `entry.chain` unless (index.principal, index.idempotency_key) already names a
   * receipt, in which case nothing is written and that receipt is returned. Check and insert are atomic.
   */
  appendIntent(entry: NewEntry, index: ReceiptIndexRow): Promise<IntentAppend>;
  /** Appends a single-entry receipt (status REJECTED). Rejections never occupy an idempotency key. */
  appendRejection(entry: NewEntry, index: ReceiptIndexRow): Promise<StoredEntry>;
  /**
   * Appends a settling entry to the chain of the receipt's first entry, only while the receipt is
   * PENDING (first settlement wins).
   */
  appendSettlement(entry: SettlingEntry, status: Exclude<ReceiptStatus, 'PENDING' | 'REJECTED'>, completedAt: number): Promise<SettlementAppend>;
  /** The receipt this principal's idempotency key names, if any. */
  findByIdempotencyKey(principal: string, idempotencyKey: string): Promise<{ receipt_id: string; request_hash: string | null } | null>;
  /** The receipt's entries in seq order (empty when unknown). */
  entriesOf(receiptId: string): Promise<StoredEntry[]>;
  /** Receipts matching the filter, ordered by the seq of their first entry, each with its entries. */
  find(filter: ReceiptFilter): Promise<FoundReceipt[]>;
  /** Up to `limit` entries after (chain, pos) `after` (from the first when null), in (chain, pos) order: the log read in chunks. */
  entriesFrom(after: { chain: ChainId; pos: number } | null, limit: number): Promise<StoredEntry[]>;
  /** The entries at these places (those that exist), in no particular order. */
  entriesAt(places: readonly { chain: ChainId; pos: number }[]): Promise<StoredEntry[]>;
  /** Every chain's head as the engine keeps it (the row appends lock, or on SQLite the last entry). */
  heads(): Promise<ChainHead[]>;
  /**
   * A mark of the log as this transaction reads it, for headsMovedSince: read it before the heads in the
   * same transaction (on PostgreSQL the snapshot, on SQLite the highest seq).
   */
  headsMark(): Promise<string>;
  /**
   * The heads of the chains that had an entry appended since `mark` (a mark of an earlier transaction;
   * may include some that did not move), found through an index on the appends, not by reading every
   * head: what the periodic checkpoint reads when it keeps the leaves it signed.
   */
  headsMovedSince(mark: string): Promise<ChainHead[]>;
  /**
   * Takes or renews the turn to take the periodic checkpoints for `turnMs` (by the store's clock) unless
   * another holder's turn has not run out: one replica checkpoints per interval, another takes over when it
   * stops renewing. True: it is `holder`'s turn.
   */
  claimCheckpointTurn(holder: string, turnMs: number): Promise<boolean>;
  /**
   * The sum of every chain's head position (`heads()` summed; 0 with no chain): one aggregate in the
   * store, so a caller needing only that (the store mark, at every start) reads no head, one per key.
   */
  headsSum(): Promise<number>;
  /**
   * The index rows of these receipts (those that have one), each with the entries its first_seq and
   * last_seq name, in seq order: what `writ audit verify` compares with the hashed entries.
   */
  indexOf(receiptIds: readonly string[]): Promise<IndexedReceipt[]>;
  /**
   * Up to `limit` index rows that name no entry of theirs: a first_seq that is not that receipt's
   * intent or rejection, or a last_seq (other than first_seq) that is not a settlement of it.
   */
  indexOrphans(limit: number): Promise<{ receipt_id: string; first_seq: number; last_seq: number }[]>;
  /** The newest checkpoint over the chain heads, or null before the first. */
  latestCheckpoint(): Promise<StoredCheckpoint | null>;
  /** Every chain's leaf as of checkpoint `seq` (its latest leaf recorded at or before it). */
  checkpointLeaves(seq: number): Promise<CheckpointLeaf[]>;
  /** The newest checkpoint of the single global chain from before per-key chains, or null. */
  legacyCheckpoint(): Promise<StoredLegacyCheckpoint | null>;
  /**
   * Records the checkpoint and its `changed` leaves (those that differ from the previous checkpoint's)
   * and deletes, for each leaf whose floor rose (its chain in `raised`: an archive's chains; a periodic
   * checkpoint raises none), the entries of that chain up to the floor and the index rows of the
   * receipts they open, in this transaction: the only way entries ever leave the store (the engines'
   * triggers refuse a delete above a chain's latest floor). Returns the rows deleted, or null (and does
   * nothing) when a checkpoint with that seq exists already: another server won. With `turn` (a periodic
   * checkpoint, claimCheckpointTurn's holder), also null and nothing done unless it is still that holder's
   * turn by the store's clock, checked in the same statement as the insert and kept (the turn row locked
   * against a takeover) until the transaction ends: a replica that paused after it claimed the turn signs
   * nothing once another has taken over.
   */
  recordCheckpoint(checkpoint: StoredCheckpoint, changed: readonly CheckpointLeaf[], raised: ReadonlySet<string>, turn?: string): Promise<{ entries: number; receipts: number } | null>;
}

/** A receipts index row as stored, with the entries it names. */
export interface IndexedReceipt {
  row: ReceiptIndexRow & { first_seq: number; last_seq: number };
  entries: StoredEntry[];
}

/** A settling entry: it goes to the chain of its receipt's first entry. */
export type SettlingEntry = Omit<NewEntry, 'chain'>;

export interface NewEntry {
  /** The chain to extend: hash-chain.ts `chainOf(resource_key)`. */
  chain: ChainId;
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
  /** The decision the receipt's first entry names (what `decision_id` queries filter on); null when none. Absent: null. */
  decision_id?: string | null;
  created_at: number;
  completed_at: number | null;
}

export type IntentAppend =
  | { appended: true; entry: StoredEntry }
  | { appended: false; existing: { receipt_id: string; request_hash: string | null } };

/** `first`: the receipt's first entry (its intent), so the settled receipt is known without reading it back. */
export type SettlementAppend = { appended: true; entry: StoredEntry; first: StoredEntry } | { appended: false; reason: 'unknown' | 'settled' };

export interface ReceiptFilter {
  resource?: string;
  principal?: string;
  status?: ReceiptStatus;
  /** Receipts whose first entry (intent or rejection) names this decision. */
  decisionId?: string;
  after?: number;
  createdAtOrBefore?: number;
  createdAtOrAfter?: number;
  /**
   * Created at least this many ms ago by the store's own clock (the database's on PostgreSQL, this
   * machine's on SQLite), not by the caller's: a replica whose clock runs ahead must not take another
   * replica's write, still in flight, for an old one (`created_at` is the writer's clock).
   */
  createdAtLeastMsAgo?: number;
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
