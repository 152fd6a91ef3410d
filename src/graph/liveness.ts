import type { PolicyEdge } from './policy-view.js';
import type { Edge } from './model.js';

/**
 * Structural liveness at `now`: not revoked and inside [not_before, expires_at). A recorded
 * revocation counts whatever its time, because the graph is rebuilt per revision for the past.
 * This only prunes candidates; the policy judges liveness again from the same fields.
 */
export function isEdgeLive(edge: Pick<Edge, 'revoked_at' | 'not_before' | 'expires_at'>, now: number): boolean {
  return !hasEdgeEnded(edge, now) && (edge.not_before === null || edge.not_before <= now);
}

/** Revoked, or expired at `now`: it can never count again (unlike one not yet valid, which may). */
export function hasEdgeEnded(edge: Pick<Edge, 'revoked_at' | 'expires_at'>, now: number): boolean {
  return edge.revoked_at !== null || (edge.expires_at !== null && edge.expires_at <= now);
}

/**
 * The principals an edge joins: its `from`, and its `to` unless that is managed state (an ownership)
 * or a priority class (`class:NAME`, a preemption's).
 */
export function principalEnds(edge: Pick<Edge, 'kind' | 'from' | 'to'>): string[] {
  return edge.kind === 'owns' || edge.to.startsWith('class:') ? [edge.from] : [edge.from, edge.to];
}

/** The policy's view of an edge: a fresh object, so later graph changes cannot alter a decision's input. */
export function toPolicyEdge(edge: Edge): PolicyEdge {
  return {
    id: edge.id,
    kind: edge.kind,
    from: edge.from,
    to: edge.to,
    scope: edge.scope,
    max_depth: edge.max_depth,
    creator: edge.creator,
    reason: edge.reason,
    created_at: edge.created_at,
    not_before: edge.not_before,
    expires_at: edge.expires_at,
    revoked_at: edge.revoked_at,
  };
}
