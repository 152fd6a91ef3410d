import { WritError } from '../errors.js';
import type { AuthorityGraph } from '../graph/index.js';
import type { GraphEvent } from '../graph/model.js';
import { GraphHeadMoved } from '../store/types.js';
import type { WritContext } from './context.js';

/**
 * Validates and appends a graph change with optimistic concurrency: `plan` sees the current graph
 * and returns the events to append (or throws a WritError); if another process moved the head in
 * between, the plan runs again on the newer graph. Returns the graph revision after the change.
 */
export function commitGraphChange(ctx: WritContext, actor: string, plan: (graph: AuthorityGraph, now: number) => GraphEvent[]): number {
  for (let attempt = 0; attempt < 8; attempt++) {
    const graph = ctx.graph.current();
    const now = ctx.clock.now();
    const events = plan(graph, now);
    if (events.length === 0) return graph.revision;
    try {
      const revision = ctx.log.append(events, actor, now, graph.revision);
      ctx.graph.current();
      return revision;
    } catch (e) {
      if (e instanceof GraphHeadMoved) continue;
      throw e;
    }
  }
  throw new WritError('OVERLOADED', 'the graph kept changing under this request; retry');
}
