import { WritError } from '../errors.js';
import type { DecisionClaims } from '../decision/index.js';
import { isEdgeLive, ownershipAfter, resolveOwners, type AuthorityGraph, type OwnershipView, type RecordedGraphEvent } from '../graph/index.js';

/**
 * A decision is worth only what its chain is worth now: every edge of the chain still live and every
 * principal on it unrevoked (else AUTHORITY_REVOKED), and the owners of the written state unchanged
 * since the decision (else OWNER_CHANGED). Checked by the gateway before every write and by the lease
 * manager's front door before every acquisition.
 */
export function checkAuthorityStillValid(graph: AuthorityGraph, claims: DecisionClaims, now: number): void {
  for (const id of claims.chain) {
    const edge = graph.edge(id);
    if (!edge) throw new WritError('AUTHORITY_REVOKED', `edge ${id} of the decision's chain no longer exists`);
    if (edge.revoked_at !== null) {
      throw new WritError('AUTHORITY_REVOKED', `edge ${id} (${edge.from} → ${edge.to}) was revoked at ${new Date(edge.revoked_at).toISOString()}, after decision ${claims.decision_id} was made`, { edge: id });
    }
    if (!isEdgeLive(edge, now)) throw new WritError('AUTHORITY_REVOKED', `edge ${id} (${edge.from} → ${edge.to}) is no longer within its validity window`, { edge: id });
    for (const p of [edge.from, edge.to]) {
      const principal = graph.principal(p);
      if (!principal || principal.revoked_at !== null) throw new WritError('AUTHORITY_REVOKED', `principal ${p} on the decision's chain was revoked`, { principal: p });
    }
  }
  const caller = graph.principal(claims.principal);
  if (!caller || caller.revoked_at !== null) throw new WritError('AUTHORITY_REVOKED', `principal ${claims.principal} was revoked`);
  checkOwnersUnchanged(graph, claims, now);
}

function checkOwnersUnchanged(ownership: OwnershipView, claims: DecisionClaims, now: number): void {
  for (const o of resolveOwners(ownership, claims.resource, claims.fields, now)) {
    const decided = claims.owners[o.field] ?? null;
    if (decided !== o.owner) {
      throw new WritError('OWNER_CHANGED', `the owner of ${claims.resource} ${o.field} is ${o.owner ?? 'nobody'} now, not ${decided ?? 'nobody'} as when decision ${claims.decision_id} was made`, { field: o.field });
    }
  }
}

/** The principals a decision's authority rests on: its caller and both ends of every chain edge. */
export function principalsOfChain(graph: AuthorityGraph, claims: DecisionClaims): string[] {
  const out = new Set<string>([claims.principal]);
  for (const id of claims.chain) {
    const edge = graph.edge(id);
    if (edge) {
      out.add(edge.from);
      out.add(edge.to);
    }
  }
  return [...out];
}

/**
 * The same rule against the store itself, inside the write's own transaction: `events` are the graph
 * events recorded after the decision's graph revision, read in that transaction. A revocation of an
 * edge of the chain or of a principal on it refuses the write, even if this process's in-memory graph
 * has not seen it yet (another replica revoked it a moment ago).
 */
export function checkNotRevokedSince(events: RecordedGraphEvent[], claims: DecisionClaims, principals: readonly string[]): void {
  const chain = new Set(claims.chain);
  const onChain = new Set(principals);
  for (const { event, revision } of events) {
    if (event.type === 'edge.revoked' && chain.has(event.id)) {
      throw new WritError('AUTHORITY_REVOKED', `edge ${event.id} of the decision's chain was revoked at graph revision ${revision}, after decision ${claims.decision_id} was made`, { edge: event.id });
    }
    if (event.type === 'principal.revoked' && onChain.has(event.id)) {
      throw new WritError('AUTHORITY_REVOKED', `principal ${event.id} on the decision's chain was revoked at graph revision ${revision}`, { principal: event.id });
    }
  }
}

/**
 * The owners' rule against the store, as checkNotRevokedSince is the chain's: `events` are the graph
 * events read in the write's (or renewal's) own transaction from a revision at or before `graph`'s
 * on, and `graph` this process's graph, which may not have folded them in yet. When one of them touches
 * ownership (an owns edge created or revoked, a principal that owns something revoked), the owners of
 * the written state are resolved on `graph` with them folded in and compared with the decision's:
 * OWNER_CHANGED only if they differ (a new owns edge less specific than the owner changes nothing).
 * Otherwise nothing is resolved: checkAuthorityStillValid on `graph` already judged the owners.
 */
export function checkOwnersUnchangedSince(graph: AuthorityGraph, events: readonly RecordedGraphEvent[], claims: DecisionClaims, now: number): void {
  const ownership = ownershipAfter(graph, events);
  if (ownership) checkOwnersUnchanged(ownership, claims, now);
}
