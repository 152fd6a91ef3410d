import type { KeyObject } from 'node:crypto';
import { WritError } from '../errors.js';
import type { PublicJwk } from '../graph/model.js';
import type { ReplayGuard, SingleUseTx, SpendRefusal } from './single-use.js';
import { behindDatabase, CLOCK_NOISE_MS, CLOCK_SKEW_TOLERATED_MS, clockOffsetDetail, instant, issuedAhead, replicaClock } from './clock-refusal.js';
import { SESSION_TOKEN_PREFIX, sessionInvalid, sessionMacVerifies, sessionsDisabled, type CallerSessions } from './caller-session.js';
import { audienceIncludes, decodeCompactJws, publicKeyFromJwk, timeClaimProblem, verifyJwsSignatureAsync, type DecodedJws } from './jws.js';

export interface CallerAuthDeps {
  /** The registered principal, or undefined when there is none. */
  principal(id: string): { keys: PublicJwk[]; revoked_at: number | null } | undefined;
  replay: ReplayGuard;
  /** Milliseconds since the epoch, from the injected clock. */
  now: number;
  /** What `aud` must equal (this Writ deployment). */
  audience: string;
  /** Longest accepted assertion lifetime: exp − iat, and exp − now (plus tolerance). Default 300 000 ms. */
  maxTtlMs?: number;
  /**
   * Skew allowed between the caller's clock and ours, in ms (default 5 000): an assertion is accepted
   * until `exp + tolerance` and may be issued up to `tolerance` in the future. Its jti is remembered
   * until `exp + tolerance`, so it cannot be replayed inside that window either.
   */
  clockToleranceMs?: number;
  /**
   * Whether verifying reads the store for a jti spent already (default true). Off where the request
   * spends the jti anyway (authenticateCaller; the use cases that spend it with their effect): that
   * spend decides across processes, a replay fails its transaction and nothing of it lands, and the read
   * would cost a transaction of its own (two round trips on PostgreSQL). A replay to the same process
   * is still refused at once (the in-memory mark).
   */
  readSpent?: boolean;
  /**
   * This process's clock minus its store's (PostgreSQL: the database's), ms, as last measured, or
   * undefined. Only words come of it: a caller refused for a clock off Writ's by more than the tolerance,
   * where this replica's own clock is that far off the database's the same way, is told that the fault is
   * more likely this replica's clock.
   */
  clockOffsetMs?: number | undefined;
  /**
   * The request the token authenticates: its method (upper case) and its URL as sent (the HTTP
   * request object itself will do: nothing is built for it). Only a caller session's request token
   * reads it: it must name the method (`htm`) and the path, the URL without its query (`htu`).
   */
  request?: { readonly method: string; readonly url: string };
  /**
   * Set when the assertion opens a caller session (POST /v1/sessions): the X25519 public key of the body.
   * The assertion must be bound to it and to this request (`request`), RFC 7800 / DPoP style: claims
   * `cnf.jwk` = this key (kty, crv, x) and `htm`/`htu` = the request's method and path. So an assertion that
   * leaked before it was used buys at most one request, never a session under another party's key.
   */
  sessionKey?: { kty: 'OKP'; crv: 'X25519'; x: string };
  /**
   * Caller sessions (caller-session.ts): an HS256 request token is checked against its session's key.
   * Without this, HS256 is refused as any algorithm other than an assertion's (approvals).
   */
  sessions?: {
    /** The key ring's sessions, or null when they are turned off (WRIT_CALLER_SESSION_MAX_TTL_MS=0): CALLER_SESSIONS_DISABLED. */
    open: CallerSessions | null;
    /**
     * WRIT_CALLER_SESSION_MAX_TTL_MS as this process has it: a session also ends this long after it was
     * opened, so a limit lowered since holds for the sessions sealed under the old one.
     */
    maxTtlMs?: number;
    /** Set where a session may not authenticate (opening a session): UNAUTHENTICATED with this message. */
    refused?: string;
  };
}

export interface AuthenticatedCaller {
  principal: string;
  /** The registered key (its kid) that signed the assertion. */
  kid: string;
  /** That key's public material (`keyMaterial`): a key registered anew under the same kid is another key. */
  key: string;
  jti: string;
  /** ms since the epoch. */
  expiresAt: number;
  /** Until when (ms) the jti must be remembered once spent: exp plus the clock tolerance. */
  spendUntil: number;
}

export const ASSERTION_ALGORITHMS = ['EdDSA', 'ES256'] as const;
type AssertionAlgorithm = (typeof ASSERTION_ALGORITHMS)[number];
const REQUIRED_CLAIMS = ['iss', 'sub', 'aud', 'iat', 'exp', 'jti'] as const;
/** A jti is kept (in memory and on disk) until its assertion expires: a bounded size keeps that bounded. */
const MAX_JTI_LENGTH = 255;
const REPLAY_NAMESPACE = 'assertion';

/**
 * Authenticates a caller from `Authorization: Bearer <assertion>`: a JWT with iss = sub = principal,
 * aud = `audience`, signed by one of the principal's registered keys (named by `kid`), short-lived,
 * with a `jti` never seen before, which it then spends (one commit). Every failure is
 * `UNAUTHENTICATED` with a message naming the check that failed; no message contains key material.
 */
export async function authenticateCaller(authorizationHeader: string | undefined, deps: CallerAuthDeps): Promise<AuthenticatedCaller> {
  const caller = await verifyCallerAssertion(authorizationHeader, Object.assign({}, deps, { readSpent: false }));
  await deps.replay.store.readWrite((tx) => spendAssertion(deps.replay, tx, caller, deps.now));
  return caller;
}

/**
 * The same checks as `authenticateCaller`, the jti included (a replay is refused here already), but
 * the jti is left unspent: the caller must `spendAssertion` in the transaction that records what the
 * request did (the gateway spends it with the write's intent or rejection, one commit instead of two).
 */
export async function verifyCallerAssertion(authorizationHeader: string | undefined, deps: CallerAuthDeps): Promise<AuthenticatedCaller> {
  const maxTtlMs = deps.maxTtlMs ?? 300_000;
  const toleranceMs = deps.clockToleranceMs ?? CLOCK_SKEW_TOLERATED_MS;
  const { now } = deps;

  if (authorizationHeader === undefined || authorizationHeader.trim() === '') throw refuse('missing Authorization header');
  const m = /^Bearer[ \t]+([A-Za-z0-9_\-.]+)[ \t]*$/i.exec(authorizationHeader);
  if (!m) throw refuse('Authorization header is not a Bearer token');
  const token = m[1]!;

  let jws: DecodedJws;
  try {
    jws = decodeCompactJws(token);
  } catch {
    throw refuse('malformed assertion (not a compact JWT)');
  }
  const { header, payload } = jws;
  let principalId: string;
  let principal: { keys: PublicJwk[]; revoked_at: number | null };
  let signer: { kid: string; key: string };
  let bound: { method: string; path: string } | undefined;
  if (header.alg === 'HS256' && deps.sessions !== undefined) {
    ({ principalId, principal, signer, bound } = checkSessionToken(jws, deps, deps.sessions));
  } else {
    const alg = header.alg as AssertionAlgorithm;
    if (!ASSERTION_ALGORITHMS.includes(alg)) {
      throw refuse(`assertion algorithm ${JSON.stringify(header.alg)} is not allowed (${ASSERTION_ALGORITHMS.join(', ')})`);
    }
    if (typeof header.kid !== 'string' || header.kid === '') throw refuse('malformed assertion: header has no kid');
    const { iss, sub } = payload;
    if (typeof iss !== 'string' || iss === '') throw refuse('malformed assertion: no iss');
    if (iss !== sub) throw refuse('assertion iss and sub differ (both must name the calling principal)');
    principalId = iss;

    const registered = deps.principal(principalId);
    if (!registered) throw refuse(`unknown principal ${principalId}`);
    principal = registered;
    const jwk = principal.keys.find((k) => k.kid === header.kid);
    if (!jwk) throw refuse(`principal ${principalId} has no key with kid ${header.kid}`);
    const key = publicKey(jwk, alg, principalId);
    if (!(await verifyJwsSignatureAsync(jws, alg, key))) throw refuse('assertion signature does not verify with the named key');
    signer = { kid: header.kid, key: keyMaterial(jwk) };
  }

  // The claims, in the order jose checked them before (so a token broken twice is refused alike).
  for (const claim of REQUIRED_CLAIMS) {
    if (payload[claim] === undefined) throw refuse(`malformed assertion: claim ${claim} is missing`);
  }
  if (!audienceIncludes(payload.aud, deps.audience)) throw refuse('assertion is for another audience');
  const time = timeClaimProblem(payload, now, toleranceMs);
  // Only a refusal asks what to add about this replica's clock.
  const replica = () => replicaClock(deps.clockOffsetMs, toleranceMs, 'the caller\'s');
  if (time?.kind === 'past') throw refuse(expired(payload.exp as number, now, toleranceMs) + replica().ahead);
  if (time?.kind === 'early') throw refuse(`assertion is not yet valid (nbf)${aheadOfWrit('nbf', payload.nbf as number, now, toleranceMs)}${replica().behind}`);
  if (time) throw refuse(`assertion claim ${time.claim} is invalid`);

  // iat and exp are numbers here, and exp is not past (with tolerance).
  const expMs = (payload.exp as number) * 1000;
  const iatMs = (payload.iat as number) * 1000;
  if (iatMs > now + toleranceMs) throw refuse(`assertion is issued in the future${aheadOfWrit('iat', payload.iat as number, now, toleranceMs)}${replica().behind}`);
  if (expMs - iatMs > maxTtlMs || expMs - now > maxTtlMs + toleranceMs) throw refuse(`assertion lifetime is longer than ${maxTtlMs / 1000} s`);
  if (typeof payload.jti !== 'string' || payload.jti === '') throw refuse('malformed assertion: jti is not a string');
  if (payload.jti.length > MAX_JTI_LENGTH) throw refuse(`malformed assertion: jti is longer than ${MAX_JTI_LENGTH} characters`);
  if (typeof payload.aud !== 'string') throw refuse('assertion audience must be a single string');
  // Revoked whatever the time recorded: a replica whose clock is ahead may have recorded it (as the graph's pruning reads it).
  if (principal.revoked_at !== null) throw refuse(`principal ${principalId} is revoked`);

  const caller = { principal: principalId, kid: signer.kid, key: signer.key, jti: payload.jti, expiresAt: expMs, spendUntil: expMs + toleranceMs };
  // Accepted only while its spend is remembered (whole-second exp checks alone leave up to 1 s more).
  if (now >= caller.spendUntil) throw refuse(expired(payload.exp as number, now, toleranceMs) + replica().ahead);
  // A session's request token is for one request: its method and path.
  if (bound !== undefined) {
    const other = otherRequest(payload, bound);
    if (other !== null) throw refuse(`request token ${other}`);
  }
  // The assertion opening a session is bound to the session's key and to this request (before any spend).
  if (deps.sessionKey !== undefined) checkSessionOpeningBinding(payload, deps.sessionKey, deps.request);
  // Spent already (durably), or shown to this process before and not yet spent: either way a replay.
  if (deps.readSpent !== false && (await deps.replay.isSpent(REPLAY_NAMESPACE, replayId(caller), now))) throw replayed();
  if (!deps.replay.present(REPLAY_NAMESPACE, replayId(caller), caller.spendUntil, now)) throw replayed();
  return caller;
}

/**
 * A caller session's request token (HS256, its kid the session token), up to its claims: the session
 * is opened (or found in the cache), the MAC verifies with the session's key, the session is not
 * expired, its principal still holds the key that opened it, and iss = sub = the session's principal.
 * The token is only ever checked against K: never against a registered key (no algorithm confusion).
 */
function checkSessionToken(jws: DecodedJws, deps: CallerAuthDeps, sessions: NonNullable<CallerAuthDeps['sessions']>) {
  const { header, payload } = jws;
  const kid = header.kid;
  if (typeof kid !== 'string' || !kid.startsWith(SESSION_TOKEN_PREFIX)) throw refuse('HS256 is only for caller sessions: its kid must be a session token (POST /v1/sessions)');
  if (sessions.refused !== undefined) throw refuse(sessions.refused);
  if (sessions.open === null) throw sessionsDisabled();
  if (deps.request === undefined) throw refuse('a caller session cannot authenticate this request');
  const session = sessions.open.unseal(kid);
  // The MAC first: the session token travels in every request's header, and who holds only it (not K)
  // learns nothing from the answer (not whether its principal was revoked or its key removed).
  if (!sessionMacVerifies(session, jws.signingInput, jws.signature)) throw refuse('request token MAC does not verify with the session\'s key');
  if (deps.now >= session.expMs) throw sessionInvalid(`the session expired at ${instant(session.expMs)} (Writ's time ${instant(deps.now)})`);
  if (sessions.maxTtlMs !== undefined && deps.now >= session.iatMs + sessions.maxTtlMs) {
    throw sessionInvalid(`the session ended at ${instant(session.iatMs + sessions.maxTtlMs)}, WRIT_CALLER_SESSION_MAX_TTL_MS (${sessions.maxTtlMs} ms) after it was opened (Writ's time ${instant(deps.now)})`);
  }
  const principal = deps.principal(session.principal);
  if (!principal) throw refuse(`principal ${session.principal} no longer exists`);
  if (principal.revoked_at !== null) throw refuse(`principal ${session.principal} is revoked`);
  if (!principal.keys.some((k) => k.kid === session.kid && keyMaterial(k) === session.key)) {
    throw sessionInvalid(`principal ${session.principal} no longer has the key ${session.kid} that opened the session`);
  }
  if (payload.iss !== session.principal || payload.sub !== session.principal) throw refuse(`request token iss and sub must both be the session's principal ${session.principal}`);
  if (payload.htm === undefined || payload.htu === undefined) throw refuse(`malformed request token: claim ${payload.htm === undefined ? 'htm' : 'htu'} is missing`);
  return { principalId: session.principal, principal, signer: { kid: session.kid, key: session.key }, bound: boundRequest(deps.request) };
}

/** What `htm`/`htu` are compared with: the request's method and its path as sent, without the query. */
function boundRequest(request: NonNullable<CallerAuthDeps['request']>): { method: string; path: string } {
  const query = request.url.indexOf('?');
  return { method: request.method, path: query < 0 ? request.url : request.url.slice(0, query) };
}

/**
 * Why a token bound to a request (`htm`, `htu`: DPoP style) is not bound to this one, or null: the one
 * comparison, for session request tokens and session openings. `htu` is the path as sent, without the query.
 */
function otherRequest(payload: Record<string, unknown>, request: { method: string; path: string }): string | null {
  if (payload.htm !== request.method) return `is for ${JSON.stringify(payload.htm)} requests, not ${request.method} (htm)`;
  if (payload.htu !== request.path) return `is for the path ${JSON.stringify(payload.htu)}, not ${request.path} (htu)`;
  return null;
}

/**
 * The assertion opening a caller session must name the body's X25519 key in `cnf.jwk` (RFC 7800) and this
 * request in `htm`/`htu`: UNAUTHENTICATED otherwise, saying what to add (the caller spends nothing).
 */
function checkSessionOpeningBinding(payload: Record<string, unknown>, key: { kty: string; crv: string; x: string }, sent: CallerAuthDeps['request']): void {
  if (sent === undefined) throw new WritError('INTERNAL', 'a session opening is checked without its request');
  const request = boundRequest(sent);
  const add = `the assertion opening a session must carry "cnf": {"jwk": {"kty": "OKP", "crv": "X25519", "x": ${JSON.stringify(key.x)}}} (the body's public_key), `
    + `"htm": ${JSON.stringify(request.method)} and "htu": ${JSON.stringify(request.path)}, so that an assertion that leaked cannot open a session under another key; nothing was spent`;
  const cnf = payload.cnf;
  const jwk = cnf !== null && typeof cnf === 'object' ? (cnf as { jwk?: unknown }).jwk : undefined;
  if (jwk === null || typeof jwk !== 'object' || Array.isArray(jwk)) {
    throw refuse(`assertion has no cnf.jwk: ${add}`);
  }
  const named = jwk as Record<string, unknown>;
  // A client that put its private X25519 key here has leaked it to every log the assertion passes: say so, open nothing.
  if ('d' in named) throw refuse('assertion\'s cnf.jwk carries a private key (d): never send it; make a new X25519 key pair and name only its public x');
  if (named.kty !== key.kty || named.crv !== key.crv || named.x !== key.x) {
    throw refuse(`assertion's cnf.jwk names another key than the body's public_key: ${add}`);
  }
  if (payload.htm === undefined || payload.htu === undefined) throw refuse(`assertion has no ${payload.htm === undefined ? 'htm' : 'htu'}: ${add}`);
  const other = otherRequest(payload, request);
  if (other !== null) throw refuse(`assertion ${other}: ${add}`);
}

/** A public key's identity: its type, curve and coordinates (not its kid, which a registration may reuse). */
export function keyMaterial(jwk: PublicJwk): string {
  return `${jwk.kty}|${jwk.crv}|${jwk.x}|${jwk.y ?? ''}`;
}

/**
 * Why a caller authenticated earlier (a lease stream's opening assertion) is no longer who it was, or
 * null if it still is: its principal is gone or revoked, or no longer has the very key that signed the
 * assertion (the same kid with other key material is another key: a rotation of a compromised key ends it).
 * A revocation counts whatever time it was recorded at (a replica whose clock is ahead may have recorded it).
 */
export function callerNoLongerValid(caller: AuthenticatedCaller, principal: CallerAuthDeps['principal']): string | null {
  const p = principal(caller.principal);
  if (!p) return `principal ${caller.principal} no longer exists`;
  if (p.revoked_at !== null) return `principal ${caller.principal} is revoked`;
  if (!p.keys.some((k) => k.kid === caller.kid && keyMaterial(k) === caller.key)) return `principal ${caller.principal} no longer has the key ${caller.kid} that authenticated it`;
  return null;
}

/**
 * Spends a verified assertion's jti, or fails the transaction with UNAUTHENTICATED: replayed (already
 * spent) or expired (past the time its spend would be remembered). Call it inside a transaction to
 * make the spend part of it; the unique row decides between racing requests, at the latest at the
 * commit. Afterwards the in-memory mark of `verifyCallerAssertion` is dropped: the row answers for it
 * from now on, or, if the spend failed, nothing was spent and the assertion may be tried again.
 */
export async function spendAssertion(replay: ReplayGuard, tx: SingleUseTx, caller: AuthenticatedCaller, now: number): Promise<void> {
  try {
    if (now >= caller.spendUntil) throw refuse('assertion expired before its request took effect');
    // The outcome may be known only at commit (SingleUseStore.spendOrRefuse): a replay fails the whole transaction.
    await tx.singleUse.spendOrRefuse(REPLAY_NAMESPACE, replayId(caller), caller.spendUntil, now, (why) => spendRefused(why, caller, now));
  } finally {
    replay.forget(REPLAY_NAMESPACE, replayId(caller));
  }
}

/**
 * The request did not use a verified assertion after all (an approval given to a decision that was
 * denied or only explained): its in-memory mark is dropped and it may be presented again.
 */
export function releaseAssertion(replay: ReplayGuard, caller: AuthenticatedCaller): void {
  replay.forget(REPLAY_NAMESPACE, replayId(caller));
}

/** Whether an error is the refusal of an assertion already spent. */
export function isReplayedAssertion(e: unknown): boolean {
  return e instanceof WritError && e.code === 'UNAUTHENTICATED' && e.message === REPLAYED_MESSAGE;
}

/**
 * Who calls a use case: a principal id (already authenticated, its assertion spent) or a verified
 * assertion still to be spent, which the use case spends in the transaction that records what the
 * request did. `spend` is a no-op for a principal id.
 */
export function callerOf(who: string | AuthenticatedCaller, replay: ReplayGuard, now: () => number): { principal: string; spend: (tx: SingleUseTx) => Promise<void> } {
  if (typeof who === 'string') return { principal: who, spend: async () => {} };
  return { principal: who.principal, spend: (tx) => spendAssertion(replay, tx, who, now()) };
}

/**
 * A refused spend: a replay, or an assertion past the time its spend would be remembered by the
 * store's clock though not by Writ's. On PostgreSQL that clock is the database's, and a gap of more than
 * the skew tolerated is this replica's clock being behind the database's (an assertion made by a caller
 * whose clock follows this replica's, fresh by it, is then expired by the database's): that is said,
 * with the gap, so the operator fixes the clock instead of hunting a replay. Refused either way.
 */
function spendRefused(why: SpendRefusal, caller: AuthenticatedCaller, now: number): WritError {
  if (why.reason === 'spent') return replayed();
  if (why.storeNow - now <= CLOCK_NOISE_MS) return refuse('assertion expired before its request took effect');
  return new WritError('UNAUTHENTICATED', behindDatabase('assertion', caller.spendUntil, why.storeNow, now), clockOffsetDetail(why.storeNow, now));
}

/** Scoped by principal: one caller's jti choices can never burn another's. */
const replayId = (caller: AuthenticatedCaller) => `${caller.principal}\u0000${caller.jti}`;
const REPLAYED_MESSAGE = 'assertion jti was already used (replayed)';
const replayed = () => refuse(REPLAYED_MESSAGE);

const refuse = (why: string) => new WritError('UNAUTHENTICATED', why);

/** Imported verification keys, by their public coordinates (the same key registered twice imports once). */
const keyCache = new Map<string, KeyObject>();
const KEY_CACHE_LIMIT = 10_000;

function publicKey(jwk: PublicJwk, alg: AssertionAlgorithm, principalId: string): KeyObject {
  const expected = jwk.kty === 'OKP' && jwk.crv === 'Ed25519' ? 'EdDSA' : jwk.kty === 'EC' && jwk.crv === 'P-256' ? 'ES256' : undefined;
  if (expected !== alg) {
    throw refuse(`assertion algorithm ${alg} does not match key ${jwk.kid} of principal ${principalId}`);
  }
  const cacheKey = `${alg}|${jwk.x}|${jwk.y ?? ''}`;
  let key = keyCache.get(cacheKey);
  if (!key) {
    try {
      // Only the public members: a registered JWK carrying more never turns into a private or secret key.
      key = publicKeyFromJwk(jwk);
    } catch (e) {
      // Registration refuses such keys; one registered before that check lands here (libsodium refused it already).
      throw refuse(`registered key ${jwk.kid} of principal ${principalId} is unusable (${(e as Error).message}); register a good key for it`);
    }
    if (keyCache.size >= KEY_CACHE_LIMIT) keyCache.clear();
    keyCache.set(cacheKey, key);
  }
  return key;
}

/** Why an assertion dated after Writ's time (`claim` in seconds) is refused: the caller's clock is probably ahead. */
const aheadOfWrit = (claim: string, seconds: number, now: number, toleranceMs: number) =>
  issuedAhead(claim, seconds * 1000, now, toleranceMs, 'the caller\'s clock', 'send a new assertion');

/**
 * Why an expired assertion is refused. One made for this request (as the SDK makes one per request)
 * that Writ finds expired was made by a clock behind Writ's; else it is an old one sent again.
 */

function expired(expSeconds: number, now: number, toleranceMs: number): string {
  return `assertion expired: its exp ${instant(expSeconds * 1000)} is ${((now - expSeconds * 1000) / 1000).toFixed(1)} s before Writ's time ${instant(now)}, `
    + `beyond the ${toleranceMs / 1000} s of clock skew tolerated; sign a new assertion for each request, and if this one was just made, `
    + 'the caller\'s clock is behind: set it right (NTP)';
}
