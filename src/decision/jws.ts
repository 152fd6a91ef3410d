import { createPublicKey, verify, type KeyObject } from 'node:crypto';
import { ed25519, ed25519PublicKeyProblem } from './ed25519.js';

/**
 * Compact JWS (RFC 7515) for the two token kinds Writ verifies on every write: caller assertions and
 * decisions. Decoding is strict. Ed25519 (EdDSA) is signed and checked by the process's implementation
 * (ed25519.ts: libsodium in the server, ~18 µs a signature and ~43–49 µs a check here); the server's
 * checks run on a worker thread of libsodium's while the event loop is busy and other requests are in
 * flight (ed25519-worker.ts, `verifyJwsSignatureAsync`), inline otherwise. ES256 (P-256, for caller
 * keys) is node:crypto's one-shot `verify`, on libuv's thread pool under the same condition (not jose's
 * WebCrypto, which measured p50 ~150 µs and p99 ~1.6 ms per token here). jose still makes keys and signs assertions (SDK); the claim
 * checks live with each verifier, which words its own refusals.
 */
export type JwsAlgorithm = 'EdDSA' | 'ES256';

export interface DecodedJws {
  header: Record<string, unknown>;
  payload: Record<string, unknown>;
  /** ASCII(BASE64URL(header) || '.' || BASE64URL(payload)): what the signature covers. */
  signingInput: string;
  signature: Buffer;
}

const SEGMENT = /^[A-Za-z0-9_-]*$/;

/**
 * Signs a compact JWS with an Ed25519 key (what Writ issues: decisions, console tokens, receipt
 * checkpoints): header `{ alg: 'EdDSA', kid, typ }`, the payload's JSON text as given (a caller that
 * needs canonical JSON passes it).
 */
export function signEdDsaJws(key: { kid: string; privateKey: KeyObject }, typ: string, payloadJson: string): string {
  const input = `${encodedHeader(key.kid, typ)}.${Buffer.from(payloadJson).toString('base64url')}`;
  return `${input}.${ed25519().sign(key.privateKey, Buffer.from(input)).toString('base64url')}`;
}

/** The encoded protected header of the last key that signed each `typ` (it changes only at a rotation). */
const headers = new Map<string, { kid: string; encoded: string }>();

function encodedHeader(kid: string, typ: string): string {
  const known = headers.get(typ);
  if (known?.kid === kid) return known.encoded;
  const encoded = Buffer.from(JSON.stringify({ alg: 'EdDSA', kid, typ })).toString('base64url');
  headers.set(typ, { kid, encoded });
  return encoded;
}

/**
 * Splits and decodes a compact JWS. Throws (a plain Error: callers word the refusal) unless it is
 * three canonical base64url segments whose first two are JSON objects (an empty signature decodes, so that an
 * `alg: none` token is refused for its algorithm, and never verifies). A `crit`
 * header is refused: Writ understands no extension, and RFC 7515 §4.1.11 says a verifier must then
 * reject the token. `b64: false` falls under the same rule.
 */
export function decodeCompactJws(token: string): DecodedJws {
  const parts = token.split('.');
  if (parts.length !== 3 || !parts.every((p) => SEGMENT.test(p))) throw new Error('not a compact JWS');
  const header = jsonObject(parts[0]!);
  const payload = jsonObject(parts[1]!);
  if ('crit' in header || 'b64' in header) throw new Error('unsupported critical header');
  return { header, payload, signingInput: `${parts[0]}.${parts[1]}`, signature: canonicalBase64url(parts[2]!) };
}

/**
 * The bytes of a base64url segment, only if the segment is their one canonical encoding (RFC 7515
 * §2: no padding, no line breaks; RFC 4648 §3.5: the unused low bits of the last character are
 * zero). Node's decoder ignores those bits, so `…A` and `…B` would decode alike: one token would
 * then have several spellings, and a decision's id, replay mark or hash could be sidestepped.
 */
function canonicalBase64url(segment: string): Buffer {
  const bytes = Buffer.from(segment, 'base64url');
  if (bytes.toString('base64url') !== segment) throw new Error('not canonical base64url');
  return bytes;
}

function jsonObject(segment: string): Record<string, unknown> {
  const value: unknown = JSON.parse(canonicalBase64url(segment).toString('utf8'));
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new Error('not a JSON object');
  return value as Record<string, unknown>;
}

/** The algorithm a public key verifies: EdDSA for Ed25519, ES256 for P-256; undefined for anything else. */
export function algorithmOf(key: KeyObject): JwsAlgorithm | undefined {
  if (key.type !== 'public') return undefined;
  if (key.asymmetricKeyType === 'ed25519') return 'EdDSA';
  if (key.asymmetricKeyType === 'ec' && key.asymmetricKeyDetails?.namedCurve === 'prime256v1') return 'ES256';
  return undefined;
}

/**
 * Whether the signature verifies with `key` under `alg`. False (never a throw) for a key of another
 * kind than `alg`, so a header cannot make an Ed25519 key verify anything else, or the reverse.
 */
export function verifyJwsSignature(jws: DecodedJws, alg: JwsAlgorithm, key: KeyObject): boolean {
  if (algorithmOf(key) !== alg) return false;
  const data = Buffer.from(jws.signingInput, 'ascii');
  if (alg === 'EdDSA') return ed25519().verify(key, data, jws.signature);
  // ES256 signatures are R || S, 64 bytes (RFC 7518 §3.4), not DER.
  return jws.signature.length === 64 && verify('sha256', data, { key, dsaEncoding: 'ieee-p1363' }, jws.signature);
}

/**
 * `verifyJwsSignature`, for the verifiers that may wait: the same answer, but while the event loop is
 * busy the check is made on another thread and the main thread parses, evaluates and commits other
 * requests meanwhile. EdDSA goes to the implementation's `verifyOffLoop` (the server's libsodium: a
 * worker thread, ed25519-worker.ts; OpenSSL has none and checks here), ES256 to libuv's thread pool
 * (node:crypto's `verify` with a callback). When there is nothing to overlap with, the two hand-offs
 * between threads (each a wake-up of an idle core) cost more than the check, and it is done here: when
 * the loop has been mostly idle lately, or when the server has no other request in flight (one client
 * calling in turn keeps the loop half busy, and each hand-off only added to its wait: 1-client decisions
 * and lease pairs 15% slower, measured).
 */
export function verifyJwsSignatureAsync(jws: DecodedJws, alg: JwsAlgorithm, key: KeyObject): Promise<boolean> {
  if (alg === 'EdDSA') {
    const impl = ed25519();
    if (impl.verifyOffLoop === undefined || !overlapPossible() || algorithmOf(key) !== alg) return Promise.resolve(checkOnLoop(jws, alg, key));
    checks.offLoop += 1;
    return impl.verifyOffLoop(key, Buffer.from(jws.signingInput, 'ascii'), jws.signature);
  }
  // A key of another kind or a signature of another length is refused at once, here (and counted as such).
  if (!overlapPossible() || algorithmOf(key) !== alg || jws.signature.length !== 64) return Promise.resolve(checkOnLoop(jws, alg, key));
  checks.offLoop += 1;
  const data = Buffer.from(jws.signingInput, 'ascii');
  return new Promise((resolve) => {
    verify('sha256', data, { key, dsaEncoding: 'ieee-p1363' }, jws.signature, (error, ok) => resolve(error === null && ok));
  });
}

/**
 * A public KeyObject from the public members of a JWK (anything private is ignored); throws, saying
 * why, if unusable. An Ed25519 `x` must be the canonical base64url of a point of the curve that is not
 * of small order (`ed25519PublicKeyProblem`: OpenSSL would import, and accept forged signatures for, a
 * small-order one); a P-256 point must be on its curve (OpenSSL checks that).
 */
export function publicKeyFromJwk(jwk: { kty?: unknown; crv?: unknown; x?: unknown; y?: unknown }): KeyObject {
  if (jwk.kty === 'OKP' && jwk.crv === 'Ed25519' && typeof jwk.x === 'string') {
    let raw: Buffer;
    try {
      raw = canonicalBase64url(jwk.x);
    } catch {
      throw new Error('its x is not canonical base64url');
    }
    const problem = ed25519PublicKeyProblem(raw);
    if (problem) throw new Error(`its x ${problem}`);
  }
  const pub = jwk.kty === 'OKP' ? { kty: 'OKP', crv: jwk.crv, x: jwk.x } : { kty: jwk.kty, crv: jwk.crv, x: jwk.x, y: jwk.y };
  return createPublicKey({ key: pub as import('node:crypto').JsonWebKey, format: 'jwk' });
}

/** A time claim that fails: `past` (exp), `early` (nbf), or `type` (not a NumericDate). */
export interface TimeClaimProblem {
  claim: 'iat' | 'nbf' | 'exp';
  kind: 'past' | 'early' | 'type';
}

/**
 * The time claims as jose checked them, in whole seconds: `exp` is past when exp <= now − tolerance,
 * `nbf` not yet valid when nbf > now + tolerance; each, and `iat`, must be a number when present.
 */
export function timeClaimProblem(payload: Record<string, unknown>, nowMs: number, toleranceMs: number): TimeClaimProblem | null {
  const now = Math.floor(nowMs / 1000);
  const tolerance = toleranceMs / 1000;
  if (payload.iat !== undefined && !isNumericDate(payload.iat)) return { claim: 'iat', kind: 'type' };
  if (payload.nbf !== undefined) {
    if (!isNumericDate(payload.nbf)) return { claim: 'nbf', kind: 'type' };
    if (payload.nbf > now + tolerance) return { claim: 'nbf', kind: 'early' };
  }
  if (payload.exp !== undefined) {
    if (!isNumericDate(payload.exp)) return { claim: 'exp', kind: 'type' };
    if (payload.exp <= now - tolerance) return { claim: 'exp', kind: 'past' };
  }
  return null;
}

const isNumericDate = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);

/** `aud` is a string equal to `audience`, or an array that contains it (RFC 7519 §4.1.3). */
export function audienceIncludes(aud: unknown, audience: string): boolean {
  return aud === audience || (Array.isArray(aud) && aud.includes(audience));
}

/** Signature checks of `verifyJwsSignatureAsync` since the process started, by where they ran (the server's metrics read them). */
const checks = { onLoop: 0, offLoop: 0 };

/** `offLoop` counts only checks another thread made: those handed to a failed worker and made here after all count as `onLoop`. */
export function signatureChecks(): Readonly<{ onLoop: number; offLoop: number }> {
  const fallbacks = ed25519().offLoopFallbacks?.() ?? 0;
  return { onLoop: checks.onLoop + fallbacks, offLoop: checks.offLoop - fallbacks };
}

function checkOnLoop(jws: DecodedJws, alg: JwsAlgorithm, key: KeyObject): boolean {
  checks.onLoop += 1;
  return verifyJwsSignature(jws, alg, key);
}

/** What each server registered (`countWorkInFlight`): how many requests and stream operations it is serving now. */
const workInFlight = new Set<() => number>();

/**
 * Counts `inFlight` (a server's requests and stream operations being served) in deciding whether a
 * check handed to another thread can overlap with other work; returns the function that stops counting
 * it (the server's close). With no server registered (a library caller, a benchmark), the loop's
 * business alone decides.
 */
export function countWorkInFlight(inFlight: () => number): () => void {
  workInFlight.add(inFlight);
  return () => workInFlight.delete(inFlight);
}

/** Whether a check handed to another thread would overlap with other work: the loop is busy, and some server has more than the asking request in flight. */
function overlapPossible(): boolean {
  if (loopIsQuiet()) return false;
  if (workInFlight.size === 0) return true;
  let n = 0;
  for (const count of workInFlight) n += count();
  return n > 1;
}

/** The event loop's utilization over the last window of at least this long decides `loopIsQuiet`. */
const QUIET_WINDOW_MS = 20;
let loopSample = performance.eventLoopUtilization();
let loopSampledAt = performance.now();
let quiet = true;

/** Whether the event loop was busy less than a quarter of the last window (read at most once per window). */
function loopIsQuiet(): boolean {
  const now = performance.now();
  if (now - loopSampledAt >= QUIET_WINDOW_MS) {
    const sample = performance.eventLoopUtilization();
    quiet = performance.eventLoopUtilization(sample, loopSample).utilization < 0.25;
    loopSample = sample;
    loopSampledAt = now;
  }
  return quiet;
}
