import type { DecisionClaims } from '../decision/index.js';
import { WritError } from '../errors.js';
import type { ReadLock } from '../transactions.js';
import type { LeaseEvent, PreemptedLease } from './types.js';

/**
 * Storage port of the lease manager, used inside a transaction of the datastore contract
 * (src/store/contract.ts): every method runs in the transaction whose handle it came from, so the
 * caller's other writes (the authority record, the spent assertion) commit with it or not at all.
 *
 * Contract every engine keeps (the conformance suite, test/store/conformance, checks it):
 * - Keys form families (src/wire/key-family.ts): `R#f` is a child of its root `R`. Keys RELATED to K are
 *   its root if K is a child, its children (`K#*`) if K is a root; never its siblings.
 * - `acquire` takes all keys or none, with one conditional write per key whose changed-row count is
 *   the verdict (never read-then-write). A key is refused while it, or a related key, is held (holder
 *   set, not expired) by another lease: a whole-resource lease and a field lease of one resource are
 *   never held at once by two leases; siblings are independent; one lease may hold R and R#f together.
 *   A lease that lapsed holding a related key is ended (EXPIRED) by the take, so no renewal revives it.
 * - Epochs: one counter per family. A taken key's epoch becomes the highest epoch of its family (the
 *   root and all its children) + 1 in that same write, so each grant in a family is above every earlier
 *   grant in it; epochs of a key never decrease and are never reused. A refusal leaves the transaction
 *   as it was.
 * - `renew` and `release` are conditional on lease id, token hash, state ACTIVE and not expired.
 * - A queued waiter blocks every acquisition of its key and of the keys related to it by a newcomer of
 *   equal or lower priority, and by waiters behind it; waiters past their deadline block nobody.
 * - Preemption takes over a related key held by another lease as it does the key: only from a holder
 *   in `preemptable` (else refused), ending that lease PREEMPTED with all its keys freed.
 * - A refusal because a related key is held names that key (`heldKey`), its holder and expiry, not queued.
 * - PostgreSQL serialises the acquisitions of one family (an advisory lock per root, migration 16).
 * - A refused call changes nothing.
 * - `acquire` with the lease id of a lease that exists (live or ended) is refused with `tokenUsed`,
 *   before any key is looked at: a lease id, like its token, is used once. Also for twins, two
 *   acquisitions with one id in flight at once: the one not granted is `tokenUsed`, never refused as
 *   busy naming the lease with its own id as holder (on PostgreSQL it may have waited for that key).
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
  /**
   * Leased keys (epoch above 0) in key order (bytewise), narrowed by `query`, at most `query.limit` of
   * them after `query.after` (keyset paging: each page one range read of the key index, never a read of
   * the keys before it). `now` as for heldKeys: the engine's own clock where it keeps lease time
   * (PostgreSQL), read in the same statement, so that a caller judges each row's state (HELD or EXPIRED)
   * by the clock the acquisitions and the held read use; absent when no row is returned, or where the
   * caller's clock is lease time (SQLite).
   */
  listKeys(query: LeaseKeyQuery): Promise<LeaseKeyPage>;
  /**
   * The keys held now (LeaseRecord state HELD: a holder recorded and `expires_at` after now), in key
   * order (bytewise), found through the index of keys with a holder: never a read of the keys no one
   * holds. `now` is lease time where the engine takes it from its caller (SQLite); an engine that keeps
   * lease time itself (PostgreSQL) ignores it and returns its own clock as `now` (see FenceState.now),
   * absent when no key is held.
   */
  heldKeys(now: number): Promise<{ keys: LeaseKeyRow[]; now?: number }>;
  /**
   * The highest epoch of any key (0 when no key was ever leased): one aggregate in the store, so a
   * caller needing only that (the store mark, at every start) neither reads nor holds every key.
   */
  maxEpoch(): Promise<number>;
  waiters(key: string, now: number): Promise<WaiterRow[]>;
  /**
   * How many acquisitions `holder` keeps waiting now (live waiters: deadline after now), over every
   * key (a waiter on several keys counts once), and how long until the first of them reaches its
   * deadline (ms, by the clock the deadlines were set by: the caller's `now` on SQLite, the engine's
   * own on PostgreSQL; null when none waits). Found through the deadline index: a read of the live
   * waiters, never of the keys.
   */
  waitingOf(holder: string, now: number): Promise<HolderWaiting>;
  /**
   * The live waiters of every leased key (epoch above 0), one row per key a waiter waits on, in key
   * order (bytewise), each key's in service order as `waiters` gives them: one query that finds the
   * live waiters by their deadline and looks up only their keys, never every key ever leased.
   */
  liveWaiters(now: number): Promise<KeyWaiterRow[]>;
  history(filter: { key?: string; leaseId?: string }): Promise<LeaseEvent[]>;
  /**
   * Retention: deletes the history events recorded before `before` (the store's time), except each
   * key's latest event, which its next event links to; returns how many went.
   */
  pruneHistory(before: number): Promise<number>;
  /**
   * Raises every key's epoch by `cmd.margin`, and the floor that keys first leased later start from
   * by the same, so that no epoch issued before can be issued again (after a restore from a backup,
   * or a database recovered to an earlier point). With a margin above 0 every live lease ends
   * (EXPIRED, an EXPIRE event per key with `cmd.actor`): its holder is fenced out. Always appends
   * one record (returned) to the append-only list of bumps. Blocks concurrent acquisitions while it
   * runs, so no key escapes the bump.
   */
  bumpEpochs(cmd: EpochBumpCommand): Promise<EpochBump>;
  /** Every bump recorded, oldest first. */
  epochBumps(): Promise<EpochBump[]>;
}

export type EpochBumpKind = 'RESTORE' | 'BUMP';

export interface EpochBumpCommand {
  kind: EpochBumpKind;
  /** Added to every epoch and to the floor; 0 records the event and changes no epoch. */
  margin: number;
  actor: string;
  reason: string;
  /** What the record says about its cause (for a restore: the backup's receipt head, graph revision, epochs). */
  detail: Record<string, unknown>;
  /** Lease time (ignored by engines whose lease time is the database's clock). */
  now: number;
}

export interface EpochBump {
  seq: number;
  at: number;
  kind: EpochBumpKind;
  margin: number;
  /** The epoch a key leased for the first time starts above from now on (the sum of all margins). */
  floor: number;
  /** Keys whose epoch was raised. */
  keys: number;
  /** Live leases ended. */
  leases_ended: number;
  /** The highest epoch of any key after the bump (0 when none). */
  max_epoch: number;
  actor: string;
  reason: string;
  detail: Record<string, unknown>;
}

/**
 * The highest epoch (or floor of new keys) an epoch bump may leave: 2^52. Epochs are JavaScript numbers
 * on the wire and in the fence, exact only up to 2^53 (Number.MAX_SAFE_INTEGER): past it two epochs read
 * as one, so a holder could not be told from the one after it. The half left above is for acquisitions
 * (each adds one), which no deployment exhausts; a bump (each adds up to MAX_EPOCH_MARGIN) could.
 */
export const MAX_BUMPED_EPOCH = 2 ** 52;

/** UNPROCESSABLE, before anything is changed, when a bump of `margin` would carry `highest` (the highest epoch or floor now) past MAX_BUMPED_EPOCH. */
export function checkBumpHeadroom(highest: number, margin: number): void {
  if (highest + margin <= MAX_BUMPED_EPOCH) return;
  throw new WritError('UNPROCESSABLE', `an epoch bump of ${margin} would raise the highest fencing epoch (or floor of new keys), ${highest}, past ${MAX_BUMPED_EPOCH}: `
    + `epochs beyond 2^53 cannot be told apart, so it is refused and nothing changed (the most this store can still be bumped by is ${Math.max(0, MAX_BUMPED_EPOCH - highest)})`, { highest, margin, max_bumped_epoch: MAX_BUMPED_EPOCH });
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
}

export type AcquireOutcome =
  | { granted: true; epochs: Record<string, number>; expiresAt: number; preempted: PreemptedLease[] }
  | {
      granted: false;
      /** The first key (in canonical order) that could not be taken. */
      key: string;
      holder: string | null;
      expiresAt: number | null;
      /**
       * True when the key is free (or expired) but reserved for a queued waiter ahead of the caller (on
       * the key or a related one: see LeaseRepository).
       */
      queued: boolean;
      /**
       * Set when what is held is not `key` but a related key (`key`'s root, or one of its fields' keys):
       * `holder` and `expiresAt` are then that key's.
       */
      heldKey?: string;
      /**
       * True when a lease with `cmd.leaseId` exists already (its token was used before: this may be a
       * retry of the acquisition that made it); `key` is then the first key, and nothing was taken.
       */
      tokenUsed?: true;
      /** The store's clock at the refusal, where the engine keeps lease time itself (see FenceState.now). */
      now?: number;
    };

export interface RenewCommand {
  leaseId: string;
  tokenHash: string;
  /** New ttl; null keeps the lease's duration. */
  ttlMs: number | null;
  now: number;
}

export interface ReleaseCommand {
  leaseId: string;
  tokenHash: string;
  now: number;
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

export interface HolderWaiting {
  waiting: number;
  firstDeadlineInMs: number | null;
}

export interface KeyWaiterRow extends WaiterRow {
  key: string;
}

export interface LeaseKeyQuery {
  /** That key only. */
  key?: string;
  /** The key and its fields' keys (`resource#field`): what a write to the resource may lease. */
  resource?: string;
  /** The keys whose recorded holder is this (held now, or lapsed without a release). */
  holder?: string;
  /** Only keys after this one (bytewise): the last key of the previous page. */
  after?: string;
  /** At most this many keys (no limit when absent). */
  limit?: number;
}

export interface LeaseKeyPage {
  keys: LeaseKeyRow[];
  /** The store's clock at the read, where it keeps lease time itself (see FenceState.now); absent when no key is returned. */
  now?: number;
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
  /**
   * The store's clock when the state was read, for engines whose lease time is the database's clock
   * (PostgreSQL: lease time never comes from a replica, so a replica with a skewed clock cannot see
   * an expired lease as live or the reverse). Absent: the caller's `now` is the lease time (SQLite).
   */
  now?: number;
}

/** The decisions each lease was taken with, so renewals can re-check their authority. */
export interface LeaseAuthorityRepository {
  record(leaseId: string, holder: string, decisions: DecisionClaims[], at: number): Promise<void>;
  get(leaseId: string): Promise<{ holder: string; decisions: DecisionClaims[] } | undefined>;
  /** Who took the lease (what a release checks): `get` without reading the decisions. */
  holderOf(leaseId: string): Promise<string | undefined>;
}

/** A declared incident (while active, preempts edges may be used in its environment). Times in ms. */
export interface IncidentRecord {
  id: string;
  declared_by: string;
  reason: string;
  decision_id: string;
  /** The environment of the decision that declared it; null for an incident declared before Writ recorded it. */
  environment: string | null;
  declared_at: number;
  ends_at: number;
  resolved_at: number | null;
}

export interface IncidentRepository {
  /** False when an incident with that id already exists. */
  declare(incident: Omit<IncidentRecord, 'resolved_at'>): Promise<boolean>;
  get(id: string): Promise<IncidentRecord | undefined>;
  resolve(id: string, at: number): Promise<void>;
  /**
   * The incidents not resolved and not ended at `now`. With `lock: 'share'` (see ReadLock) none of them
   * can be resolved until the calling transaction ends: a takeover that counted an incident commits
   * while it is still active, or not at all.
   */
  active(now: number, options?: ReadLock): Promise<IncidentRecord[]>;
}
