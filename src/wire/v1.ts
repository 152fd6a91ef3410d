/**
 * Wire types of the v1 API that the server and the SDK share. Types only (erased at run time), so the
 * SDK can import them without pulling in any server code.
 */
import type { Obligations, PolicyEdge } from '../policy/types.js';

/** The body of POST /v1/decisions (the principal is always the authenticated caller). */
export interface DecisionRequest {
  action: string;
  resource: string;
  environment: string;
  fields?: string[];
  context?: { risk?: number; approval?: string; reason?: string };
}

/** The answer of POST /v1/decisions. Times are ISO-8601. */
export interface Decision {
  decision_id: string;
  allow: boolean;
  principal: string;
  action: string;
  /** Canonical key (an alias in the request is resolved). */
  resource: string;
  environment: string;
  fields: string[];
  /** What is missing, in words an auditor can act on; empty on allow. */
  reasons: string[];
  obligations: Obligations;
  risk: number;
  /** Edge ids of the chain that allows, governance first; empty on deny. */
  chain: string[];
  chain_edges: PolicyEdge[];
  owners: Record<string, string | null>;
  graph_revision: number;
  policy_revision: string;
  issued_at: string;
  expires_at: string | null;
  /** Compact JWS for the gateway; only allow decisions are signed. */
  token: string | null;
}
