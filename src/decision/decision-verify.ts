import { createHash, type KeyObject } from 'node:crypto';
import type { JSONWebKeySet } from 'jose';
import { WritError } from '../errors.js';
import { DECISION_ALG, DECISION_ISSUER, DECISION_TYP, payloadToClaims, type DecisionClaims } from './decision-claims.js';
import { BoundedMap } from './bounded-map.js';
import { CLOCK_SKEW_TOLERATED_MS, issuedAhead, replicaClock } from './clock-refusal.js';
import { audienceIncludes, decodeCompactJws, publicKeyFromJwk, timeClaimProblem, verifyJwsSignatureAsync, type DecodedJws } from './jws.js';

/**
 * The verifier. It imports only node:crypto, the JWS helpers, the error catalogue, the clock refusals' words and a bounded map, so an offline
 * client (the SDK) can verify decisions against a fetched JWKS without pulling in the key ring's
 * file-system code, nor libsodium: Ed25519 is checked by the process's implementation (ed25519.ts),
 * node:crypto's in the SDK, libsodium's in the server.
 */

/** Something that maps a `kid` to the public key that verifies it (the server's KeyRing is one). */
export interface DecisionKeyResolver {
  verificationKey(kid: string): KeyObject | undefined;
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
  /**
   * How far after `now` a decision may be issued, in ms (default DECISION_ISSUED_AHEAD_MS, 5 000). A
   * decision is used just after it is signed, so one issued later than that was signed by a clock ahead of
   * this verifier's: accepted, it would live here for its TTL plus the gap. Not `clockToleranceMs`, whose 0
   * keeps expiry exact (and the key ring's retirement counts on it): a replica a few ms ahead is no fault.
   */
  issuedAheadToleranceMs?: number;
  /**
   * Longest lifetime accepted (expires_at − issued_at), ms; default none (an offline client does not know
   * the server's). The server passes its WRIT_DECISION_TTL_MS: every replica gives decisions the same.
   */
  maxLifetimeMs?: number;
  /** This process's clock minus its database's (ms) as last measured, or undefined: only words (see `replicaClock`). */
  clockOffsetMs?: number | undefined;
  /** Whose clock `now` is, for messages (default "Writ's"; the SDK's "this client's"). */
  clockOf?: string;
}

/**
 * The skew tolerated by default between the clock that signed a decision and the verifier's (ms): the
 * one caller assertions get (caller-auth.ts), so that replicas are held to one figure. Every verifier in
 * the server and the SDK uses it.
 */
export const DECISION_ISSUED_AHEAD_MS = CLOCK_SKEW_TOLERATED_MS;

/** Imported JWKS keys, per fetched JWKS object and kid. */
const jwksKeys = new WeakMap<JSONWebKeySet, Map<string, KeyObject>>();
const REQUIRED_CLAIMS = ['jti', 'sub', 'aud', 'iat', 'exp'] as const;

/**
 * Tokens known to carry a good signature, each with the key it verifies with: tokens whose signature
 * verified here, and tokens this process signed itself (`trustIssued`). A lease holder presents the
 * same decision on every acquisition (it lives up to 30 s), and an agent presents to the gateway the
 * decision this Writ just signed for it, so the Ed25519 check (~50 µs of CPU here in the server, ~80 in the SDK) is done at most once
 * per token, and never for a token signed here. Keyed by the SHA-256 of the whole token (any changed
 * byte is another key, so a tampered token is always checked; ~100 bytes an entry whatever the token's
 * size), and used only while the resolver still maps the kid to that very key object (a retired or
 * rotated-out key is never reused). Every claim is checked again on each call. Bounded: the oldest
 * entries go first; 16,384 covers ~16 s of decisions at 1,000/s.
 */
const knownGood = new BoundedMap<KeyObject>(16_384);

/**
 * What was read from the tokens verified most recently (the header checked, the kid, the payload, and
 * the claims once they passed), by the same digest and under the same rule as knownGood: a lease holder
 * presenting its decision again is not decoded again. ~1.3 KB an entry, so fewer entries: a decision
 * the gateway takes is spent by its one write, and those presented again (lease acquisitions) are few.
 */
interface ReadToken {
  key: KeyObject;
  kid: string;
  payload: Record<string, unknown>;
  claims?: DecisionClaims;
}
const recentlyRead = new BoundedMap<ReadToken>(2_048);

const tokenDigest = (token: string) => createHash('sha256').update(token).digest('base64');

/**
 * Records a token this process has just signed with the private half of `key` (the published public
 * key object the resolver returns for its kid): `verifyDecision` then skips its signature check.
 */
export function trustIssued(token: string, key: KeyObject): void {
  knownGood.set(tokenDigest(token), key);
}

/** Decodes the token and checks its header, its key and its signature (see knownGood); remembers what it read. */
async function readVerified(token: string, digest: string, keys: DecisionKeys): Promise<ReadToken> {
  let jws: DecodedJws;
  try {
    jws = decodeCompactJws(token);
  } catch {
    throw invalid('token is malformed (not a compact JWS)');
  }
  const header = jws.header;
  if (header.alg !== DECISION_ALG) throw invalid(`algorithm ${JSON.stringify(header.alg)} is not allowed (only ${DECISION_ALG})`);
  if (header.typ !== DECISION_TYP) throw invalid(`typ ${JSON.stringify(header.typ)} is not ${DECISION_TYP}`);
  if (typeof header.kid !== 'string' || header.kid === '') throw invalid('header has no kid');
  const kid = header.kid;

  const key = keyFor(keys, kid);
  if (!key) throw invalid(`signing key ${kid} is not a known Writ key`);
  if (knownGood.get(digest) !== key) {
    if (!(await verifyJwsSignatureAsync(jws, DECISION_ALG, key))) throw invalid(`signature does not verify with key ${kid}`);
    knownGood.set(digest, key);
  }
  const read = { key, kid, payload: jws.payload };
  recentlyRead.set(digest, read);
  return read;
}

const keyFor = (keys: DecisionKeys, kid: string) => (isJwks(keys) ? jwksKey(keys, kid) : keys.verificationKey(kid));

/**
 * Verifies a decision token and returns its claims. Accepts only EdDSA, typ `writ-decision+jwt`,
 * iss `writ`, a known kid and `aud` equal to `audience`.
 * Throws WritError `DECISION_EXPIRED` when expired at `now`, `DECISION_INVALID` (saying why) for
 * everything else, a decision issued after `now` by more than `issuedAheadToleranceMs` included. It does not check the binding to a request: see `checkDecisionBinding`. The claims
 * returned are frozen: calls with the same token may share them.
 */
export async function verifyDecision(token: string, options: VerifyDecisionOptions): Promise<DecisionClaims> {
  const toleranceMs = options.clockToleranceMs ?? 0;
  if (typeof token !== 'string' || token === '') throw invalid('token is missing');
  const digest = tokenDigest(token);
  const known = recentlyRead.get(digest);
  // Read before, and its key is still the one the resolver gives for its kid: nothing to decode or verify.
  const read = known !== undefined && keyFor(options.keys, known.kid) === known.key ? known : await readVerified(token, digest, options.keys);

  const payload = read.payload;
  for (const claim of REQUIRED_CLAIMS) {
    if (payload[claim] === undefined) throw invalid(`claim "${claim}" is missing`);
  }
  if (payload.iss !== DECISION_ISSUER) throw invalid('was not issued by writ');
  if (!audienceIncludes(payload.aud, options.audience)) throw invalid('was issued for another audience');
  const time = timeClaimProblem(payload, options.now, toleranceMs);
  if (time?.kind === 'past') throw expired(typeof payload.jti === 'string' ? payload.jti : null, (payload.exp as number) * 1000);
  if (time) throw invalid(`claim "${time.claim}" is invalid`);

  if (typeof payload.aud !== 'string') throw invalid('audience must be a single string');
  const claims = (read.claims ??= deepFreeze(payloadToClaims(payload)));
  if (options.now >= claims.expires_at + toleranceMs) {
    throw expired(claims.decision_id, claims.expires_at);
  }
  // issued_at (ms), not iat (whole seconds, rounded down): the precise instant, as for expires_at.
  const aheadMs = options.issuedAheadToleranceMs ?? DECISION_ISSUED_AHEAD_MS;
  if (claims.issued_at > options.now + aheadMs) {
    throw invalid(`${claims.decision_id} is issued in the future${issuedAhead('iat', claims.issued_at, options.now, aheadMs, 'the clock of the Writ replica that signed it', 'decide again', options.clockOf)}`
      + replicaClock(options.clockOffsetMs, aheadMs, 'the signer\'s').behind);
  }
  const lifetime = claims.expires_at - claims.issued_at;
  if (options.maxLifetimeMs !== undefined && lifetime > options.maxLifetimeMs) {
    throw invalid(`${claims.decision_id} lives ${(lifetime / 1000).toFixed(1)} s (issued_at to expires_at), longer than the ${options.maxLifetimeMs / 1000} s a decision is given here (WRIT_DECISION_TTL_MS): `
      + 'the replica that signed it is configured otherwise; give every replica the same WRIT_DECISION_TTL_MS');
  }
  return claims;
}

/** Freezes `value` and everything in it (claims are plain JSON data). */
function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}

function isJwks(keys: DecisionKeys): keys is JSONWebKeySet {
  return Array.isArray((keys as JSONWebKeySet).keys);
}

/**
 * The JWKS key with this kid, usable for EdDSA: exactly one must match (as jose's local JWKS had
 * it), and it must be an Ed25519 public key (`alg`, `use` when present must say so).
 */
function jwksKey(jwks: JSONWebKeySet, kid: string): KeyObject {
  let cache = jwksKeys.get(jwks);
  if (!cache) jwksKeys.set(jwks, (cache = new Map()));
  const cached = cache.get(kid);
  if (cached) return cached;
  const candidates = jwks.keys.filter((k) => k.kid === kid && k.kty === 'OKP' && k.crv === 'Ed25519' && (k.alg === undefined || k.alg === DECISION_ALG) && (k.use === undefined || k.use === 'sig'));
  if (candidates.length === 0) throw invalid(`signing key ${kid} is not in the JWKS`);
  if (candidates.length > 1) throw invalid(`signing key ${kid} is ambiguous in the JWKS`);
  let key: KeyObject;
  try {
    key = publicKeyFromJwk(candidates[0]!);
  } catch (e) {
    throw invalid(`signing key ${kid} in the JWKS is unusable (${(e as Error).message})`);
  }
  cache.set(kid, key);
  return key;
}

const invalid = (why: string) => new WritError('DECISION_INVALID', `decision ${why}`);

/** A decision is short-lived by design: the remedy is a new one, not a retry of this one. */
function expired(decisionId: string | null, expiresAtMs: number): WritError {
  const at = new Date(expiresAtMs);
  const when = Number.isNaN(at.getTime()) ? '' : ` at ${at.toISOString()}`;
  // Its id is named (its signature, issuer and audience were checked first): the refusal's receipt records
  // it, so that the refusal is found among the receipts of that decision.
  return new WritError('DECISION_EXPIRED', `decision${decisionId === null ? '' : ` ${decisionId}`} expired${when}: ask for a new decision (decide again) and use it at once`,
    decisionId === null ? undefined : { decision_id: decisionId });
}
