import type { GraphLogChain } from '../audit/graph-chain.js';
import type { ReceiptRepository } from '../audit/repository.js';
import type { SingleUseStore } from '../decision/single-use.js';
import type { GraphEventStore } from '../graph/event-store.js';
import type { IncidentRepository, LeaseAuthorityRepository, LeaseRepository } from '../lease/repository.js';
import type { TxRunner } from '../transactions.js';

export type { TxRunner };

/**
 * The datastore contract: everything Writ keeps durably, behind one interface with one
 * implementation per engine (src/store/sqlite: the embedded default; src/store/postgres: several
 * replicas on one database). The ports are owned by their domains (graph, decision, lease, audit);
 * this file only groups them. Nothing above this file sees a driver type.
 *
 * Atomicity is explicit: what must commit together runs in one `readWrite` callback, e.g. "spend the
 * caller's assertion + record the intent + spend the decision" or "take the lease + record its
 * authority + spend the assertion". The callback may run more than once when the engine retries a
 * transaction that lost a serialization race (or, see below, learns a refusal at the commit), so it must do nothing but store calls on `tx` (no
 * network, no timers, no side effects outside the store); it must not keep `tx` after it returns.
 *
 * Engine errors (busy, serialization failure, lost connection) never leave an adapter as driver
 * errors: an adapter retries where that is safe, and otherwise throws WritError `OVERLOADED` (503,
 * with `retry_after_ms`).
 * An engine error inside a callback dooms its transaction (PostgreSQL aborts it; SQLite rolls back the
 * callback's savepoint): a callback never catches one and carries on, it lets it propagate.
 *
 * Some port methods learn their outcome only at the commit (SingleUseStore.spendOrRefuse: PostgreSQL
 * sends the spend with the COMMIT, no round trip of its own). Their refusal fails the whole transaction
 * with the domain's own error, which readWrite rejects with, the same on every engine; nothing of the
 * transaction lands. A callback must not count on such a write having happened before it returns.
 *
 * Lease time: on engines that keep it themselves (PostgreSQL: the database's clock), every `now` a
 * lease method is given is ignored, and the times it returns (expiry, FenceState.now, a refusal's
 * `now`, waiter deadlines) are the database's.
 */
export interface StoreTx {
  /** The graph's event log, and its hash chain as tamper evidence reads it (src/audit/graph-chain.ts). */
  readonly graph: GraphEventStore & GraphLogChain;
  readonly singleUse: SingleUseStore;
  readonly leases: LeaseRepository;
  readonly leaseAuthority: LeaseAuthorityRepository;
  readonly incidents: IncidentRepository;
  readonly receipts: ReceiptRepository;
}

export type StoreEngine = 'sqlite' | 'postgres';

export interface WritStore extends TxRunner<StoreTx> {
  readonly engine: StoreEngine;
  /**
   * Tells `onHead` the graph's head revision whenever any process or replica appends to the graph
   * log (PostgreSQL: LISTEN/NOTIFY), and once right away (and after every reconnect, since a
   * notification may have been missed). Engines without such a feed leave it undefined: the live
   * graph then reads the head on every request.
   */
  watchGraphHead?(onHead: (head: number) => void): Promise<{ close(): Promise<void> }>;
  /**
   * Calls `onRelease` when a lease is released by any process or replica (PostgreSQL: NOTIFY), so
   * that queued acquisitions try again at once rather than at their next poll. Undefined: they poll.
   */
  watchLeaseReleases?(onRelease: () => void): Promise<{ close(): Promise<void> }>;
  /**
   * The engine's own clock, ms since the epoch (PostgreSQL: the database's, `writ_now_ms()`), read by one
   * cheap statement outside any transaction. Lease time and single-use expiry are judged by it, so a
   * replica measures its own clock against it (src/service/database-clock.ts). Undefined where the
   * engine has no clock but the process's (SQLite).
   */
  readClock?(): Promise<number>;
  /** Flushes pending commits and closes every connection. */
  close(): Promise<void>;
}
