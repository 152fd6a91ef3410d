import type { Clock } from '../clock.js';
import type { TxRunner } from '../transactions.js';
import { WritError } from '../errors.js';
import { canonicalKeyOrder } from './canonical-order.js';
import { toLeaseRecord } from './lease-record.js';
import { checkTtl, checkWait, resolveLeaseOptions, type ResolvedLeaseOptions } from './options.js';
import {
  NEWCOMER_TICKET, type AcquireOutcome, type EpochBump, type EpochBumpCommand, type LeaseKeyQuery, type LeaseRefusal, type HolderWaiting, type LeaseRepository, type WaiterRow,
} from './repository.js';
import { hashLeaseToken, leaseCredentialsOf, leaseIdOfToken, newLeaseCredentials, type LeaseCredentials } from './token.js';
import type {
  AcquireRequest,
  FenceCheck,
  FenceRequest,
  LeaseEvent,
  LeaseGrant,
  LeaseManagerOptions,
  LeaseRecord,
  ReleasedLease,
  RenewedLease,
} from './types.js';

/** The largest epoch margin one bump may add (many bumps may still add up: the store refuses one that would leave an epoch past MAX_BUMPED_EPOCH, 2^52). */
export const MAX_EPOCH_MARGIN = 1_000_000_000_000;

/**
 * Pages of the list of lease keys (GET /v1/leases, writ lease ls): as many as asked up to maxLimit,
 * defaultLimit when not asked, as receipts are paged (RECEIPT_PAGE).
 */
export const LEASE_PAGE = { defaultLimit: 100, maxLimit: 1000 } as const;

/** UNPROCESSABLE unless the margin is an integer from 0 to MAX_EPOCH_MARGIN and the reason says something. */
export function checkEpochBump(cmd: { margin: number; reason: string }): void {
  if (!Number.isSafeInteger(cmd.margin) || cmd.margin < 0 || cmd.margin > MAX_EPOCH_MARGIN) {
    throw new WritError('UNPROCESSABLE', `the epoch margin must be an integer from 0 to ${MAX_EPOCH_MARGIN}, not ${String(cmd.margin)}`);
  }
  if (typeof cmd.reason !== 'string' || cmd.reason.trim().length === 0) throw new WritError('UNPROCESSABLE', 'an epoch bump needs a reason (it is recorded)');
}

const REFUSAL_CODES = {
  NOT_FOUND: 'LEASE_NOT_FOUND',
  TOKEN_MISMATCH: 'LEASE_TOKEN_MISMATCH',
  PREEMPTED: 'LEASE_PREEMPTED',
  EXPIRED: 'LEASE_EXPIRED',
} as const satisfies Record<LeaseRefusal, string>;

/**
 * An acquisition given up because its caller went away (AcquireRequest.signal): it left the queue and
 * took nothing. Its answer reaches no one; the code is the one a shutting-down Writ gives a waiter.
 */
export class AcquisitionWithdrawn extends WritError {
  constructor(readonly keys: readonly string[], readonly queued: boolean) {
    super('OVERLOADED', `the caller went away: the acquisition of ${keys.join(', ')} ${queued ? 'left the queue' : 'stopped'} and took nothing`, { retry_after_ms: 0 });
  }
}

/** The transaction handle the lease manager needs: the lease port, and whatever else the caller commits with it. */
export interface LeaseTx {
  readonly leases: LeaseRepository;
}

/** The caller's own writes, in the lease operation's transaction, only when the operation succeeds. */
export type AlsoCommit<Tx> = (tx: Tx) => Promise<void>;

export interface LeaseCallOptions<Tx> {
  alsoCommit?: AlsoCommit<Tx>;
  /**
   * The caller's own check, in the operation's transaction and asked together with it (one message on
   * engines that batch): if it throws, the operation is rolled back and its error is the answer.
   */
  check?: (tx: Tx) => Promise<void>;
}

/** The credentials of a token the caller made (AcquireRequest.token); UNPROCESSABLE unless it has a token's shape. */
function callersCredentials(token: unknown): LeaseCredentials {
  const credentials = typeof token === 'string' ? leaseCredentialsOf(token) : null;
  if (credentials === null) throw new WritError('UNPROCESSABLE', 'a lease token must be 43 base64url characters: 32 bytes from a cryptographically secure random source, fresh for each lease');
  return credentials;
}

/** Runs `op` with the caller's check beside it; the check's refusal wins. */
async function withCheck<Tx, T>(tx: Tx, options: Pick<LeaseCallOptions<Tx>, 'check'>, op: () => Promise<T>): Promise<T> {
  if (!options.check) return op();
  const [, o] = await Promise.all([options.check(tx), op()]);
  return o;
}

/**
 * Coordination: who may write a key right now. Leases, tokens, fencing epochs, the wait queue and
 * preemption. It never consults the authority graph: the caller (the service layer) has already
 * checked the decision, and passes the governed `priority` and the `preempt` verdict in. Generic in
 * the transaction handle, so the caller's own writes (`alsoCommit`: the authority record, the spent
 * assertion) commit in the same transaction as the lease operation, or not at all.
 */
export class LeaseManager<Tx extends LeaseTx = LeaseTx> {
  private readonly options: ResolvedLeaseOptions;
  /** Queued acquisitions of this process between polls: a release here wakes them at once (another process's release is seen at the next poll). */
  private readonly sleepers = new Set<() => void>();
  /** Releases in this process so far: a waiter that was polling when one happened does not sleep after it. */
  private releases = 0;
  /** Set when the process shuts down: queued acquisitions give up (OVERLOADED) instead of holding the drain. */
  private stopped = false;

  constructor(
    private readonly store: TxRunner<Tx>,
    private readonly clock: Clock,
    options: LeaseManagerOptions = {},
  ) {
    this.options = resolveLeaseOptions(options);
  }

  /**
   * Takes every key of `req.resources` or none. Busy → RESOURCE_BUSY at once, or, with `waitMs`, a
   * place in each key's queue until the deadline (then LEASE_WAIT_TIMEOUT). Invalid input → UNPROCESSABLE.
   */
  async acquire(req: AcquireRequest<Tx>): Promise<LeaseGrant> {
    const keys = canonicalKeyOrder(req.resources);
    if (typeof req.holder !== 'string' || req.holder.length === 0) throw new WritError('UNPROCESSABLE', 'holder is required');
    if (!Number.isSafeInteger(req.priority)) throw new WritError('UNPROCESSABLE', 'priority must be an integer');
    const ttlMs = checkTtl(req.ttlMs, this.options);
    const preempt = req.preempt === true;
    const waitMs = preempt ? 0 : checkWait(req.waitMs, this.options);
    const instance = req.instance ?? null;

    const credentials = req.token === undefined ? newLeaseCredentials(this.options.randomBytes, this.clock.now()) : callersCredentials(req.token);
    const { token, tokenHash, leaseId } = credentials;
    const deadline = this.clock.now() + waitMs;
    let ticket = NEWCOMER_TICKET;
    let granted = false;
    try {
      for (;;) {
        if (req.signal?.aborted) throw new AcquisitionWithdrawn(keys, ticket !== NEWCOMER_TICKET);
        const now = this.clock.now();
        const releasesBefore = this.releases;
        const command = {
          keys, leaseId, tokenHash, holder: req.holder, instance, priority: req.priority, ttlMs, now, preempt, ticket,
          ...(preempt && req.preemptable ? { preemptable: req.preemptable } : {}),
        };
        const outcome = await this.store.readWrite(async (tx) => {
          const o = await withCheck(tx, req, () => tx.leases.acquire(command));
          // The caller's own writes: if they throw, the acquisition rolls back with them.
          if (o.granted && req.alsoCommit) await req.alsoCommit(tx, leaseId, o.preempted);
          return o;
        });
        if (outcome.granted) {
          granted = true;
          return { lease_id: leaseId, token, epochs: outcome.epochs, expires_at: outcome.expiresAt, preempted: outcome.preempted, replayed: false };
        }
        // The caller's token was used already: this is a retry of the acquisition that used it, or a mistake.
        if (outcome.tokenUsed) return await this.replay(credentials, keys, req.holder);
        // Held or reserved, and for how long, by the store's clock where it keeps lease time itself.
        if (waitMs === 0) throw this.busy('RESOURCE_BUSY', outcome, outcome.now ?? now);
        if (now >= deadline) throw this.busy('LEASE_WAIT_TIMEOUT', outcome, outcome.now ?? now, waitMs);
        if (ticket === NEWCOMER_TICKET) {
          const waiter = { keys, holder: req.holder, instance, priority: req.priority, enqueuedAt: now, deadline };
          ticket = await this.store.readWrite(async (tx) => {
            // Bounded queues: past the bound a waiter costs memory and polls and would never be served in time.
            // And bounded per holder across keys: each waiter polls the store, whichever key it waits on.
            const mine = await tx.leases.waitingOf(req.holder, now);
            if (mine.waiting >= this.options.maxWaitersPerPrincipal) throw this.holderQueueFull(req.holder, mine);
            for (const key of keys) {
              const queued = (await tx.leases.waiters(key, now)).length;
              if (queued >= this.options.maxWaitersPerKey) throw this.queueFull(key, queued, outcome, now);
            }
            return tx.leases.enqueue(waiter);
          });
        }
        if (this.releases === releasesBefore && !this.stopped && !req.signal?.aborted) await this.nap(Math.min(this.pollDelay(), Math.max(0, deadline - now)), req.signal);
        if (this.stopped) {
          throw new WritError('OVERLOADED', `this Writ is shutting down; stopped waiting for ${outcome.key}, retry (another replica, or this one once restarted)`, {
            key: outcome.key, retry_after_ms: 1000,
          });
        }
      }
    } finally {
      // A granted waiter already left the queue in the granting transaction.
      if (ticket !== NEWCOMER_TICKET && !granted) {
        const mine = ticket;
        await this.store.readWrite((tx) => tx.leases.dequeue(mine));
      }
    }
  }

  /** Shutdown: every acquisition waiting in a queue of this process gives up now with OVERLOADED (503), and none waits from now on. */
  stopWaiting(): void {
    this.stopped = true;
    for (const wake of [...this.sleepers]) wake();
  }

  /**
   * Extends the lease (all its keys) by `ttlMs` (default: its current duration) from now. `alsoCommit`
   * runs in the renewing transaction when the renewal succeeds (see AcquireRequest.alsoCommit);
   * `check` beside the renewal, whose refusal rolls it back.
   */
  async renew(leaseId: string, token: string, ttlMs?: number, options: LeaseCallOptions<Tx> = {}): Promise<RenewedLease> {
    const ttl = ttlMs === undefined ? null : checkTtl(ttlMs, this.options);
    const command = { leaseId: String(leaseId), tokenHash: hashLeaseToken(String(token)), ttlMs: ttl, now: this.clock.now() };
    const outcome = await this.store.readWrite(async (tx) => {
      const o = await withCheck(tx, options, () => tx.leases.renew(command));
      if (o.ok && options.alsoCommit) await options.alsoCommit(tx);
      return o;
    });
    if (!outcome.ok) throw this.refused(outcome.reason, leaseId);
    return { lease_id: leaseId, epochs: outcome.epochs, expires_at: outcome.expiresAt };
  }

  /** Frees every key of the lease; their epochs stay (the next holder gets epoch + 1). `alsoCommit` and `check` as for renew. */
  async release(leaseId: string, token: string, options: LeaseCallOptions<Tx> = {}): Promise<ReleasedLease> {
    const command = { leaseId: String(leaseId), tokenHash: hashLeaseToken(String(token)), now: this.clock.now() };
    const outcome = await this.store.readWrite(async (tx) => {
      const o = await withCheck(tx, options, () => tx.leases.release(command));
      if (o.ok && options.alsoCommit) await options.alsoCommit(tx);
      return o;
    });
    if (!outcome.ok) throw this.refused(outcome.reason, leaseId);
    this.released();
    return { lease_id: leaseId, epochs: outcome.epochs };
  }

  /**
   * A lease was released (here, or by another process or replica sharing the store, as its change
   * feed says): queued acquisitions of this process try again now instead of at their next poll.
   */
  released(): void {
    this.releases++;
    for (const wake of [...this.sleepers]) wake();
  }

  /**
   * The gateway's fence: passes only if `principal` holds `key` right now with this token, and `epoch`
   * is the key's current epoch (its high-water mark). Otherwise LEASE_REQUIRED (no token),
   * STALE_FENCING_EPOCH (epoch is not the current one), LEASE_PREEMPTED, LEASE_EXPIRED (released or
   * expired) or LEASE_TOKEN_MISMATCH (not this principal's current token for this key).
   */
  async validateFence(req: FenceRequest): Promise<FenceCheck> {
    if (typeof req.token !== 'string' || req.token.length === 0) {
      throw new WritError('LEASE_REQUIRED', `writing ${req.key} requires a lease token`, { key: req.key });
    }
    if (!Number.isSafeInteger(req.epoch)) throw new WritError('UNPROCESSABLE', 'the fencing epoch must be an integer', { key: req.key });
    const token = req.token;
    const state = await this.store.read((tx) => tx.leases.fenceState(req.key, hashLeaseToken(token), leaseIdOfToken(token)));
    const { key: row, lease } = state;
    // The store's clock where it keeps lease time itself (PostgreSQL), else this process's.
    const now = state.now ?? req.now ?? this.clock.now();
    const current = row?.epoch ?? 0;
    if (req.epoch !== current) {
      throw new WritError('STALE_FENCING_EPOCH', `fencing epoch ${req.epoch} is not ${req.key}'s current epoch ${current}`, {
        key: req.key,
        epoch: req.epoch,
        current_epoch: current,
      });
    }
    const idMatches = (id: string | null) => req.lease_id === undefined || req.lease_id === id;
    if (row && lease && row.lease_id === lease.lease_id && idMatches(row.lease_id)) {
      if (row.holder !== req.principal) throw new WritError('LEASE_TOKEN_MISMATCH', `the token is not ${req.principal}'s lease on ${req.key}`, { key: req.key });
      if (row.expires_at === null || row.expires_at <= now) {
        throw new WritError('LEASE_EXPIRED', `the lease on ${req.key} expired`, { key: req.key, lease_id: row.lease_id, expires_at: row.expires_at });
      }
      return { key: req.key, lease_id: row.lease_id, epoch: row.epoch, expires_at: row.expires_at };
    }
    if (lease && lease.holder === req.principal && lease.resources.includes(req.key) && idMatches(lease.lease_id)) {
      if (lease.state === 'PREEMPTED') throw new WritError('LEASE_PREEMPTED', `the lease on ${req.key} was preempted`, { key: req.key, lease_id: lease.lease_id });
      throw new WritError('LEASE_EXPIRED', `the lease on ${req.key} was released or expired`, { key: req.key, lease_id: lease.lease_id });
    }
    if (!row || row.holder === null) throw new WritError('LEASE_REQUIRED', `no lease is held on ${req.key}`, { key: req.key });
    throw new WritError('LEASE_TOKEN_MISMATCH', `the token is not ${req.principal}'s current lease on ${req.key}`, { key: req.key });
  }

  /** The key's fencing high-water mark (0 if never leased). */
  async currentEpoch(key: string): Promise<number> {
    const { keys: [row] } = await this.store.read((tx) => tx.leases.listKeys({ key }));
    return row?.epoch ?? 0;
  }

  /** The key's lease record; its state judged as list() judges it. */
  async describe(key: string): Promise<LeaseRecord | undefined> {
    const [record] = await this.list({ key });
    return record;
  }

  /**
   * Keys ever leased, narrowed and paged by `query` (see LeaseKeyQuery), in key order. Their state
   * (HELD or EXPIRED) is judged by the store's clock where it keeps lease time (PostgreSQL), read with
   * the rows, as held() and the acquisitions judge it: never by this process's clock, which may be off.
   */
  async list(query: LeaseKeyQuery = {}): Promise<LeaseRecord[]> {
    const mine = this.clock.now();
    const { keys, now } = await this.store.read((tx) => tx.leases.listKeys(query));
    return keys.map((r) => toLeaseRecord(r, now ?? mine));
  }

  /**
   * The keys held now (state HELD), in key order: one read of the keys with a holder, never of every
   * key ever leased. Their state is judged by the store's clock where it keeps lease time (PostgreSQL).
   */
  async held(): Promise<LeaseRecord[]> {
    const mine = this.clock.now();
    const { keys, now } = await this.store.read((tx) => tx.leases.heldKeys(mine));
    return keys.map((r) => toLeaseRecord(r, now ?? mine));
  }

  /** Live waiters of a key, in service order (priority, then age). */
  async waiters(key: string): Promise<WaiterRow[]> {
    const now = this.clock.now();
    return this.store.read((tx) => tx.leases.waiters(key, now));
  }

  /**
   * Every key with live waiters, each in service order: one query for the live waiters of every key
   * (found by their deadline), never a read of every key ever leased.
   */
  async queues(): Promise<{ key: string; waiters: WaiterRow[] }[]> {
    const rows = await this.store.read((tx) => tx.leases.liveWaiters(this.clock.now()));
    const queues: { key: string; waiters: WaiterRow[] }[] = [];
    for (const { key, ...waiter } of rows) {
      const last = queues.at(-1);
      if (last?.key === key) last.waiters.push(waiter);
      else queues.push({ key, waiters: [waiter] });
    }
    return queues;
  }

  /**
   * Retention of the lease history: deletes events older than `olderThanMs` (each key keeps its
   * latest), returns how many. The fencing epochs themselves live on the keys and are never pruned.
   */
  async pruneHistory(olderThanMs: number): Promise<number> {
    if (!Number.isSafeInteger(olderThanMs) || olderThanMs < 0) throw new WritError('UNPROCESSABLE', 'the age to prune the lease history at must be a non-negative number of milliseconds');
    const before = this.clock.now() - olderThanMs;
    return this.store.readWrite((tx) => tx.leases.pruneHistory(before));
  }

  /** The append-only lease history (acquire, renew, release, preempt, expire), in order. */
  async history(filter: { key?: string; leaseId?: string } = {}): Promise<LeaseEvent[]> {
    return this.store.read((tx) => tx.leases.history(filter));
  }

  /**
   * Raises every key's epoch, and the floor of keys leased for the first time later, by `margin`,
   * ending every live lease (see LeaseRepository.bumpEpochs), and records it. `margin` 0 only
   * records (a restore of a backup that is known to be the latest state).
   */
  async bumpEpochs(cmd: Omit<EpochBumpCommand, 'now'>): Promise<EpochBump> {
    checkEpochBump(cmd);
    const bump = await this.store.readWrite((tx) => tx.leases.bumpEpochs(Object.assign({}, cmd, { now: this.clock.now() })));
    if (bump.leases_ended > 0) this.released();
    return bump;
  }

  /** Every epoch bump and restore recorded, oldest first. */
  async epochBumps(): Promise<EpochBump[]> {
    return this.store.read((tx) => tx.leases.epochBumps());
  }

  /** Sleeps until the next poll, until a lease is released in this process, or until `signal` aborts, whichever comes first. */
  private nap(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const wake = () => {
        this.sleepers.delete(wake);
        signal?.removeEventListener('abort', wake);
        resolve();
      };
      this.sleepers.add(wake);
      signal?.addEventListener('abort', wake, { once: true });
      void this.options.sleep(ms).then(wake);
    });
  }

  private pollDelay(): number {
    const { pollMinMs, pollMaxMs } = this.options;
    return pollMinMs + Math.random() * (pollMaxMs - pollMinMs);
  }

  private busy(code: 'RESOURCE_BUSY' | 'LEASE_WAIT_TIMEOUT', o: Extract<AcquireOutcome, { granted: false }>, now: number, waitedMs?: number): WritError {
    const held = o.holder !== null && o.expiresAt !== null && o.expiresAt > now;
    const retryAfterMs = held ? Math.max(1, o.expiresAt! - now) : this.options.queuedRetryAfterMs;
    // A related key (the resource of a field key, or a field of a resource key: src/wire/key-family.ts) may be what is held.
    const overlap = held && o.heldKey !== undefined && o.heldKey !== o.key ? o.heldKey : undefined;
    const why = overlap ? `${overlap}, held by ${o.holder}, overlaps ${o.key}` : held ? `held by ${o.holder}` : 'reserved for a queued waiter';
    const message = code === 'RESOURCE_BUSY' ? `${o.key} is ${overlap ? 'busy: ' : ''}${why}` : `${o.key} stayed busy (${why}) for ${waitedMs} ms`;
    return new WritError(code, message, {
      key: o.key,
      ...(overlap === undefined ? {} : { held_key: overlap }),
      holder: held ? o.holder : null,
      expires_at: held ? o.expiresAt : null,
      retry_after_ms: retryAfterMs,
      queued: !held,
      ...(waitedMs === undefined ? {} : { waited_ms: waitedMs }),
    });
  }

  private queueFull(key: string, queued: number, o: Extract<AcquireOutcome, { granted: false }>, now: number): WritError {
    const held = o.holder !== null && o.expiresAt !== null && o.expiresAt > now;
    const retryAfterMs = held ? Math.max(1, o.expiresAt! - now) : this.options.queuedRetryAfterMs;
    return new WritError('OVERLOADED', `${queued} callers already wait for ${key}, the most its queue holds (WRIT_LEASE_MAX_WAITERS); retry later`, {
      key, waiters: queued, max_waiters: this.options.maxWaitersPerKey, retry_after_ms: retryAfterMs,
    });
  }

  private holderQueueFull(holder: string, mine: HolderWaiting): WritError {
    // A place is sure to free when the first of the holder's waits reaches its deadline (sooner if one is served).
    const retryAfterMs = Math.max(1, mine.firstDeadlineInMs ?? this.options.queuedRetryAfterMs);
    return new WritError('OVERLOADED', `${holder} already keeps ${mine.waiting} acquisitions waiting, the most one principal may (WRIT_LEASE_MAX_WAITERS_PER_PRINCIPAL); retry later`, {
      holder, waiting: mine.waiting, max_waiters_per_principal: this.options.maxWaitersPerPrincipal, retry_after_ms: retryAfterMs,
    });
  }

  /**
   * An acquisition asked again with the token of a lease that exists: that lease, if it is the same
   * holder's, on the same keys, and still live; otherwise why not. Read after the refusal, in a
   * transaction of its own: the lease was committed before the refusal saw it.
   */
  private async replay(credentials: LeaseCredentials, keys: readonly string[], holder: string): Promise<LeaseGrant> {
    const { token, tokenHash, leaseId } = credentials;
    const { lease, now } = await this.store.read((tx) => tx.leases.fenceState(keys[0]!, tokenHash, leaseId));
    // Never say whose: the token was chosen by the caller, and may be a copy of another's.
    if (!lease || lease.holder !== holder) {
      throw new WritError('IDEMPOTENCY_MISMATCH', 'this lease token was already used by another acquisition: send a fresh token (32 random bytes) for a new lease');
    }
    const sameKeys = lease.resources.length === keys.length && keys.every((k) => lease.resources.includes(k));
    if (!sameKeys) {
      throw new WritError('IDEMPOTENCY_MISMATCH', `this lease token was used for lease ${leaseId} on ${lease.resources.join(', ')}, not on ${keys.join(', ')}: send a fresh token for a new lease`, { lease_id: leaseId });
    }
    if (lease.state === 'PREEMPTED') {
      throw new WritError('LEASE_PREEMPTED', `lease ${leaseId}, taken with this token, was preempted since: a new acquisition needs a fresh token`, { lease_id: leaseId });
    }
    if (lease.state !== 'ACTIVE' || lease.expires_at <= (now ?? this.clock.now())) {
      throw new WritError('LEASE_EXPIRED', `lease ${leaseId}, taken with this token, has ended (${lease.state === 'ACTIVE' ? 'expired' : lease.state.toLowerCase()}): a new acquisition needs a fresh token`, { lease_id: leaseId });
    }
    return { lease_id: leaseId, token, epochs: lease.epochs, expires_at: lease.expires_at, preempted: [], replayed: true };
  }

  private refused(reason: LeaseRefusal, leaseId: string): WritError {
    const messages: Record<LeaseRefusal, string> = {
      NOT_FOUND: `no lease ${leaseId}`,
      TOKEN_MISMATCH: `the token is not the holder's token for lease ${leaseId}`,
      PREEMPTED: `lease ${leaseId} was preempted`,
      EXPIRED: `lease ${leaseId} is expired or released`,
    };
    return new WritError(REFUSAL_CODES[reason], messages[reason], { lease_id: leaseId });
  }
}
