import type { LeaseEvent, PreemptedLease } from './types.js';

/**
 * Storage port of the lease manager. `SqliteLeaseRepository` (src/store/sqlite/lease-repository.ts)
 * implements it on one SQLite file; a PostgreSQL backend can implement the same contract.
 *
 * Contract every implementation keeps:
 * - `acquire` takes all keys or none, in one serializable write transaction, with one conditional
 *   write per key whose changed-row count is the verdict (never read-then-write). Each taken key's
 *   epoch becomes epoch + 1 in that same write; epochs never decrease and are never reused.
 * - `renew` and `release` are conditional on lease id, token hash, state ACTIVE and not expired.
 * - A queued waiter blocks every acquisition of its key by a newcomer of equal or lower priority, and
 *   by waiters behind it; waiters past their deadline block nobody.
 * - A refused call changes nothing.
 */
export interface LeaseRepository {
  acquire(cmd: AcquireCommand): Promise<AcquireOutcome>;
  renew(cmd: RenewCommand): Promise<RenewOutcome>;
  release(cmd: ReleaseCommand): Promise<ReleaseOutcome>;
  /** Puts a waiter in the queue of each key; returns its ticket (tickets grow: a lower ticket is older). */
  enqueue(waiter: WaiterEntry): Promise<number>;
  dequeue(ticket: number): Promise<void>;
  /**
   * The key's row and, if any, the lease whose token has this hash (read together, consistently).
   * `leaseId` is the id the token names (leaseIdOfToken), null if it names none; the lease returned
   * must have both that id and that hash, or (tokens issued before ids were derived from tokens) be
   * the lease recorded with that hash.
   */
  fenceState(key: string, tokenHash: string, leaseId: string | null): Promise<FenceState>;
  listKeys(filter: { key?: string; holder?: string }): Promise<LeaseKeyRow[]>;
  waiters(key: string, now: number): Promise<WaiterRow[]>;
  history(filter: { key?: string; leaseId?: string }): Promise<LeaseEvent[]>;
}

/** Tickets of newcomers (not queued): every live waiter is older. */
export const NEWCOMER_TICKET = Number.MAX_SAFE_INTEGER;

export interface AcquireCommand {
  /** Unique, in canonical order. */
  keys: string[];
  leaseId: string;
  tokenHash: string;
  holder: string;
  instance: string | null;
  priority: number;
  ttlMs: number;
  now: number;
  preempt: boolean;
  /**
   * With `preempt`: the holders this acquisition may take keys from (the service checked a preempts edge
   * over each). A key held by anyone else at the moment of the takeover is refused, so the check and the
   * takeover cannot be split by another process. Undefined: any holder.
   */
  preemptable?: string[];
  /** The caller's waiter ticket, or NEWCOMER_TICKET. A granted waiter leaves the queue in the same transaction. */
  ticket: number;
  /** AcquireRequest.alsoCommit: run in the granting transaction, after every key was taken. */
  alsoCommit?: (leaseId: string) => void;
}

export type AcquireOutcome =
  | { granted: true; epochs: Record<string, number>; expiresAt: number; preempted: PreemptedLease[] }
  | {
      granted: false;
      /** The first key (in canonical order) that could not be taken. */
      key: string;
      holder: string | null;
      expiresAt: number | null;
      /** True when the key is free (or expired) but reserved for a queued waiter ahead of the caller. */
      queued: boolean;
    };

export interface RenewCommand {
  leaseId: string;
  tokenHash: string;
  /** New ttl; null keeps the lease's duration. */
  ttlMs: number | null;
  now: number;
  /** The caller's writes, in the renewing transaction, only when the renewal succeeds (see AcquireRequest.alsoCommit). */
  alsoCommit?: () => void;
}

export interface ReleaseCommand {
  leaseId: string;
  tokenHash: string;
  now: number;
  /** The caller's writes, in the releasing transaction, only when the release succeeds (see AcquireRequest.alsoCommit). */
  alsoCommit?: () => void;
}

export type LeaseRefusal = 'NOT_FOUND' | 'TOKEN_MISMATCH' | 'PREEMPTED' | 'EXPIRED';

export type RenewOutcome = { ok: true; epochs: Record<string, number>; expiresAt: number } | { ok: false; reason: LeaseRefusal };
export type ReleaseOutcome = { ok: true; epochs: Record<string, number> } | { ok: false; reason: LeaseRefusal };

export interface WaiterEntry {
  keys: string[];
  holder: string;
  instance: string | null;
  priority: number;
  enqueuedAt: number;
  deadline: number;
}

export interface WaiterRow {
  ticket: number;
  holder: string;
  instance: string | null;
  priority: number;
  enqueued_at: number;
  deadline: number;
}

export interface LeaseKeyRow {
  key: string;
  epoch: number;
  lease_id: string | null;
  holder: string | null;
  holder_instance: string | null;
  token_hash: string | null;
  priority: number | null;
  acquired_at: number | null;
  renewed_at: number | null;
  expires_at: number | null;
  duration_ms: number | null;
  transitions: number;
  preempted_by: string | null;
}

export type LeaseState = 'ACTIVE' | 'RELEASED' | 'EXPIRED' | 'PREEMPTED';

export interface LeaseRow {
  lease_id: string;
  holder: string;
  resources: string[];
  epochs: Record<string, number>;
  state: LeaseState;
  expires_at: number;
}

export interface FenceState {
  key: LeaseKeyRow | undefined;
  lease: LeaseRow | undefined;
}
