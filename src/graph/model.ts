/**
 * The authority model: principals, edges, scopes and the events that change them.
 * Times are milliseconds since the epoch (numbers) everywhere inside Writ; the wire uses ISO-8601.
 */

export const PRINCIPAL_KINDS = ['agent', 'human', 'service', 'control_plane', 'governance'] as const;
export type PrincipalKind = (typeof PRINCIPAL_KINDS)[number];

/** The id of the root authority. Exactly one principal has kind `governance`, and it has this id. */
export const GOVERNANCE_ID = 'governance';

/** A public key in JWK form. `kid` is required so a caller assertion can name the key it was signed with. */
export interface PublicJwk {
  kty: string;
  kid: string;
  crv?: string;
  x?: string;
  y?: string;
  n?: string;
  e?: string;
  alg?: string;
  [k: string]: unknown;
}

export interface Principal {
  id: string;
  kind: PrincipalKind;
  /** Governed priority class, e.g. `incident`, `control`, `human`, `agent`. Never taken from a request. */
  priority_class: string;
  /** Numeric priority of the class (higher wins a lease queue). Derived from the class by the graph's configuration. */
  priority: number;
  attributes: Record<string, unknown>;
  keys: PublicJwk[];
  created_at: number;
  revoked_at: number | null;
}

/**
 * A scope. `'*'` in actions/environments/fields means "every". Resource patterns are canonical keys
 * matched segment by segment on `:`: a literal segment, `*` (exactly one segment) or a final `**`
 * (zero or more segments).
 */
export interface Scope {
  actions: string[];
  resources: string[];
  environments: string[];
  fields: string[];
  constraints: ScopeConstraints;
}

export interface ScopeConstraints {
  /** The highest action risk (see the action catalogue in policy data) this scope may be used for. */
  risk_max: number;
  [k: string]: unknown;
}

export const EDGE_KINDS = ['grant', 'delegate', 'owns', 'approves', 'preempts'] as const;
export type EdgeKind = (typeof EDGE_KINDS)[number];

/**
 * An edge of the authority multigraph.
 * - grant     governance → P, carries `scope` and `max_depth` (how many further delegation hops P may make)
 * - delegate  P → Q, carries `scope` and `max_depth`
 * - owns      P → managed state: `scope.resources` are the state's patterns, `scope.fields` the fields owned
 *             (`['*']` for all); actions/environments unused
 * - approves  P → Q: P may approve Q's actions within `scope` (actions, resources, environments) whose
 *             risk is at most `scope.constraints.risk_max` (the highest risk P may approve)
 * - preempts  P → Q: P may take over a lease held by Q (or by any principal of Q's priority class when
 *             `to` is `class:<name>`) during an active incident
 * The time window of an edge is [not_before, expires_at): live at t iff not_before <= t < expires_at.
 */
export interface Edge {
  id: string;
  kind: EdgeKind;
  from: string;
  to: string;
  scope: Scope;
  /** Remaining delegation depth below this edge (grant and delegate); null for other kinds. */
  max_depth: number | null;
  creator: string;
  reason: string;
  created_at: number;
  not_before: number | null;
  expires_at: number | null;
  revoked_at: number | null;
  /** Graph revision at which the edge was created. */
  revision: number;
}

/** Every change to the graph is one of these, appended to the event log with the next revision. */
export type GraphEvent =
  | { type: 'principal.created'; principal: Omit<Principal, 'revoked_at'> }
  | { type: 'principal.keys_set'; id: string; keys: PublicJwk[] }
  | { type: 'principal.revoked'; id: string; at: number; reason: string }
  | { type: 'edge.created'; edge: Omit<Edge, 'revoked_at' | 'revision'> }
  | { type: 'edge.revoked'; id: string; at: number; reason: string };

export interface RecordedGraphEvent {
  revision: number;
  at: number;
  actor: string;
  event: GraphEvent;
}
