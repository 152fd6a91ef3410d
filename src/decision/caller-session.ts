import {
  createCipheriv, createDecipheriv, createHmac, createPublicKey, createSecretKey, diffieHellman, generateKeyPairSync, hkdfSync, randomBytes, timingSafeEqual,
  type KeyObject,
} from 'node:crypto';
import { WritError } from '../errors.js';
import { callerSessionKey } from '../wire/caller-session.js';
import { BoundedMap } from './bounded-map.js';
import type { KeyRing } from './key-ring.js';

/**
 * Caller sessions (protocol v1, README "Caller sessions"): a caller that proved itself once with an
 * assertion (POST /v1/sessions) agrees a session key K with Writ by X25519, and then MACs a short-lived,
 * single-use request token per request (HS256 over K) instead of signing one with Ed25519. The session
 * token that names K is sealed (AES-256-GCM) under a key derived from the decision signing key: it is
 * stateless, and every replica sharing the keys directory opens it.
 */

export const SESSION_TOKEN_PREFIX = 'ws1.';
const SEAL_INFO = 'writ caller session seal v1|';
const NONCE_BYTES = 12;
const TAG_BYTES = 16;
/** Unsealed sessions kept per ring, by the end of their token string (SEAL_SUFFIX), the whole of it compared on a hit. */
const SESSION_CACHE_LIMIT = 16_384;
/** 22 base64url characters: the last 16.5 bytes of the sealed body, its AES-GCM tag (16 bytes) and a bit more. */
const SEAL_SUFFIX = 22;

/** What a session token carries (sealed): who it is for, with which key, until when, and K. */
export interface CallerSession {
  principal: string;
  /** The caller key's kid that signed the opening assertion, and its material (caller-auth.ts keyMaterial). */
  kid: string;
  key: string;
  iatMs: number;
  expMs: number;
  /** K, imported once: the request tokens' HMAC key. */
  hmacKey: KeyObject;
  /** The signing key's kid that sealed it (it must still be in the ring). */
  sealKid: string;
}

/** The seal key of a decision signing key: HKDF-SHA256(d, salt "writ", info "writ caller session seal v1|" + kid). */
export function deriveSealKey(privateD: Buffer, signingKid: string): Buffer {
  return Buffer.from(hkdfSync('sha256', privateD, 'writ', SEAL_INFO + signingKid, 32));
}

/** K = HKDF-SHA256(shared, salt empty, info "writ caller session v1|" + client_x + "|" + server_x, 32): the one derivation, shared with clients (src/wire). */
export const deriveSessionKey = callerSessionKey;

/**
 * The server's half of the agreement for a client public key (base64url x, 32 bytes): a fresh key
 * pair, its x, and K. Refuses (UNPROCESSABLE) a key that is not 32 bytes in canonical base64url, and a
 * low-order point (a shared secret of zeros, which an attacker could predict).
 */
export function agreeSessionKey(clientX: string): { serverX: string; key: Buffer } {
  const raw = Buffer.from(clientX, 'base64url');
  if (raw.length !== 32 || raw.toString('base64url') !== clientX) {
    throw new WritError('MALFORMED_REQUEST', 'public_key.x must be the 32-byte X25519 public key in canonical base64url (43 characters)');
  }
  const lowOrder = () => new WritError('UNPROCESSABLE', 'public_key is a low-order X25519 point (the shared secret would be all zeros): send a public key made from a random private key');
  let clientKey: KeyObject;
  try {
    clientKey = createPublicKey({ key: { kty: 'OKP', crv: 'X25519', x: clientX }, format: 'jwk' });
  } catch {
    throw new WritError('MALFORMED_REQUEST', 'public_key is not a usable X25519 public key');
  }
  const { privateKey, publicKey } = generateKeyPairSync('x25519');
  let shared: Buffer;
  try {
    shared = diffieHellman({ privateKey, publicKey: clientKey });
  } catch {
    throw lowOrder();
  }
  if (shared.every((b) => b === 0)) throw lowOrder();
  const serverX = publicKey.export({ format: 'jwk' }).x!;
  return { serverX, key: deriveSessionKey(shared, clientX, serverX) };
}

/** Each token is unique without an id of its own (a fresh nonce, a fresh K); one an earlier build sealed with a `sid` (which nothing read) opens alike. */
interface SealedPlaintext {
  principal: string;
  kid: string;
  key: string;
  iat_ms: number;
  exp_ms: number;
  k: string;
}

/** The sessions of one key ring: sealing with its current key, unsealing with any key it still publishes. */
export class CallerSessions {
  /**
   * By the token's last SEAL_SUFFIX characters (its AES-GCM tag, mostly), the whole token kept beside the
   * session and compared on each hit: a Map hashes a string key whole, once for each new string, and a
   * request's token is a new string of ~400 characters every time, where a comparison of two is a memcmp.
   */
  private readonly cache = new BoundedMap<{ token: string; session: CallerSession }>(SESSION_CACHE_LIMIT);

  constructor(private readonly ring: KeyRing) {}

  /** A session token for K, sealed by the ring's current signing key. */
  seal(session: { principal: string; kid: string; key: string; iatMs: number; expMs: number; k: Buffer }): string {
    const signing = this.ring.current();
    const sealKey = this.ring.sessionSealKey(signing.kid);
    if (!sealKey) throw new WritError('INTERNAL', `the signing key ${signing.kid} has no session seal key`);
    const plaintext: SealedPlaintext = {
      principal: session.principal, kid: session.kid, key: session.key,
      iat_ms: session.iatMs, exp_ms: session.expMs, k: session.k.toString('base64url'),
    };
    const aad = `${SESSION_TOKEN_PREFIX}${signing.kid}`;
    const nonce = randomBytes(NONCE_BYTES);
    const cipher = createCipheriv('aes-256-gcm', sealKey, nonce);
    cipher.setAAD(Buffer.from(aad, 'ascii'));
    const body = Buffer.concat([nonce, cipher.update(JSON.stringify(plaintext), 'utf8'), cipher.final(), cipher.getAuthTag()]);
    return `${aad}.${body.toString('base64url')}`;
  }

  /**
   * The session a token names, or CALLER_SESSION_INVALID: a bad format, a signing kid no longer in the
   * ring (retired past its publication, or another deployment's), a seal that does not open.
   * Cached (by the whole token: see `cache`); the ring is asked each time whether the sealing key is still there.
   */
  unseal(token: string): CallerSession {
    const suffix = token.slice(-SEAL_SUFFIX);
    const cached = this.cache.get(suffix);
    if (cached !== undefined && cached.token === token) {
      if (this.ring.sessionSealKey(cached.session.sealKid) === undefined) throw sealKeyGone(cached.session.sealKid);
      return cached.session;
    }
    const second = token.indexOf('.', SESSION_TOKEN_PREFIX.length);
    if (!token.startsWith(SESSION_TOKEN_PREFIX) || second < 0 || token.indexOf('.', second + 1) >= 0) throw sessionInvalid('the session token is malformed');
    const sealKid = token.slice(SESSION_TOKEN_PREFIX.length, second);
    const sealed = token.slice(second + 1);
    const body = Buffer.from(sealed, 'base64url');
    if (sealKid === '' || body.length < NONCE_BYTES + TAG_BYTES + 2 || body.toString('base64url') !== sealed) throw sessionInvalid('the session token is malformed');
    const sealKey = this.ring.sessionSealKey(sealKid);
    if (sealKey === undefined) throw sealKeyGone(sealKid);
    let plain: SealedPlaintext;
    try {
      const decipher = createDecipheriv('aes-256-gcm', sealKey, body.subarray(0, NONCE_BYTES), { authTagLength: TAG_BYTES });
      decipher.setAAD(Buffer.from(token.slice(0, second), 'ascii'));
      decipher.setAuthTag(body.subarray(body.length - TAG_BYTES));
      const text = Buffer.concat([decipher.update(body.subarray(NONCE_BYTES, body.length - TAG_BYTES)), decipher.final()]).toString('utf8');
      plain = JSON.parse(text) as SealedPlaintext;
    } catch {
      throw sessionInvalid('the session token was not sealed by this deployment (or was altered)');
    }
    const k = Buffer.from(plain.k, 'base64url');
    const session: CallerSession = {
      principal: plain.principal, kid: plain.kid, key: plain.key, iatMs: plain.iat_ms, expMs: plain.exp_ms,
      hmacKey: createSecretKey(k), sealKid,
    };
    // A token that does not open never gets here; two that open share a suffix only by a 2^-128 chance (then the later replaces the earlier).
    this.cache.set(suffix, { token, session });
    return session;
  }
}

/** Whether `mac` is HMAC-SHA256(session's K, signingInput): one createHmac, a constant-time compare. */
export function sessionMacVerifies(session: CallerSession, signingInput: string, mac: Buffer): boolean {
  if (mac.length !== 32) return false;
  return timingSafeEqual(createHmac('sha256', session.hmacKey).update(signingInput, 'latin1').digest(), mac);
}

const rings = new WeakMap<KeyRing, CallerSessions>();

/** The sessions of a key ring (one cache per ring: per process, as the ring is). */
export function callerSessionsOf(ring: KeyRing): CallerSessions {
  let sessions = rings.get(ring);
  if (!sessions) rings.set(ring, (sessions = new CallerSessions(ring)));
  return sessions;
}

/**
 * CALLER_SESSION_INVALID: why, and the one remedy every such refusal gives (here and in caller-auth.ts:
 * malformed, not sealed here, sealing key gone, expired, opening key gone).
 */
export function sessionInvalid(why: string): WritError {
  return new WritError('CALLER_SESSION_INVALID', `${why}: open a new session with a caller assertion; the request had no effect`);
}

/** CALLER_SESSIONS_DISABLED (WRIT_CALLER_SESSION_MAX_TTL_MS=0): opening a session, and a request token, alike. */
export function sessionsDisabled(): WritError {
  return new WritError('CALLER_SESSIONS_DISABLED', 'caller sessions are turned off on this deployment (WRIT_CALLER_SESSION_MAX_TTL_MS=0): sign a caller assertion for each request');
}
const sealKeyGone = (kid: string) => sessionInvalid(`the session was sealed by signing key ${kid}, which this deployment no longer has (retired, or another deployment's)`);
