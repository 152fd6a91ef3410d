import { LiveGraph } from '../../src/graph/index.js';
import type { WritContext } from '../../src/service/index.js';

/**
 * Replica `ctx` as one whose in-memory graph is fed by notifications (as on PostgreSQL) and was last
 * told of `revision`: it has not heard of anything later (a notification on the way, its listening
 * connection down) until something tells it of a newer head.
 */
export async function replicaBehind(ctx: WritContext, revision: number): Promise<WritContext> {
  const graph = new LiveGraph({
    head: () => ctx.store.read((tx) => tx.graph.head()),
    read: (after, upTo) => ctx.store.read((tx) => tx.graph.read(after, upTo)),
    revisionAt: (time) => ctx.store.read((tx) => tx.graph.revisionAt(time)),
  }, { fed: true });
  graph.feedHead(revision);
  await graph.current();
  return { ...ctx, graph };
}
