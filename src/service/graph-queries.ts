import { WritError } from '../errors.js';
import { exportGraphDot, exportGraphJson, type AuthorityGraph, type GraphExport } from '../graph/index.js';
import type { Edge, GraphEvent, Principal, RecordedGraphEvent } from '../graph/model.js';
import type { WritContext } from './context.js';
import { parseAt } from './time.js';
import { GENESIS_HASH } from '../audit/index.js';

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
  /** The event exactly as stored (JSON text): the bytes its hash covers. */
  payload: string;
  /** The hash of the event before (the genesis hash for revision 1), null when that one is not hashed. */
  prev_hash: string | null;
  /** The event's link in the graph log's hash chain (src/audit/graph-chain.ts), null until hashed (appended by a Writ from before the chain). */
  hash: string | null;
}

/**
 * Events of the graph log with `after < revision`, oldest first, at most `limit`; `next` for the next page
 * or null. Each carries its stored payload and its hash chain link, so that a page can be checked against
 * a signed checkpoint's graph head with nothing but the answer (graphEventHash).
 */
export async function graphEvents(ctx: WritContext, after: number, limit: number): Promise<{ events: GraphEventSummary[]; next: number | null; head: number }> {
  const current = await ctx.graph.current();
  const head = current.revision;
  const upTo = Math.min(head, after + limit);
  const { rows, before } = upTo > after
    ? await ctx.store.read(async (tx) => ({
      rows: await tx.graph.rowsAfter(after, upTo - after),
      before: after === 0 ? GENESIS_HASH : ((await tx.graph.rowsAfter(after - 1, 1))[0]?.hash ?? null),
    }))
    : { rows: [], before: null };
  let prevHash = before;
  const events = rows.map(({ revision, at, actor, type, payload, hash }): GraphEventSummary => {
    const event = JSON.parse(payload) as GraphEvent;
    // The type as stored (what the hash covers), not the payload's: a page recomputes as `writ audit verify` does.
    const base = { revision, at, actor, type: type as GraphEvent['type'], kind: null, from: null, to: null, reason: null, payload, prev_hash: prevHash, hash };
    prevHash = hash;
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

/** Who revoked an edge or a principal, and the reason given (from the revocation's event in the graph log). */
export interface Revocation {
  revoked_at: number;
  /** The graph revision that recorded it: decisions made at a revision from this one on see it. */
  graph_revision: number | null;
  revoked_by: string | null;
  reason: string | null;
}

/**
 * The revocation of `subject`, revoked at `revokedAt` and not yet at revision `after`: its event is looked
 * for among those recorded at that time first, then (a replica whose clock ran behind may have recorded a
 * later revision at an earlier time) in the log after `after`, a page at a time. Null fields when the
 * log no longer holds it.
 */
export async function revocationOf(ctx: WritContext, subject: { edge: string } | { principal: string }, revokedAt: number, after: number): Promise<Revocation> {
  const isIt = (event: GraphEvent) => ('edge' in subject ? event.type === 'edge.revoked' && event.id === subject.edge : event.type === 'principal.revoked' && event.id === subject.principal);
  const found = (recs: RecordedGraphEvent[]): Revocation | null => {
    const rec = recs.find((r) => isIt(r.event));
    return rec ? { revoked_at: revokedAt, graph_revision: rec.revision, revoked_by: rec.actor, reason: (rec.event as { reason: string }).reason } : null;
  };
  const atThatTime = await ctx.store.read(async (tx) => {
    const from = await tx.graph.revisionAt(revokedAt - 1);
    const upTo = await tx.graph.revisionAt(revokedAt);
    return upTo > from ? tx.graph.read(from, upTo) : [];
  });
  const quick = found(atThatTime);
  if (quick) return quick;
  const head = (await ctx.graph.current()).revision;
  for (let from = after; from < head; from += 1_000) {
    const page = found(await ctx.store.read((tx) => tx.graph.read(from, Math.min(head, from + 1_000))));
    if (page) return page;
  }
  return { revoked_at: revokedAt, graph_revision: null, revoked_by: null, reason: null };
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
