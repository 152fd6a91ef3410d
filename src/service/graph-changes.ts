import { WritError } from '../errors.js';
import { GraphHeadMoved, type AuthorityGraph } from '../graph/index.js';
import type { GraphEvent } from '../graph/model.js';
import type { GraphLogChain } from '../audit/graph-chain.js';
import type { WritContext } from './context.js';

/**
 * Validates and appends a graph change with optimistic concurrency: `plan` sees the current graph
 * and returns the events to append (or throws a WritError); if another process moved the head in
 * between, the plan runs again on the newer graph. Returns the graph revision after the change.
 */
export async function commitGraphChange(ctx: WritContext, actor: string, plan: (graph: AuthorityGraph, now: number) => GraphEvent[] | Promise<GraphEvent[]>): Promise<number> {
  for (let attempt = 0; attempt < 8; attempt++) {
    const graph = await ctx.graph.current();
    // Taken before the plan: the live graph object moves on in place while an async plan awaits, and a
    // plan made on revision N must be appended on N or not at all.
    const expected = graph.revision;
    const now = ctx.clock.now();
    const events = await plan(graph, now);
    if (events.length === 0) return expected;
    try {
      const revision = await ctx.store.readWrite(async (tx) => {
        // Read in the append's transaction, after `expected`: an older Writ's append after that moves the head (GraphHeadMoved), and the next attempt sees it here.
        if (ctx.config.graphRequireHashes) await refuseUnhashedTail(tx.graph);
        return tx.graph.append(events, actor, now, expected);
      });
      // This process sees its own change at once, whether or not its graph is fed by notifications.
      ctx.graph.feedHead(revision);
      await ctx.graph.current();
      return revision;
    } catch (e) {
      // Told of the newer head, an operation's view of the graph (OperationGraph) asks the log again.
      if (e instanceof GraphHeadMoved) {
        ctx.graph.feedHead(e.actual);
        continue;
      }
      throw e;
    }
  }
  throw new WritError('OVERLOADED', 'the graph kept changing under this request; retry');
}

/**
 * GRAPH_LOG_UNHASHED when the graph log ends with events a Writ from before its hash chain appended:
 * with WRIT_GRAPH_REQUIRE_HASHES the next append refuses them instead of hashing them (which would make
 * them part of the chain, unseen).
 */
async function refuseUnhashedTail(graph: GraphLogChain): Promise<void> {
  const head = await graph.chainHead();
  if (head.hashed >= head.revision) return;
  const span = head.revision === head.hashed + 1 ? `graph event ${head.revision} has` : `graph events ${head.hashed + 1}..${head.revision} have`;
  throw new WritError(
    'GRAPH_LOG_UNHASHED',
    `${span} no hash (appended by a Writ from before the graph log's hash chain: a replica not upgraded?), and every event must have one (WRIT_GRAPH_REQUIRE_HASHES): the change was refused rather than hashing them; nothing was changed. Stop or upgrade that replica; to accept the events, turn the setting off for one graph change, then on again`,
    { hashed_revision: head.hashed, revision: head.revision },
  );
}

/**
 * Where the service's graph writes (registerPrincipal, createGrant, …) go: the live graph, one commit
 * each (`liveGraphWriter`), or a working copy whose changes are committed together later — a graph
 * manifest is applied all or nothing that way (manifest.ts).
 */
export interface GraphWriter {
  /** The graph the next change is planned on. */
  current(): Promise<AuthorityGraph>;
  /** Plans and records one change (as commitGraphChange); the graph revision after it. */
  commit(plan: (graph: AuthorityGraph, now: number) => GraphEvent[]): Promise<number>;
}

export function liveGraphWriter(ctx: WritContext, actor: string): GraphWriter {
  return { current: () => ctx.graph.current(), commit: (plan) => commitGraphChange(ctx, actor, plan) };
}

/**
 * A writer on a fork of `graph`: each change is planned on the fork and applied to it at once (so the
 * next one sees it), and its events are added to `events`, to be appended in one commit.
 */
export function forkGraphWriter(graph: AuthorityGraph, actor: string, now: number, events: GraphEvent[]): GraphWriter {
  const work = graph.fork();
  return {
    current: async () => work,
    commit: async (plan) => {
      const planned = plan(work, now);
      for (const event of planned) work.apply({ revision: work.revision + 1, at: now, actor, event });
      events.push(...planned);
      return work.revision;
    },
  };
}
