import {
  createLocalJWKSet,
  decodeProtectedHeader,
  jwtVerify,
  type CryptoKey,
  type JSONWebKeySet,
  type JWTPayload,
  type KeyObject,
} from 'jose';
import { WritError } from '../errors.js';
import { DECISION_ALG, DECISION_ISSUER, DECISION_TYP, payloadToClaims, type DecisionClaims } from './decision-claims.js';

/**
 * The verifier. It imports only jose and the error catalogue, so an offline client (the SDK) can
 * verify decisions against a fetched JWKS without pulling in the key ring's file-system code.
 */

/** Something that maps a `kid` to the public key that verifies it (the server's KeyRing is one). */
export interface DecisionKeyResolver {
  verificationKey(kid: string): CryptoKey | KeyObject | undefined;
}

export type DecisionKeys = DecisionKeyResolver | JSONWebKeySet;

export interface VerifyDecisionOptions {
  keys: DecisionKeys;
  /** The audience this verifier serves (e.g. the gateway); the token's `aud` must equal it. */
  audience: string;
  /** Milliseconds since the epoch, from the injected clock. */
  now: number;
  /** Accepted skew past expiry, in ms (default 0: a token is expired at the instant of `expires_at`). */
  clockToleranceMs?: number;
}

const localSets = new WeakMap<JSONWebKeySet, ReturnType<typeof createLocalJWKSet>>();

/**
 * Verifies a decision token and returns its claims. Accepts only EdDSA, typ `writ-decision+jwt`,
 * iss `writ`, a known kid and `aud` equal to `audience`.
 * Throws WritError `DECISION_EXPIRED` when expired at `now`, `DECISION_INVALID` (saying why) for
 * everything else. It does not check the binding to a request: see `checkDecisionBinding`.
 */
export async function verifyDecision(token: string, options: VerifyDecisionOptions): Promise<DecisionClaims> {
  const toleranceMs = options.clockToleranceMs ?? 0;
  if (typeof token !== 'string' || token === '') throw invalid('token is missing');
  let header;
  try {
    header = decodeProtectedHeader(token);
  } catch {
    throw invalid('token is malformed (not a compact JWS)');
  }
  if (header.alg !== DECISION_ALG) throw invalid(`algorithm ${JSON.stringify(header.alg)} is not allowed (only ${DECISION_ALG})`);
  if (header.typ !== DECISION_TYP) throw invalid(`typ ${JSON.stringify(header.typ)} is not ${DECISION_TYP}`);
  if (typeof header.kid !== 'string' || header.kid === '') throw invalid('header has no kid');
  const kid = header.kid;

  let payload: JWTPayload;
  try {
    const verifyOptions = {
      algorithms: [DECISION_ALG],
      typ: DECISION_TYP,
      issuer: DECISION_ISSUER,
      audience: options.audience,
      currentDate: new Date(options.now),
      clockTolerance: toleranceMs / 1000,
      requiredClaims: ['jti', 'sub', 'aud', 'iat', 'exp'],
    };
    if (isJwks(options.keys)) {
      let set = localSets.get(options.keys);
      if (!set) localSets.set(options.keys, (set = createLocalJWKSet(options.keys)));
      ({ payload } = await jwtVerify(token, set, verifyOptions));
    } else {
      const key = options.keys.verificationKey(kid);
      if (!key) throw invalid(`signing key ${kid} is not a known Writ key`);
      ({ payload } = await jwtVerify(token, key, verifyOptions));
    }
  } catch (e) {
    throw fromJose(e, kid);
  }

  if (typeof payload.aud !== 'string') throw invalid('audience must be a single string');
  const claims = payloadToClaims(payload);
  if (options.now >= claims.expires_at + toleranceMs) {
    throw new WritError('DECISION_EXPIRED', `decision ${claims.decision_id} expired at ${new Date(claims.expires_at).toISOString()}`);
  }
  return claims;
}

function isJwks(keys: DecisionKeys): keys is JSONWebKeySet {
  return Array.isArray((keys as JSONWebKeySet).keys);
}

const invalid = (why: string) => new WritError('DECISION_INVALID', `decision ${why}`);

function fromJose(e: unknown, kid: string): WritError {
  if (e instanceof WritError) return e;
  const code = (e as { code?: string }).code;
  switch (code) {
    case 'ERR_JWT_EXPIRED':
      return new WritError('DECISION_EXPIRED', 'decision expired');
    case 'ERR_JWS_SIGNATURE_VERIFICATION_FAILED':
      return invalid(`signature does not verify with key ${kid}`);
    case 'ERR_JWKS_NO_MATCHING_KEY':
      return invalid(`signing key ${kid} is not in the JWKS`);
    case 'ERR_JWKS_MULTIPLE_MATCHING_KEYS':
      return invalid(`signing key ${kid} is ambiguous in the JWKS`);
    case 'ERR_JOSE_ALG_NOT_ALLOWED':
      return invalid('algorithm is not allowed');
    case 'ERR_JWT_CLAIM_VALIDATION_FAILED': {
      const { claim, reason } = e as { claim: string; reason: string };
      if (reason === 'missing') return invalid(`claim "${claim}" is missing`);
      if (claim === 'aud') return invalid('was issued for another audience');
      if (claim === 'iss') return invalid('was not issued by writ');
      if (claim === 'typ') return invalid(`typ is not ${DECISION_TYP}`);
      return invalid(`claim "${claim}" is invalid`);
    }
    default:
      // Malformed base64/JSON, unusable key, crit headers, …: all just "not a valid decision".
      return invalid(`token is malformed or unusable (${code ?? (e as Error).name ?? 'error'})`);
  }
}
