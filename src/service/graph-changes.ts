import { WritError } from '../errors.js';
import { GraphHeadMoved, type AuthorityGraph } from '../graph/index.js';
import type { GraphEvent } from '../graph/model.js';
import type { WritContext } from './context.js';

/**
 * Validates and appends a graph change with optimistic concurrency: `plan` sees the current graph
 * and returns the events to append (or throws a WritError); if another process moved the head in
 * between, the plan runs again on the newer graph. Returns the graph revision after the change.
 */
export async function commitGraphChange(ctx: WritContext, actor: string, plan: (graph: AuthorityGraph, now: number) => GraphEvent[]): Promise<number> {
  for (let attempt = 0; attempt < 8; attempt++) {
    const graph = await ctx.graph.current();
    const now = ctx.clock.now();
    const events = plan(graph, now);
    if (events.length === 0) return graph.revision;
    const expected = graph.revision;
    try {
      const revision = await ctx.store.readWrite((tx) => tx.graph.append(events, actor, now, expected));
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
