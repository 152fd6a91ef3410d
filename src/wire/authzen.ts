/**
 * Wire types of the OpenID AuthZEN Authorization API 1.0 front door (POST /access/v1/…). Types only,
 * shared by the server and any client. Unknown members are allowed everywhere, as the specification
 * requires receivers to ignore them.
 */

export type Properties = Record<string, unknown>;

/** `id` is a principal id; `type` its kind (`agent`, `human`, `service`, `control_plane`, `governance`). */
export interface AuthzenSubject {
  type: string;
  id: string;
  properties?: Properties;
}

/**
 * `id` is a canonical coordination key or a registered alias (`wp:post:1024`, `wordpress:article:1024`);
 * `type` its prefix (the key without its last segment: `wp:post`); `properties.environment` and
 * `properties.fields` are the decision's environment and field list.
 */
export interface AuthzenResource {
  type: string;
  id: string;
  properties?: Properties & { environment?: string; fields?: string[] };
}

export interface AuthzenAction {
  name: string;
  properties?: Properties;
}

export interface AuthzenEvaluationRequest {
  subject: AuthzenSubject;
  action: AuthzenAction;
  resource: AuthzenResource;
  context?: Properties;
}

export type EvaluationsSemantic = 'execute_all' | 'deny_on_first_deny' | 'permit_on_first_permit';

export interface AuthzenEvaluationsRequest {
  subject?: AuthzenSubject;
  action?: AuthzenAction;
  resource?: AuthzenResource;
  context?: Properties;
  evaluations?: Partial<AuthzenEvaluationRequest>[];
  options?: { evaluations_semantic?: EvaluationsSemantic } & Properties;
}

/** Writ's decision context: everything a PEP needs to enforce (and hand the token to Writ's gateway). */
export interface AuthzenDecisionContext {
  decision_id?: string;
  /** Deny: Writ's reasons for administrators, keyed by HTTP status as in the specification's example. */
  reason_admin?: Record<string, string>;
  /** Deny: a short reason fit to show an end user. */
  reason_user?: Record<string, string>;
  reasons?: string[];
  /** Deny: only an approval is missing (decide again with one in `context.approval`). */
  approval_missing?: boolean;
  obligations?: unknown;
  /** Allow: the signed decision (JWS) for POST /v1/leases and /v1/actions. */
  token?: string | null;
  expires_at?: string | null;
  chain?: string[];
  policy_revision?: string;
  graph_revision?: number;
  /** A failed evaluation inside POST /access/v1/evaluations (the decision is then false). */
  error?: { status: number; code: string; message: string };
}

export interface AuthzenDecision {
  decision: boolean;
  context?: AuthzenDecisionContext;
}

export interface AuthzenEvaluationsResponse {
  evaluations: AuthzenDecision[];
}

export interface AuthzenPageRequest {
  token?: string;
  limit?: number;
}

export interface AuthzenSearchRequest {
  subject?: Partial<AuthzenSubject>;
  action?: AuthzenAction;
  resource?: Partial<AuthzenResource>;
  context?: Properties;
  page?: AuthzenPageRequest & Properties;
}

export interface AuthzenSearchResponse<T> {
  page: { next_token: string; count: number; total: number };
  results: T[];
  /**
   * Resource and action searches: `truncated` is true when the subject's chains that could give the
   * answer outnumbered what Writ judges for one principal, so `results` may miss some (never when false).
   */
  context?: { truncated: boolean };
}
