import { WritError } from '../errors.js';
import { exportGraphDot, exportGraphJson, type AuthorityGraph, type GraphExport } from '../graph/index.js';
import type { Edge, GraphEvent, Principal } from '../graph/model.js';
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

/** One event of the graph log as an auditor reads it (the slider's stops on the Principal page). */
export interface GraphEventSummary {
  revision: number;
  at: number;
  actor: string;
  type: GraphEvent['type'];
  /** The principal or edge the event is about. */
  subject: string;
  /** For edge events: the edge's kind and ends (of the edge as last known). */
  kind: string | null;
  from: string | null;
  to: string | null;
  reason: string | null;
}

/** Events of the graph log with `after < revision`, oldest first, at most `limit`; `next` for the next page or null. */
export async function graphEvents(ctx: WritContext, after: number, limit: number): Promise<{ events: GraphEventSummary[]; next: number | null; head: number }> {
  const current = await ctx.graph.current();
  const head = current.revision;
  const upTo = Math.min(head, after + limit);
  const recs = upTo > after ? await ctx.store.read((tx) => tx.graph.read(after, upTo)) : [];
  const events = recs.map(({ revision, at, actor, event }): GraphEventSummary => {
    const base = { revision, at, actor, type: event.type, kind: null, from: null, to: null, reason: null };
    switch (event.type) {
      case 'principal.created': return { ...base, subject: event.principal.id };
      case 'principal.keys_set': return { ...base, subject: event.id };
      case 'principal.revoked': return { ...base, subject: event.id, reason: event.reason };
      case 'edge.created': return { ...base, subject: event.edge.id, kind: event.edge.kind, from: event.edge.from, to: event.edge.to, reason: event.edge.reason };
      case 'edge.revoked': {
        const e = current.edge(event.id);
        return { ...base, subject: event.id, kind: e?.kind ?? null, from: e?.from ?? null, to: e?.to ?? null, reason: event.reason };
      }
    }
  });
  return { events, next: upTo < head ? upTo : null, head };
}

export interface GraphDiff {
  from: { revision: number; at: number };
  to: { revision: number; at: number };
  added: Edge[];
  revoked: Edge[];
  /** Not revoked, but their window closed between the two points (expires_at in (from.at, to.at]). */
  expired: Edge[];
  principals_added: Principal[];
  principals_revoked: Principal[];
}

/**
 * What changed in the authority graph between two points (a revision or an RFC 3339 time each; the
 * later side defaults to now): edges added, revoked and expired, principals added and revoked.
 */
export async function graphDiff(ctx: WritContext, fromAt: string, toAt: string | undefined): Promise<GraphDiff> {
  const [a, b] = [await pointOf(ctx, fromAt), await pointOf(ctx, toAt)];
  if (a.at > b.at || a.graph.revision > b.graph.revision) throw new WritError('UNPROCESSABLE', `"from" (revision ${a.graph.revision}) is after "to" (revision ${b.graph.revision})`);
  const before = new Map(a.graph.edges().map((e) => [e.id, e]));
  const added: Edge[] = [];
  const revoked: Edge[] = [];
  const expired: Edge[] = [];
  for (const e of b.graph.edges()) {
    const was = before.get(e.id);
    if (!was) added.push(e);
    if (e.revoked_at !== null && (!was || was.revoked_at === null)) revoked.push(e);
    else if (e.revoked_at === null && e.expires_at !== null && e.expires_at > a.at && e.expires_at <= b.at) expired.push(e);
  }
  const principalsBefore = new Map(a.graph.principals().map((p) => [p.id, p]));
  const principals_added = b.graph.principals().filter((p) => !principalsBefore.has(p.id));
  const principals_revoked = b.graph.principals().filter((p) => p.revoked_at !== null && (principalsBefore.get(p.id)?.revoked_at ?? null) === null);
  const byId = <T extends { id: string }>(xs: T[]) => xs.sort((x, y) => x.id.localeCompare(y.id));
  return {
    from: { revision: a.graph.revision, at: a.at }, to: { revision: b.graph.revision, at: b.at },
    added: byId(added), revoked: byId(revoked), expired: byId(expired), principals_added: byId(principals_added), principals_revoked: byId(principals_revoked),
  };
}

/** A point of the log: its graph, and its time (a revision's is when it was recorded; now for the head). */
async function pointOf(ctx: WritContext, at: string | undefined): Promise<{ graph: AuthorityGraph; at: number }> {
  const graph = await graphAt(ctx, at);
  if (at === undefined || at === '') return { graph, at: ctx.clock.now() };
  const when = parseAt(at);
  if ('time' in when) return { graph, at: when.time };
  if (when.revision === 0) return { graph, at: 0 };
  const [rec] = await ctx.store.read((tx) => tx.graph.read(when.revision - 1, when.revision));
  return { graph, at: rec?.at ?? 0 };
}
