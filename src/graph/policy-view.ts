/**
 * The graph as the policy sees it: what the graph code hands to Rego (src/policy/types.ts is the
 * rest of that contract). Defined here, beside the model it is cut from, so that the graph never
 * imports the policy layer.
 */
import type { Edge, PrincipalKind } from './model.js';

/** An edge as the policy sees it (times in ms; null = unbounded / not revoked): the edge without its graph revision. */
export type PolicyEdge = Omit<Edge, 'revision'>;

export interface PolicyPrincipal {
  id: string;
  kind: PrincipalKind;
  priority_class: string;
  revoked_at: number | null;
}

/** A candidate chain: edges in order from governance (edges[0].from === 'governance') to the caller. */
export interface CandidateChain {
  edges: PolicyEdge[];
}

export interface OwnerResolution {
  /** The requested field, or '*' for a whole-resource request. */
  field: string;
  owner: string | null;
  edge_id: string | null;
}
