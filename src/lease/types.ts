/** Times are milliseconds since the epoch inside Writ; records for the wire carry ISO-8601 strings too. */

export interface AcquireRequest<Tx = unknown> {
  /** Canonical coordination keys (the registry resolves aliases before this point). Duplicates are ignored. */
  resources: string[];
  /** The principal that will hold the lease (the authenticated caller). */
  holder: string;
  /** Governed priority (higher is served first). The service takes it from the graph, never from the request. */
  priority: number;
  ttlMs: number;
  /** Wait in the queue up to this many ms when a key is busy; 0 or absent answers RESOURCE_BUSY at once. */
  waitMs?: number;
  /** Take the keys even when held. Only the service decides this (active incident and a preempts edge). */
  preempt?: boolean;
  /** With `preempt`: the only holders whose keys may be taken over (see AcquireCommand.preemptable). */
  preemptable?: string[];
  /** An opaque id of the acquiring process or session, for diagnostics only (never an authority). */
  instance?: string;
  /**
   * The lease token, made by the caller (32 bytes from a cryptographically secure random source,
   * base64url: 43 characters), fresh for each lease; absent: Writ makes one. It makes the acquisition
   * safe to ask again when its answer was lost: asked again with the token of a lease it was granted,
   * for the same keys by the same holder, while that lease is live, the answer is that lease
   * (`replayed`), not a second one or a wait behind itself. A token whose lease ended is LEASE_EXPIRED
   * (LEASE_PREEMPTED); one used for other keys or by another holder, IDEMPOTENCY_MISMATCH.
   */
  token?: string;
  /**
   * Writes that must commit with the acquisition or not at all (the service records the authority
   * the lease was taken with, and spends the caller's assertion): called inside the granting
   * transaction with its handle and the new lease id, only when every key was taken, with the leases
   * that taking them preempted (for a check of what was really taken over). If it throws, nothing is
   * granted.
   */
  alsoCommit?: (tx: Tx, leaseId: string, preempted: readonly PreemptedLease[]) => Promise<void>;
  /**
   * The caller's own check, in each acquiring transaction and asked together with the acquisition (one
   * message on engines that batch), before it in order: if it throws, nothing is granted and its error
   * is the answer (see LeaseCallOptions.check).
   */
  check?: (tx: Tx) => Promise<void>;
  /**
   * Aborted when the caller went away (its lease stream or connection closed): a waiting acquisition
   * leaves the queue and gives up with AcquisitionWithdrawn at once, instead of waiting on for nobody.
   * An attempt already in the store finishes (and may be granted: the caller decides what becomes of it).
   */
  signal?: AbortSignal;
}

export interface LeaseGrant {
  lease_id: string;
  /** The bearer secret for renew, release and writes. Writ stores only its SHA-256 hash. The lease id is derived from it. */
  token: string;
  /** The fencing epoch per key; each write carries the epoch of its key. */
  epochs: Record<string, number>;
  expires_at: number;
  /** Leases this acquisition took over by preemption (empty unless `preempt`; empty on a replay). */
  preempted: PreemptedLease[];
  /** True when this answers an acquisition asked again with the token of a lease already granted (nothing was taken now). */
  replayed: boolean;
}

export interface PreemptedLease {
  lease_id: string;
  holder: string;
  key: string;
  epoch: number;
}

export interface RenewedLease {
  lease_id: string;
  epochs: Record<string, number>;
  expires_at: number;
}

export interface ReleasedLease {
  lease_id: string;
  epochs: Record<string, number>;
}

export interface FenceRequest {
  key: string;
  /** Optional: the gateway may only have the token; when given it must match too. */
  lease_id?: string;
  token: string | undefined;
  epoch: number;
  principal: string;
  now?: number;
}

/** What a write may proceed with: the lease is this principal's, live, and the epoch is the key's high-water mark. */
export interface FenceCheck {
  key: string;
  lease_id: string;
  epoch: number;
  expires_at: number;
}

/** A lease in the Kubernetes Lease vocabulary (coordination.k8s.io/v1 LeaseSpec) plus Writ's epoch. */
export interface LeaseRecord {
  key: string;
  /** Stored holder; see `state` for whether it still holds. */
  holderIdentity: string | null;
  holderInstance: string | null;
  leaseDurationSeconds: number | null;
  /** ms since the epoch (Kubernetes' MicroTime on the wire). */
  acquireTime: number | null;
  renewTime: number | null;
  leaseTransitions: number;
  /** The fencing high-water mark of this key. */
  epoch: number;
  expiresAt: number | null;
  leaseId: string | null;
  priority: number | null;
  /** HELD: holder and not expired; EXPIRED: holder recorded but past expiry (free to take); FREE: released or never taken. */
  state: 'HELD' | 'EXPIRED' | 'FREE';
  preemptedBy: string | null;
}

export type LeaseEventKind = 'ACQUIRE' | 'RENEW' | 'RELEASE' | 'PREEMPT' | 'EXPIRE';

export interface LeaseEvent {
  seq: number;
  at: number;
  event: LeaseEventKind;
  key: string;
  epoch: number;
  lease_id: string;
  holder: string;
  /** For PREEMPT and EXPIRE: the principal whose acquisition ended this lease. */
  actor: string | null;
}

export interface LeaseManagerOptions {
  /** Smallest ttl accepted (default 1 000 ms). */
  minTtlMs?: number;
  /** Largest ttl accepted (default 300 000 ms). */
  maxTtlMs?: number;
  /** Largest wait accepted (default 60 000 ms). */
  maxWaitMs?: number;
  /**
   * Live waiters a key's queue holds (default 64); one more waiter is OVERLOADED (503) with Retry-After
   * instead of queued. Counted in the enqueuing transaction, so exact on one SQLite file; PostgreSQL
   * replicas enqueueing at the same instant (READ COMMITTED) may each see the last free place.
   */
  maxWaitersPerKey?: number;
  /**
   * Acquisitions one holder (principal) may keep waiting at once, over every key (default 16; an
   * acquisition of several keys counts once); one more is OVERLOADED (503) with Retry-After instead of
   * queued. Every waiter polls the store until its turn, so without it one principal could keep
   * keys × maxWaitersPerKey waiters polling. Counted in the enqueuing transaction, as maxWaitersPerKey.
   */
  maxWaitersPerPrincipal?: number;
  /** Waiters poll the store between these bounds, with jitter (defaults 10 and 50 ms). */
  pollMinMs?: number;
  pollMaxMs?: number;
  /** Retry-After given when a key is free but reserved for queued waiters (default 250 ms). */
  queuedRetryAfterMs?: number;
  /** Random bytes for tokens (default node:crypto random bytes, drawn from a pool: see pooledRandomBytes). */
  randomBytes?: (size: number) => Buffer;
  /** How a waiter sleeps between polls (default setTimeout); tests inject a gate. */
  sleep?: (ms: number) => Promise<void>;
}
