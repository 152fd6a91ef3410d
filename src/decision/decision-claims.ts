import type { JWTPayload } from 'jose';
import { WritError } from '../errors.js';
import type { Obligations } from '../wire/v1.js';

/** JOSE header `typ` of a decision token; a token of any other type is not a decision. */
export const DECISION_TYP = 'writ-decision+jwt';
export const DECISION_ISSUER = 'writ';
/** The only algorithm a decision may be signed or verified with. */
export const DECISION_ALG = 'EdDSA';

/** The policy's obligations, carried in the decision so the gateway enforces what the policy asked for. */
export type DecisionObligations = Obligations;

/** What a signed decision binds to one request. Times are milliseconds since the epoch. */
export interface DecisionClaims {
  decision_id: string;
  principal: string;
  audience: string;
  action: string;
  resource: string;
  environment: string;
  fields: string[];
  /** Edge ids of the chain, governance first. */
  chain: string[];
  /** Owner of each requested field of managed state (null: not managed). */
  owners: Record<string, string | null>;
  graph_revision: number;
  policy_revision: string;
  obligations: DecisionObligations;
  risk: number;
  issued_at: number;
  expires_at: number;
}

/**
 * Wire form: `jti` = decision_id, `sub` = principal, `aud` = audience, `iss` = 'writ', `iat`/`exp` in
 * seconds (exp rounded up; the millisecond `expires_at` is the precise limit and is checked too); every
 * other field of DecisionClaims is a private claim under its own name.
 */
export function claimsToPayload(c: DecisionClaims): JWTPayload {
  // Spelled out, not `{ ...rest }` after a destructuring: on every decision, and V8's object rest and
  // spread cost ~5–13 µs here against well under 1 µs for a literal (bench/RESULTS.md, issue 10).
  return {
    action: c.action,
    resource: c.resource,
    environment: c.environment,
    fields: c.fields,
    chain: c.chain,
    owners: c.owners,
    graph_revision: c.graph_revision,
    policy_revision: c.policy_revision,
    obligations: c.obligations,
    risk: c.risk,
    issued_at: c.issued_at,
    expires_at: c.expires_at,
    iss: DECISION_ISSUER,
    jti: c.decision_id,
    sub: c.principal,
    aud: c.audience,
    iat: Math.floor(c.issued_at / 1000),
    exp: Math.ceil(c.expires_at / 1000),
  };
}

/** Reads DecisionClaims back from a verified payload; anything missing or mistyped is DECISION_INVALID. */
export function payloadToClaims(p: JWTPayload): DecisionClaims {
  const claims: DecisionClaims = {
    decision_id: str(p, 'jti'),
    principal: str(p, 'sub'),
    audience: str(p, 'aud'),
    action: str(p, 'action'),
    resource: str(p, 'resource'),
    environment: str(p, 'environment'),
    fields: strings(p, 'fields'),
    chain: strings(p, 'chain'),
    owners: record(p, 'owners', (v) => v === null || typeof v === 'string') as Record<string, string | null>,
    graph_revision: num(p, 'graph_revision'),
    policy_revision: str(p, 'policy_revision'),
    obligations: obligations(p.obligations),
    risk: num(p, 'risk'),
    issued_at: num(p, 'issued_at'),
    expires_at: num(p, 'expires_at'),
  };
  if (claims.expires_at <= claims.issued_at) throw invalid('expires_at is not after issued_at');
  return claims;
}

function obligations(v: unknown): DecisionObligations {
  if (!isObject(v)) throw invalid('claim "obligations" is missing or not an object');
  const o = v as Record<string, unknown>;
  return {
    lease_required: bool(o, 'lease_required', 'obligations.'),
    version_required: bool(o, 'version_required', 'obligations.'),
    approval_required: bool(o, 'approval_required', 'obligations.'),
    resource_class: str(o, 'resource_class', 'obligations.'),
    field_classes: record(o, 'field_classes', (x) => typeof x === 'string', 'obligations.') as Record<string, string>,
    conflict_domain: o.conflict_domain === null ? null : str(o, 'conflict_domain', 'obligations.'),
  };
}

const invalid = (why: string) => new WritError('DECISION_INVALID', `decision ${why}`);
const missing = (prefix: string, name: string, what: string) =>
  invalid(`claim "${prefix}${name}" is missing or not ${what}`);

function isObject(v: unknown): v is object {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function str(o: Record<string, unknown>, name: string, prefix = ''): string {
  const v = o[name];
  if (typeof v !== 'string' || v === '') throw missing(prefix, name, 'a non-empty string');
  return v;
}

function num(o: Record<string, unknown>, name: string): number {
  const v = o[name];
  if (typeof v !== 'number' || !Number.isFinite(v)) throw missing('', name, 'a number');
  return v;
}

function bool(o: Record<string, unknown>, name: string, prefix: string): boolean {
  const v = o[name];
  if (typeof v !== 'boolean') throw missing(prefix, name, 'a boolean');
  return v;
}

function strings(o: Record<string, unknown>, name: string): string[] {
  const v = o[name];
  if (!Array.isArray(v) || v.some((x) => typeof x !== 'string')) throw missing('', name, 'an array of strings');
  return v as string[];
}

function record(o: Record<string, unknown>, name: string, ok: (v: unknown) => boolean, prefix = ''): Record<string, unknown> {
  const v = o[name];
  if (!isObject(v) || !Object.values(v).every(ok)) throw missing(prefix, name, 'an object of the right shape');
  return v as Record<string, unknown>;
}
