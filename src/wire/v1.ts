/**
 * Wire types of the v1 API that the server and the SDK share. Types only (erased at run time), so the
 * SDK can import them without pulling in any server code.
 */

/** What the policy asks of a write, carried in the signed decision so the gateway enforces it. */
export interface Obligations {
  /** False: the write needs no lease (POST /v1/leases refuses it; the SDK's withLease runs without one). */
  lease_required: boolean;
  version_required: boolean;
  approval_required: boolean;
  /** The resource class that applies (READ_SHARED, WRITE_OPTIMISTIC, WRITE_EXCLUSIVE, MULTI_WRITER_MERGEABLE). */
  resource_class: string;
  /** Per requested field, its class when the resource class declares per-field semantics. */
  field_classes: Record<string, string>;
  conflict_domain: string | null;
}

/** A scope on the wire. `'*'` in actions/environments/fields means "every". */
export interface WireScope {
  actions: string[];
  resources: string[];
  environments: string[];
  fields: string[];
  constraints: { risk_max: number; [k: string]: unknown };
}

/** An edge of a decision's chain as the policy judged it (times in ms since the epoch; null = unbounded / not revoked). */
export interface ChainEdge {
  id: string;
  kind: 'grant' | 'delegate' | 'owns' | 'approves' | 'preempts';
  from: string;
  to: string;
  scope: WireScope;
  max_depth: number | null;
  creator: string;
  reason: string;
  created_at: number;
  not_before: number | null;
  expires_at: number | null;
  revoked_at: number | null;
}

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
  chain_edges: ChainEdge[];
  owners: Record<string, string | null>;
  graph_revision: number;
  policy_revision: string;
  issued_at: string;
  expires_at: string | null;
  /** Compact JWS for the gateway; only allow decisions are signed. */
  token: string | null;
}
