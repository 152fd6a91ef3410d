import type { Clock } from '../clock.js';
import type { WritConfig } from '../config/index.js';
import { OperationGraph, type GraphReader } from '../graph/index.js';
import type { KeyRing, ReplayGuard } from '../decision/index.js';
import type { PolicyEngine } from '../policy/types.js';
import type { StoreTx, WritStore } from '../store/contract.js';
import type { LeaseManager } from '../lease/index.js';
import type { ReceiptLog } from '../audit/index.js';
import type { UpstreamRouter } from '../gateway/upstream-router.js';
import type { DecisionLog } from '../decision-log/index.js';
import type { DatabaseClock } from './database-clock.js';

/** Receives what the use cases did, for metrics and logs; the HTTP layer plugs Prometheus in here. */
export interface ServiceObserver {
  decision(result: 'allow' | 'deny' | 'error', seconds: number): void;
  /** An acquisition whose caller went away before its answer, and what became of it (see acquireLeases' `callerGone`). */
  abandonedAcquisition(event: AbandonedAcquisition): void;
}

/**
 * What became of an acquisition whose caller went away before it was answered: `withdrawn` (it left
 * the queue, or never started, and took nothing), `released` (granted as the caller went, with a
 * token Writ made, which no one can ever learn: given back at once), `released_after_preemption` (the
 * same for a takeover: the holders it preempted stay fenced out, their takeover wasted), `kept_for_replay`
 * (granted with the caller's own token: kept until its TTL, for the caller to claim by asking again with that token).
 */
export interface AbandonedAcquisition {
  outcome: 'withdrawn' | 'released' | 'released_after_preemption' | 'kept_for_replay';
  principal: string;
  keys: string[];
  /** The lease granted (null when withdrawn). */
  lease_id: string | null;
  /** A takeover granted: the leases it preempted (their holders are fenced out, whatever became of it). */
  preempted?: { lease_id: string; holder: string; key: string }[];
}

export const silentObserver: ServiceObserver = { decision: () => {}, abandonedAcquisition: () => {} };

/** Everything a use case needs. Built once by `openWrit`; tests may assemble their own. */
export interface WritContext {
  readonly config: WritConfig;
  readonly clock: Clock;
  /** The datastore (SQLite or PostgreSQL): what must commit together runs in one `store.readWrite`. */
  readonly store: WritStore;
  /** The live authority graph (LiveGraph), or one operation's view of it (`forOneOperation`). */
  readonly graph: GraphReader;
  readonly replay: ReplayGuard;
  readonly keys: KeyRing;
  readonly policy: PolicyEngine;
  readonly leases: LeaseManager<StoreTx>;
  readonly receipts: ReceiptLog;
  readonly upstreams: UpstreamRouter;
  /** Every decision becomes one event here (OPA's decision log shape); a no-op when no sink is configured. */
  readonly decisionLog: DecisionLog;
  /** This replica's clock against the database's, where the store has a clock of its own (PostgreSQL); absent on SQLite. */
  readonly databaseClock?: DatabaseClock;
  observer: ServiceObserver;
}

/**
 * The context for one operation (a request, a lease stream message): the same, except that the
 * authority graph is checked for changes once, at its first use, not at every step of the operation
 * that reads it (see OperationGraph). Given an operation's context, a fresh one: its next look asks again.
 */
export function forOneOperation(ctx: WritContext): WritContext {
  return { ...ctx, graph: OperationGraph.over(ctx.graph) };
}
