import { LiveGraph } from '../../src/graph/index.js';
import type { WritContext } from '../../src/service/index.js';

/** Replica `ctx` as one whose in-memory graph stopped at `revision`: it has not heard of anything later. */
export async function replicaBehind(ctx: WritContext, revision: number): Promise<WritContext> {
  const graph = new LiveGraph({
    head: async () => revision,
    read: (after, upTo) => ctx.store.read((tx) => tx.graph.read(after, upTo)),
    revisionAt: (time) => ctx.store.read((tx) => tx.graph.revisionAt(time)),
  });
  await graph.current();
  return { ...ctx, graph };
}
