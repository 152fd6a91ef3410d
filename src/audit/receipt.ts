/**
 * Coordination receipts. The log is one hash chain of append-only entries per coordination key (the
 * resource key; see hash-chain.ts); a receipt is the fold of its entries (intent → completed | failed |
 * reconciled, or a single rejected entry), all in one chain. Times are ms.
 */

export const RECEIPT_STATUSES = ['PENDING', 'COMPLETED', 'FAILED', 'REJECTED'] as const;
export type ReceiptStatus = (typeof RECEIPT_STATUSES)[number];

/** A page of receipts (GET /v1/receipts, writ receipts): how many when not said, and at most. */
export const RECEIPT_PAGE = { defaultLimit: 100, maxLimit: 1000 } as const;
/** The bounds of a `decision_id` receipts are asked for by (GET /v1/receipts, `writ receipts --decision`). */
export const DECISION_ID_FILTER = { minLength: 1, maxLength: 256 } as const;

export const ENTRY_KINDS = ['intent', 'completed', 'failed', 'rejected', 'reconciled'] as const;
export type EntryKind = (typeof ENTRY_KINDS)[number];

/** Something that got in the way of the write: a version, fencing epoch or lease mismatch. */
export interface ReceiptConflict {
  kind: string;
  expected?: unknown;
  actual?: unknown;
  detail?: string;
}

export interface ReceiptError {
  code: string;
  message: string;
  /**
   * A DECISION_REPLAYED refusal: the receipt of the write that used the decision, when the log held it at
   * the refusal. Recorded in the rejection's hashed entry; absent on every other error, and on refusals
   * recorded before Writ kept it (whose message names it: "… receipt ID; …").
   */
  used_by_receipt_id?: string;
}

/**
 * What a write refused for a lease reason (LEASE_REQUIRED, LEASE_EXPIRED, LEASE_TOKEN_MISMATCH,
 * LEASE_PREEMPTED, STALE_FENCING_EPOCH) presented, and what Writ knew of its keys at the refusal. Never
 * the token nor its hash: only the lease id, which names the lease without letting anyone use it.
 */
export interface PresentedLease {
  /** The Writ-Lease-Id header, else the id the lease token names; null when neither names a lease. */
  lease_id: string | null;
  /** The id the lease token names (null: no token, or not one Writ issued): differs from lease_id when the header named another lease. */
  token_lease_id: string | null;
  /** Each coordination key the write needed, in the decision's order. */
  keys: PresentedLeaseKey[];
}

export interface PresentedLeaseKey {
  key: string;
  /** The fencing epoch Writ-Fencing-Epoch gave for this key (null: none given, or the header was unreadable). */
  presented_epoch: number | null;
  /** The key's fencing epoch (its high-water mark) at the refusal; 0 if never leased. */
  current_epoch: number;
  /** The key's lease at the refusal: who holds it (null: nobody), its id, and whether it is HELD, EXPIRED or FREE. */
  holder: string | null;
  lease_id: string | null;
  state: 'HELD' | 'EXPIRED' | 'FREE';
}

/** What the gateway knows before forwarding a write. Omitted optional members are recorded as null / []. */
export interface ReceiptIntent {
  /** Chosen by the log when omitted; it is also the coordination id sent upstream as Writ-Receipt-Id. */
  receipt_id?: string;
  principal: string;
  action: string;
  resource_key: string;
  fields: string[];
  /** Owners of the written fields, as resolved for the decision. */
  owners?: string[];
  /** Graph revision at which the decision was made (the chain's authority watermark). */
  authority_epoch?: number | null;
  ownership_epoch?: number | null;
  decision_id?: string | null;
  policy_revision?: string | null;
  graph_revision?: number | null;
  /** Edge ids of the authority chain, governance first. */
  chain?: string[];
  lease_id?: string | null;
  lease_epoch?: number | null;
  expected_version?: number | null;
  idempotency_key?: string | null;
  /** requestHash(...) of the request; same key + same hash replays, same key + other hash is refused. */
  request_hash: string;
}

export interface ReceiptCompletion {
  status: 'COMPLETED' | 'FAILED';
  final_version?: number | null;
  upstream_status?: number | null;
  error?: ReceiptError | null;
  conflicts?: ReceiptConflict[];
}

/** A refused request. Whatever was known when it was refused; principal may be 'anonymous'. */
export type ReceiptRejection = Partial<Omit<ReceiptIntent, 'receipt_id' | 'principal' | 'action' | 'resource_key' | 'request_hash'>> & {
  principal: string;
  action: string;
  resource_key: string;
  request_hash?: string | null;
  error: ReceiptError;
  conflicts?: ReceiptConflict[];
  upstream_status?: number | null;
  /** Refused for a lease reason: the lease the write presented (recorded only when given). */
  presented_lease?: PresentedLease | null;
};

/** How reconciliation settled a PENDING receipt, from what the upstream says it applied. */
export type ReconcileOutcome =
  | { status: 'COMPLETED'; final_version: number | null; upstream_status?: number | null; note?: string }
  | { status: 'FAILED'; error: ReceiptError; upstream_status?: number | null; note?: string };

/** One row of the log, exactly as stored. `body` is canonical JSON and includes `at`. */
export interface StoredEntry {
  /** Store-wide number: the order entries were drawn in (pages of receipts follow it); gaps are allowed. */
  seq: number;
  /** The chain (coordination key) it extends, and its place there: 1, 2, … with no gap. */
  chain: string;
  pos: number;
  receipt_id: string;
  kind: EntryKind;
  body: string;
  prev_hash: string;
  hash: string;
}

export interface ReceiptEntryRef {
  seq: number;
  /** Place in the receipt's chain. */
  pos: number;
  kind: EntryKind;
  at: number;
  prev_hash: string;
  hash: string;
}

export interface Receipt {
  receipt_id: string;
  /** Same as receipt_id (the DESIGN.md name). */
  coordination_id: string;
  status: ReceiptStatus;
  principal: string;
  action: string;
  resource_key: string;
  fields: string[];
  owners: string[];
  authority_epoch: number | null;
  ownership_epoch: number | null;
  decision_id: string | null;
  policy_revision: string | null;
  graph_revision: number | null;
  chain: string[];
  lease_id: string | null;
  lease_epoch: number | null;
  expected_version: number | null;
  final_version: number | null;
  conflicts: ReceiptConflict[];
  upstream_status: number | null;
  error: ReceiptError | null;
  /** A REJECTED receipt refused for a lease reason: the lease the write presented; null otherwise (and on receipts recorded before Writ kept it). */
  presented_lease: PresentedLease | null;
  idempotency_key: string | null;
  request_hash: string | null;
  created_at: number;
  completed_at: number | null;
  /** True when a 'reconciled' entry settled it (after a crash or timeout), not the writer itself. */
  reconciled: boolean;
  /** The hash chain its entries are in: its coordination key ('' for the legacy chain of older receipts). */
  hash_chain: string;
  /** prev_hash of the first entry and hash of the last one. */
  prev_hash: string;
  hash: string;
  entries: ReceiptEntryRef[];
  /** Set on a return value when the call wrote nothing and returns the receipt as it already was. */
  replayed?: boolean;
}

export interface ReceiptQuery {
  resource?: string;
  principal?: string;
  status?: ReceiptStatus;
  /** Receipts of writes (and refusals) that presented this decision. */
  decision_id?: string;
  /** Receipts whose first entry has a seq greater than this (the `next` of the previous page). */
  after?: number;
  /** Newest first: then `before` (the `next` of the previous page) pages back in time, and `after` is not allowed. */
  newestFirst?: boolean;
  before?: number;
  /** Receipts created at or after / at or before these times (ms). */
  since?: number;
  until?: number;
  /** Default 100, at most 1000. */
  limit?: number;
}

export interface ReceiptPage {
  receipts: Receipt[];
  /** Pass as `after` to get the next page; null when this page is the last. */
  next: number | null;
}
