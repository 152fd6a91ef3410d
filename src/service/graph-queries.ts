import { WritError } from '../errors.js';
import { exportGraphDot, exportGraphJson, type AuthorityGraph, type GraphExport } from '../graph/index.js';
import type { WritContext } from './context.js';
import { parseAt } from './time.js';

/** The graph now, or as it was at a revision or a time (point-in-time audit). */
export async function graphAt(ctx: WritContext, at: string | undefined): Promise<AuthorityGraph> {
  if (at === undefined || at === '') return ctx.graph.current();
  const when = parseAt(at);
  if ('revision' in when) {
    const head = (await ctx.graph.current()).revision;
    if (when.revision > head) throw new WritError('UNPROCESSABLE', `revision ${when.revision} is ahead of the graph (head ${head})`);
    return ctx.graph.atRevision(when.revision);
  }
  return ctx.graph.atTime(when.time);
}

/** The graph (now or `at`) as data (times in ms), or as Graphviz DOT. */
export async function exportGraph(ctx: WritContext, at: string | undefined, format: 'json'): Promise<GraphExport>;
export async function exportGraph(ctx: WritContext, at: string | undefined, format: 'dot'): Promise<string>;
export async function exportGraph(ctx: WritContext, at: string | undefined, format: 'json' | 'dot'): Promise<GraphExport | string>;
export async function exportGraph(ctx: WritContext, at: string | undefined, format: 'json' | 'dot'): Promise<GraphExport | string> {
  const graph = await graphAt(ctx, at);
  return format === 'dot' ? exportGraphDot(graph) : exportGraphJson(graph);
}
