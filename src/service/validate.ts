import { canonicalJson } from '../audit/canonical-json.js';
import { publicKeyFromJwk } from '../decision/index.js';
import { WritError } from '../errors.js';
import { nfcProblem, validatePattern } from '../graph/index.js';
import type { PublicJwk, Scope } from '../graph/model.js';
import { FENCING_SEPARATORS } from '../wire/fencing-header.js';
import type { ScopeInput } from '../wire/v1.js';
import { parseTime } from './time.js';

const ID = /^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$/;

export function checkId(value: string, what: string): string {
  if (!ID.test(value)) throw new WritError('UNPROCESSABLE', `${what} "${value}" must be 1-128 characters of letters, digits and . _ : @ - (starting with a letter or digit)`);
  return value;
}

/**
 * A reason an auditor will read (an edge's, a revocation's, an incident's): something other than blanks.
 * The HTTP schemas bound its length; this refuses the blank ones, whichever door they came in by.
 */
export function checkReason(reason: string, what: string): string {
  if (reason.trim().length === 0) throw new WritError('UNPROCESSABLE', `${what} needs a reason that is not blank (auditors read it)`);
  return reason;
}

/** A scope as callers write it (HTTP body, manifest, SDK): `risk_max` may sit at the top level or in constraints. */
export type { ScopeInput } from '../wire/v1.js';

function names(list: string[] | undefined, what: string, fallback: string[] | null): string[] {
  if (list === undefined) {
    if (fallback) return fallback;
    throw new WritError('UNPROCESSABLE', `scope.${what} is required`);
  }
  if (list.length === 0) throw new WritError('UNPROCESSABLE', `scope.${what} must not be empty (use ["*"] for every value)`);
  for (const v of list) {
    if (typeof v !== 'string' || v.length === 0 || /\s/.test(v)) throw new WritError('UNPROCESSABLE', `scope.${what} has an invalid entry "${String(v)}"`);
    // Requests are refused in any other spelling (checkFieldSpelling), so a name not in NFC would match none.
    const spelling = nfcProblem(v, `scope.${what}: entry`);
    if (spelling) throw new WritError('UNPROCESSABLE', spelling);
    // So are fields holding a separator of Writ-Fencing-Epoch (checkFieldSpelling).
    if (what === 'fields' && FENCING_SEPARATORS.test(v)) throw new WritError('UNPROCESSABLE', `scope.fields has an entry with "," or ";", which no field name holds (they separate coordination keys in Writ-Fencing-Epoch)`);
  }
  return [...new Set(list)].sort();
}

export function normalizeScope(input: ScopeInput): Scope {
  const resources = names(input.resources, 'resources', null);
  for (const p of resources) {
    const problem = validatePattern(p);
    if (problem) throw new WritError('UNPROCESSABLE', `scope.resources: ${problem}`);
  }
  const constraints: Record<string, unknown> = { ...(input.constraints ?? {}) };
  if (input.risk_max !== undefined && constraints.risk_max !== undefined && input.risk_max !== constraints.risk_max) {
    throw new WritError('UNPROCESSABLE', `scope.risk_max (${String(input.risk_max)}) and scope.constraints.risk_max (${String(constraints.risk_max)}) differ: give one of them`);
  }
  const risk = input.risk_max ?? (constraints.risk_max as number | undefined);
  if (typeof risk !== 'number' || !Number.isInteger(risk) || risk < 0) {
    // Every scope bounds the risk it carries: there is no default, so a missing bound says so.
    throw new WritError('UNPROCESSABLE', risk === undefined
      ? 'scope.risk_max is missing: every scope names the highest risk it allows (a non-negative integer, e.g. "risk_max": 1; or scope.constraints.risk_max)'
      : `scope.risk_max (or scope.constraints.risk_max) must be a non-negative integer, got ${JSON.stringify(risk)}`);
  }
  constraints.risk_max = risk;
  return {
    actions: names(input.actions, 'actions', null),
    resources,
    environments: names(input.environments, 'environments', ['*']),
    fields: names(input.fields, 'fields', ['*']),
    constraints: constraints as Scope['constraints'],
  };
}

export function window(notBefore: string | number | null | undefined, expiresAt: string | number | null | undefined): { not_before: number | null; expires_at: number | null } {
  const nb = parseTime(notBefore, 'not_before');
  const ex = parseTime(expiresAt, 'expires_at');
  if (nb !== null && ex !== null && ex <= nb) throw new WritError('UNPROCESSABLE', 'expires_at must be after not_before');
  return { not_before: nb, expires_at: ex };
}

/** As many keys as a principal may have (POST /v1/principals' schema; a manifest's keys and key_files together). */
export const MAX_PRINCIPAL_KEYS = 16;

export function checkPublicKeys(keys: PublicJwk[]): PublicJwk[] {
  if (keys.length > MAX_PRINCIPAL_KEYS) throw new WritError('UNPROCESSABLE', `a principal has at most ${MAX_PRINCIPAL_KEYS} keys, not ${keys.length}`);
  const seen = new Set<string>();
  for (const k of keys) {
    if (typeof k !== 'object' || k === null) throw new WritError('UNPROCESSABLE', 'keys must be JWK objects');
    if ('d' in k || 'p' in k || 'q' in k) throw new WritError('UNPROCESSABLE', `key ${String(k.kid)} contains private key material; register the public key only`);
    if (typeof k.kid !== 'string' || k.kid.length === 0) throw new WritError('UNPROCESSABLE', 'every key needs a kid');
    if (!((k.kty === 'OKP' && k.crv === 'Ed25519') || (k.kty === 'EC' && k.crv === 'P-256'))) {
      throw new WritError('UNPROCESSABLE', `key ${k.kid}: only Ed25519 (OKP) and P-256 (EC) keys are accepted`);
    }
    const coordinate = (v: unknown) => typeof v === 'string' && /^[A-Za-z0-9_-]{16,}$/.test(v);
    if (!coordinate(k.x) || (k.kty === 'EC' && !coordinate(k.y))) {
      throw new WritError('UNPROCESSABLE', `key ${k.kid}: the public key is incomplete (${k.kty === 'EC' ? 'x and y' : 'x'} must be base64url)`);
    }
    try {
      // Imported as every verifier will import it: a key that can never verify anything (not on its
      // curve), or would verify forgeries (an Ed25519 point of small order), is refused here.
      publicKeyFromJwk(k);
    } catch (e) {
      throw new WritError('UNPROCESSABLE', `key ${k.kid} is not a usable ${k.kty === 'EC' ? 'P-256' : 'Ed25519'} public key: ${e instanceof Error ? e.message : String(e)}`);
    }
    if (seen.has(k.kid)) throw new WritError('UNPROCESSABLE', `duplicate kid ${k.kid}`);
    seen.add(k.kid);
  }
  return keys;
}

/** The public half of a JWK: every private member (d, and p, q, dp, dq, qi of RSA) dropped. */
export function publicPart(jwk: Record<string, unknown>): PublicJwk {
  const { d: _d, p: _p, q: _q, dp: _dp, dq: _dq, qi: _qi, ...pub } = jwk;
  return pub as PublicJwk;
}

/** Structural equality of JSON-like values, key order ignored (for idempotent manifests). */
export function sameJson(a: unknown, b: unknown): boolean {
  return canonicalJson(a) === canonicalJson(b);
}
