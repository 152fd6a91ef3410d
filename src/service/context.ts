import type { Clock } from '../clock.js';
import type { WritConfig } from '../config/index.js';
import { OperationGraph, type AuthorityGraph, type GraphReader } from '../graph/index.js';
import type { KeyRing, ReplayGuard } from '../decision/index.js';
import type { PolicyEngine } from '../policy/types.js';
import type { StoreTx, WritStore } from '../store/contract.js';
import type { LeaseManager } from '../lease/index.js';
import type { ReceiptLog } from '../audit/index.js';
import type { UpstreamRouter } from '../gateway/upstream-router.js';
import type { DecisionLog } from '../decision-log/index.js';

/** Receives what the use cases did, for metrics and logs; the HTTP layer plugs Prometheus in here. */
export interface ServiceObserver {
  decision(result: 'allow' | 'deny' | 'error', seconds: number): void;
}

export const silentObserver: ServiceObserver = { decision: () => {} };

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

/**
 * This process's graph, at least at `revision` (a decision's graph revision): on PostgreSQL the graph
 * is fed by NOTIFY, so a decision made on another replica a moment ago may rest on a change this one
 * has not been told of yet, and judged on the older graph it would be refused (its owners or its chain
 * seemingly changed since it was made). Only then is the log's head asked (one read), and the graph
 * caught up to it; a revision beyond the head is never fed.
 */
export async function graphAtLeast(ctx: WritContext, revision: number): Promise<AuthorityGraph> {
  const graph = await ctx.graph.current();
  if (graph.revision >= revision) return graph;
  ctx.graph.feedHead(await ctx.store.read((tx) => tx.graph.head()));
  return ctx.graph.current();
}
