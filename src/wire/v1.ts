/**
 * Wire types of the v1 API that the server and the SDK share. Types only (erased at run time), so the
 * SDK can import them without pulling in any server code. Every instant is an RFC 3339 string
 * (`WireTime`, see ./time.ts); durations are numbers named `*_ms`.
 */
import type { WireTime } from './time.js';

export type { WireTime } from './time.js';

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

/** An edge of a decision's chain as the policy judged it (null = unbounded / not revoked). */
export interface ChainEdge {
  id: string;
  kind: 'grant' | 'delegate' | 'owns' | 'approves' | 'preempts';
  from: string;
  to: string;
  scope: WireScope;
  max_depth: number | null;
  creator: string;
  reason: string;
  created_at: WireTime;
  not_before: WireTime | null;
  expires_at: WireTime | null;
  revoked_at: WireTime | null;
}

/** An edge of the authority graph as the API answers it (GET /v1/edges/{id}; the edge a write or a revocation touched). */
export interface Edge extends ChainEdge {
  /** The graph revision that created it. */
  revision: number;
}

/**
 * A scope as the graph's write routes take it: `environments` and `fields` default to every one (`['*']`);
 * the risk ceiling is `risk_max` or `constraints.risk_max` (one of them is required), so an edge's own
 * `scope` (a WireScope) is one too.
 */
export interface ScopeInput {
  actions: string[];
  resources: string[];
  environments?: string[];
  fields?: string[];
  risk_max?: number;
  constraints?: { risk_max?: number };
}

/** The body of POST /v1/delegations: `from` gives part of its own scope to `to` (only `from` or governance may). */
export interface DelegationBody {
  /** Default: one Writ makes (`e-…`); an identical body under the same id is answered 200 (idempotent). */
  id?: string;
  from: string;
  to: string;
  scope: ScopeInput;
  reason: string;
  /** How many more hops `to` may pass it on; default 0. */
  max_depth?: number;
  /** RFC 3339 or ms since the epoch. */
  not_before?: WireTime | number | null;
  expires_at?: WireTime | number | null;
}

/** The answer of POST /v1/delegations (and the other edge routes): `created` false when an identical edge existed. */
export interface EdgeWritten {
  edge: Edge;
  created: boolean;
  graph_revision: number;
}

/** The answer of DELETE /v1/edges/{id}: `revoked` false when it was revoked already. */
export interface EdgeRevoked {
  edge: Edge;
  revoked: boolean;
  graph_revision: number;
}

/**
 * The answer of GET /v1/principals/{id}/capabilities (`writ can`): every candidate chain to the principal,
 * judged — or, past what Writ judges for one principal, the chains that add to the valid ones listed.
 */
export interface Capabilities {
  principal: string;
  /** The instant judged (default now). */
  at: WireTime;
  /** The revision the graph had at `at`. */
  graph_revision: number;
  /**
   * True when the principal may hold more than is listed: its chains that add something to the valid
   * ones listed outnumbered what Writ judges for one principal (64), or chain resolution stopped short.
   * When false, every authority the principal holds is given by a listed valid chain.
   */
  truncated: boolean;
  capabilities: {
    /** Governance first. */
    chain: ChainEdge[];
    valid: boolean;
    /** What the chain gives: its final scope. */
    scope: WireScope;
    /** Why the chain does not count; empty when valid. */
    problems: string[];
  }[];
}

/** The body of POST /v1/decisions (the principal is always the authenticated caller). */
export interface DecisionRequest {
  action: string;
  resource: string;
  environment: string;
  fields?: string[];
  context?: { risk?: number; approval?: string; reason?: string };
}

/** The answer of POST /v1/decisions. */
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
  /**
   * Denied only for want of an approval (a valid chain; every reason is the approval's): ask an approver
   * (`writ approve`) and decide again with `context.approval`. False on allow and on any other deny.
   */
  approval_missing: boolean;
  obligations: Obligations;
  risk: number;
  /** Edge ids of the chain that allows, governance first; empty on deny. */
  chain: string[];
  chain_edges: ChainEdge[];
  owners: Record<string, string | null>;
  graph_revision: number;
  policy_revision: string;
  issued_at: WireTime;
  expires_at: WireTime | null;
  /** Compact JWS for the gateway; only allow decisions are signed. */
  token: string | null;
}

/** The body of POST /v1/explain: a decision request, for another principal too (governance only). */
export type ExplainRequest = DecisionRequest & { principal?: string };

/** The policy's verdict on one candidate chain: each edge's, then the chain's as a whole. */
export interface ChainVerdict {
  /** Which candidate chain (its index among those judged). */
  index: number;
  ok: boolean;
  edges: { id: string; ok: boolean; problems: string[] }[];
  /** Problems of the chain as a whole (e.g. its final scope does not cover the request). */
  problems: string[];
}

/** The answer of POST /v1/explain: every candidate chain with the verdict on each edge; nothing is signed or spent. */
export interface Explanation {
  principal: string;
  /** The request as judged (an alias resolved to its canonical key). */
  request: { action: string; resource: string; environment: string; fields: string[] };
  allow: boolean;
  reasons: string[];
  /** As on Decision: denied only for want of an approval. */
  approval_missing: boolean;
  risk: number;
  obligations: Obligations;
  owners: Record<string, string | null>;
  chains: { edges: ChainEdge[]; verdict: ChainVerdict }[];
  graph_revision: number;
  policy_revision: string;
}

/** The answer of POST /v1/leases. */
export interface LeaseGrant {
  lease_id: string;
  /** The bearer secret for renew, release and writes (Writ stores only its hash). */
  token: string;
  /** The fencing epoch per coordination key. */
  epochs: Record<string, number>;
  /** The coordination keys taken, in canonical order. */
  keys: string[];
  expires_at: WireTime;
  holder: string;
  /** Leases this acquisition took over by preemption (empty unless `preempt`; empty on a replay). */
  preempted: { lease_id: string; holder: string; key: string; epoch: number }[];
  /** True when this answers an acquisition asked again with its own `token` after the lease was granted: nothing was taken now. */
  replayed: boolean;
}

/** The answer of POST /v1/leases/{id}/renew. */
export interface LeaseRenewal {
  lease_id: string;
  epochs: Record<string, number>;
  expires_at: WireTime;
}

/** The answer of DELETE /v1/leases/{id}: the epochs stay as high-water marks. */
export interface LeaseRelease {
  lease_id: string;
  epochs: Record<string, number>;
}

/**
 * One request on the lease stream (`GET /v1/leases/stream`, a WebSocket authenticated once by the
 * upgrade's caller assertion): one JSON text message each. `id` is the caller's, echoed in the answer;
 * requests may be pipelined and their answers come as each one finishes, not in order.
 */
export type LeaseStreamRequest =
  | { id: number; op: 'acquire'; decisions: string[]; ttl_ms?: number; wait_ms?: number; preempt?: boolean; token?: string }
  | { id: number; op: 'renew'; lease_id: string; token: string; ttl_ms?: number }
  | { id: number; op: 'release'; lease_id: string; token: string };

/** An RFC 9457 problem as Writ sends it (`code` is one of the error catalogue's). */
export interface WireProblem {
  type: string;
  title: string;
  status: number;
  code: string;
  detail: string;
  [extension: string]: unknown;
}

/**
 * One answer on the lease stream: the same body the HTTP route answers (LeaseGrant, LeaseRenewal,
 * LeaseRelease), or the same problem. `id` is null only for a message whose id could not be read.
 */
export type LeaseStreamReply =
  | { id: number; ok: true; result: LeaseGrant | LeaseRenewal | LeaseRelease }
  | { id: number | null; ok: false; problem: WireProblem };

/** One entry of a receipt's hash chain. */
export interface ReceiptEntry {
  /** Store-wide order (pages follow it; gaps allowed). */
  seq: number;
  /** Place in the receipt's hash chain: 1, 2, … with no gap. */
  pos: number;
  kind: 'intent' | 'completed' | 'failed' | 'rejected' | 'reconciled';
  at: WireTime;
  prev_hash: string;
  hash: string;
}

/** A coordination receipt: the fold of its hash-chained entries. */
export interface Receipt {
  receipt_id: string;
  coordination_id: string;
  status: 'PENDING' | 'COMPLETED' | 'FAILED' | 'REJECTED';
  principal: string;
  action: string;
  resource_key: string;
  fields: string[];
  owners: string[];
  authority_epoch: number | null;
  ownership_epoch: number | null;
  decision_id: string | null;
  policy_revision: string | null;
  graph_revision: number | null;
  chain: string[];
  lease_id: string | null;
  lease_epoch: number | null;
  expected_version: number | null;
  final_version: number | null;
  conflicts: { kind: string; expected?: unknown; actual?: unknown; detail?: string }[];
  upstream_status: number | null;
  /** `used_by_receipt_id`: a DECISION_REPLAYED refusal's, the receipt of the write that used the decision (absent on older refusals: their message names it). */
  error: { code: string; message: string; used_by_receipt_id?: string } | null;
  /**
   * A REJECTED receipt refused for a lease reason: the lease the write presented (never the token nor
   * its hash) and each key's fencing epoch, holder and lease at the refusal; null otherwise.
   */
  presented_lease: PresentedLease | null;
  idempotency_key: string | null;
  request_hash: string | null;
  created_at: WireTime;
  completed_at: WireTime | null;
  reconciled: boolean;
  /** The hash chain its entries are in: its coordination key (resource key); '' for the legacy chain. */
  hash_chain: string;
  prev_hash: string;
  hash: string;
  entries: ReceiptEntry[];
  replayed?: boolean;
}

export interface PresentedLease {
  /** Writ-Lease-Id, else the id the lease token names; null when neither names a lease. */
  lease_id: string | null;
  /** The id the lease token names (null: no token, or not one Writ issued). */
  token_lease_id: string | null;
  keys: {
    key: string;
    /** The fencing epoch the write gave for this key (null: none, or the header was unreadable). */
    presented_epoch: number | null;
    current_epoch: number;
    holder: string | null;
    lease_id: string | null;
    state: 'HELD' | 'EXPIRED' | 'FREE';
  }[];
}

/** A declared incident (GET/POST/DELETE /v1/incidents). */
export interface Incident {
  id: string;
  declared_by: string;
  reason: string;
  decision_id: string;
  /**
   * The environment of the decision that declared it: preemption counts it only for leases in that
   * environment. null: declared before Writ recorded it; it counts in an environment while its declarer
   * may declare it there.
   */
  environment: string | null;
  declared_at: WireTime;
  ends_at: WireTime;
  resolved_at: WireTime | null;
}

/** A coordination key's lease (GET /v1/leases) in the Kubernetes Lease vocabulary, plus its fencing epoch. */
export interface LeaseRecord {
  key: string;
  holderIdentity: string | null;
  holderInstance: string | null;
  leaseDurationSeconds: number | null;
  acquireTime: WireTime | null;
  renewTime: WireTime | null;
  leaseTransitions: number;
  epoch: number;
  expiresAt: WireTime | null;
  leaseId: string | null;
  priority: number | null;
  /** HELD: holder and not expired; EXPIRED: holder recorded but past expiry (free to take); FREE: released or never taken. */
  state: 'HELD' | 'EXPIRED' | 'FREE';
  preemptedBy: string | null;
}
