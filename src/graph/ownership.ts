import type { OwnerResolution, PolicyEdge } from './policy-view.js';
import type { AuthorityGraph } from './authority-graph.js';
import { isEdgeLive, toPolicyEdge } from './liveness.js';
import type { Edge, Principal, RecordedGraphEvent } from './model.js';
import { compilePattern, matchesSegments, specificity } from './patterns.js';

const EVERY = '*';

/**
 * The owner of each requested field of `resourceKey` (one entry `'*'` when `fields` is empty, i.e.
 * a whole-resource request): the live `owns` edge, from a principal that is not revoked, with a
 * pattern matching the key and `scope.fields` containing the field or `'*'`. The most specific
 * pattern wins; ties go to an edge naming the field over one with `'*'`, then to the smaller edge id.
 * A whole-resource request is owned only by an edge owning `'*'`. Owner null: nobody owns it.
 */
export function resolveOwners(graph: OwnershipView, resourceKey: string, fields: readonly string[], now: number): OwnerResolution[] {
  const key = compilePattern(resourceKey);
  const matching: { edge: Edge; specificity: number }[] = [];
  for (const edge of graph.ownsCandidates(key[0] ?? '')) {
    if (!isEdgeLive(edge, now) || graph.principal(edge.from)?.revoked_at !== null) continue;
    let best = -1;
    for (const p of edge.scope.resources) {
      if (matchesSegments(compilePattern(p), key)) best = Math.max(best, specificity(p));
    }
    if (best >= 0) matching.push({ edge, specificity: best });
  }
  const requested = fields.length === 0 ? [EVERY] : fields;
  return requested.map((field) => {
    let chosen: { edge: Edge; specificity: number; named: boolean } | null = null;
    for (const m of matching) {
      const named = field !== EVERY && m.edge.scope.fields.includes(field);
      if (!named && !m.edge.scope.fields.includes(EVERY)) continue;
      // A literal, not `{ ...m, named }`: see test/architecture/spread-then-add.test.ts.
      const candidate = { edge: m.edge, specificity: m.specificity, named };
      if (chosen === null || better(candidate, chosen)) chosen = candidate;
    }
    return { field, owner: chosen?.edge.from ?? null, edge_id: chosen?.edge.id ?? null };
  });
}

/** What owner resolution reads of a graph: the owns edges that may match a key, and the principals they come from. */
export interface OwnershipView {
  /** Every owns edge that may match a key whose first segment is `firstSegment` (a superset is fine). */
  ownsCandidates(firstSegment: string): Iterable<Edge>;
  principal(id: string): Pick<Principal, 'revoked_at'> | undefined;
}

/**
 * The ownership side of `graph` with `events` folded in, or null when none of them touches ownership
 * (no owns edge created, no owns edge or principal owning something revoked): then resolveOwners on
 * `graph` already answers as it would after them. The events are the graph log's from some revision at
 * or before `graph`'s on (e.g. read from the store inside a transaction while this process's graph is
 * behind); those `graph` already has count once. Nothing is copied: an overlay on `graph`, whose
 * answers last only until `graph` changes, for one resolveOwners call.
 */
export function ownershipAfter(graph: AuthorityGraph, events: readonly RecordedGraphEvent[]): OwnershipView | null {
  const created = new Map<string, Edge>();
  const newPrincipals = new Map<string, Pick<Principal, 'revoked_at'>>();
  const revokedEdges = new Map<string, number>();
  const revokedPrincipals = new Map<string, number>();
  const owning = (id: string) => graph.outgoing(id, ['owns']).length > 0 || [...created.values()].some((e) => e.from === id);
  let touched = false;
  for (const { event, revision } of events) {
    switch (event.type) {
      case 'principal.created':
        if (!graph.principal(event.principal.id)) newPrincipals.set(event.principal.id, { revoked_at: null });
        break;
      case 'principal.revoked':
        if (!revokedPrincipals.has(event.id)) revokedPrincipals.set(event.id, event.at);
        touched ||= owning(event.id);
        break;
      case 'edge.created':
        if (event.edge.kind !== 'owns') break;
        touched = true;
        if (graph.edge(event.edge.id)) break;
        // A literal, not `{ ...e, revoked_at, revision }`: see test/architecture/spread-then-add.test.ts.
        created.set(event.edge.id, {
          id: event.edge.id, kind: event.edge.kind, from: event.edge.from, to: event.edge.to, scope: event.edge.scope, max_depth: null,
          creator: event.edge.creator, reason: event.edge.reason, created_at: event.edge.created_at,
          not_before: event.edge.not_before ?? null, expires_at: event.edge.expires_at ?? null, revoked_at: null, revision,
        });
        break;
      case 'edge.revoked':
        if (!revokedEdges.has(event.id)) revokedEdges.set(event.id, event.at);
        touched ||= graph.edge(event.id)?.kind === 'owns' || created.has(event.id);
        break;
      case 'principal.keys_set':
        break;
    }
  }
  if (!touched) return null;
  const revoked = (e: Edge): Edge => {
    const at = revokedEdges.get(e.id);
    return at === undefined || e.revoked_at !== null ? e : { ...e, revoked_at: at };
  };
  return {
    ownsCandidates: (firstSegment) => [...graph.ownsCandidates(firstSegment), ...created.values()].map(revoked),
    principal: (id) => {
      const p = graph.principal(id) ?? newPrincipals.get(id);
      const at = revokedPrincipals.get(id);
      return p === undefined || at === undefined || p.revoked_at !== null ? p : { revoked_at: at };
    },
  };
}

function better(a: { edge: Edge; specificity: number; named: boolean }, b: { edge: Edge; specificity: number; named: boolean }): boolean {
  if (a.specificity !== b.specificity) return a.specificity > b.specificity;
  if (a.named !== b.named) return a.named;
  return a.edge.id < b.edge.id;
}

/**
 * A live `owns` edge that a proposed ownership would collide with: one with the same pattern and
 * overlapping fields (`'*'`, or no fields, overlaps everything). One live owner per managed state; null when free.
 */
export function findOwnershipConflict(
  graph: AuthorityGraph,
  proposed: { resources: readonly string[]; fields: readonly string[] },
  now: number,
): Edge | null {
  const fields = proposed.fields.length === 0 ? [EVERY] : proposed.fields;
  const conflicts: Edge[] = [];
  for (const pattern of proposed.resources) {
    for (const edge of graph.ownsCandidates(compilePattern(pattern)[0] ?? '')) {
      if (!isEdgeLive(edge, now)) continue;
      if (edge.scope.resources.includes(pattern) && fieldsOverlap(edge.scope.fields, fields)) conflicts.push(edge);
    }
  }
  conflicts.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  return conflicts[0] ?? null;
}

function fieldsOverlap(a: readonly string[], b: readonly string[]): boolean {
  if (a.includes(EVERY) || b.includes(EVERY)) return true;
  return a.some((f) => b.includes(f));
}

/** Live `approves` edges `approver → requester` (none when the approver is revoked); the policy checks their scope and risk. */
export function approvalEdges(graph: AuthorityGraph, approver: string, requester: string, now: number): PolicyEdge[] {
  if (graph.principal(approver)?.revoked_at !== null) return [];
  const out: PolicyEdge[] = [];
  graph.forEachOutgoing(approver, (edge) => {
    if (edge.kind === 'approves' && edge.to === requester && isEdgeLive(edge, now)) out.push(toPolicyEdge(edge));
  });
  return out.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}
