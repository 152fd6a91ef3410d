import type { OwnerResolution, PolicyEdge } from './policy-view.js';
import type { AuthorityGraph } from './authority-graph.js';
import { isEdgeLive, toPolicyEdge } from './liveness.js';
import type { Edge } from './model.js';
import { compilePattern, matchesSegments, specificity } from './patterns.js';

const EVERY = '*';

/**
 * The owner of each requested field of `resourceKey` (one entry `'*'` when `fields` is empty, i.e.
 * a whole-resource request): the live `owns` edge, from a principal that is not revoked, with a
 * pattern matching the key and `scope.fields` containing the field or `'*'`. The most specific
 * pattern wins; ties go to an edge naming the field over one with `'*'`, then to the smaller edge id.
 * A whole-resource request is owned only by an edge owning `'*'`. Owner null: nobody owns it.
 */
export function resolveOwners(graph: AuthorityGraph, resourceKey: string, fields: readonly string[], now: number): OwnerResolution[] {
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
