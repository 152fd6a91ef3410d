import { createHmac, createPrivateKey, createPublicKey, createSecretKey, diffieHellman, generateKeyPairSync, hkdfSync, randomUUID, type KeyObject } from 'node:crypto';

/**
 * Caller sessions, the client's half (the protocol: a caller opens a session once with an assertion,
 * agreeing a key K by X25519, then signs each request with an HS256 token under K instead of an Ed25519
 * assertion). Made by clients: the SDK. Imports Node built-ins only, so the SDK can carry it.
 */

/** The HKDF info's prefix; the client's and the server's `x`, as on the wire, follow it, each after a `|`. */
const SESSION_KEY_INFO = 'writ caller session v1|';

/** K = HKDF-SHA256(ikm = the X25519 shared secret, salt = empty, info = prefix + client_x + "|" + server_x, 32 bytes). */
export function callerSessionKey(shared: Uint8Array, clientX: string, serverX: string): Buffer {
  return Buffer.from(hkdfSync('sha256', shared, Buffer.alloc(0), `${SESSION_KEY_INFO}${clientX}|${serverX}`, 32));
}

/** The client's ephemeral X25519 key pair for one session: `x` goes in `POST /v1/sessions`, `agree` takes the server's `x` and gives K. */
export interface SessionKeyExchange {
  readonly x: string;
  agree(serverX: string): KeyObject;
}

/** A new X25519 key pair (or the given private JWK `d`, for a test vector). */
export function sessionKeyExchange(d?: string): SessionKeyExchange {
  const privateKey = d === undefined
    ? generateKeyPairSync('x25519').privateKey
    : createPrivateX25519(d);
  const x = privateKey.export({ format: 'jwk' }).x!;
  return {
    x,
    agree(serverX: string): KeyObject {
      if (typeof serverX !== 'string' || Buffer.from(serverX, 'base64url').length !== 32) throw new TypeError('the server\'s session public key is not 32 bytes of base64url');
      let shared: Buffer;
      try {
        shared = diffieHellman({ privateKey, publicKey: createPublicKey({ key: { kty: 'OKP', crv: 'X25519', x: serverX }, format: 'jwk' }) });
      } catch (e) {
        throw new TypeError(`the server's session public key is refused: ${(e as Error).message}`);
      }
      // A low-order point gives all zeros (or Node refuses it above): no secret was agreed.
      if (shared.every((b) => b === 0)) throw new TypeError('the server\'s session public key is a low-order point');
      return createSecretKey(callerSessionKey(shared, x, serverX));
    },
  };
}

function createPrivateX25519(d: string): KeyObject {
  // A JWK import needs `x` too: derive it from the scalar through a PKCS#8 wrapper.
  const pkcs8 = Buffer.concat([Buffer.from('302e020100300506032b656e04220420', 'hex'), Buffer.from(d, 'base64url')]);
  return createPrivateKey({ key: pkcs8, format: 'der', type: 'pkcs8' });
}

/**
 * The claims that bind the assertion opening a caller session (`POST /v1/sessions`) to the session's X25519
 * public key and to that request: `cnf.jwk` (RFC 7800) naming the body's `public_key`, `htm` "POST" and `htu`
 * (the path as sent, without the query). Writ opens no session with an assertion that lacks them, so one
 * that leaked cannot open a session under another party's key. For `createCallerAssertion`'s `claims`.
 */
export type SessionOpeningClaims = { cnf: { jwk: { kty: 'OKP'; crv: 'X25519'; x: string } }; htm: 'POST'; htu: string };

/** `SessionOpeningClaims` for the client's public `x` and the path `htu` the open is sent to (by default `/v1/sessions`). */
export function sessionOpeningClaims(x: string, htu = '/v1/sessions'): SessionOpeningClaims {
  return { cnf: { jwk: { kty: 'OKP', crv: 'X25519', x } }, htm: 'POST', htu };
}

export interface SessionRequestTokenOptions {
  /** The session token (`ws1.…`) from `POST /v1/sessions`: the token's `kid`. */
  session: string;
  /** K, as `sessionKeyExchange().agree` gives it (made once per session). */
  key: KeyObject;
  /** The session's principal; becomes both `iss` and `sub`. */
  principal: string;
  /** The request's method (upper-cased here) and path (no query, no fragment). */
  method: string;
  path: string;
  /** Default 'writ'. */
  audience?: string;
  /** Default 60; Writ refuses tokens that live longer than 5 minutes. */
  ttlSeconds?: number;
  /** Default a random UUID. Writ accepts a jti only once. */
  jti?: string;
  /** Milliseconds since the epoch; default the system clock. */
  now?: number;
}

/**
 * A session request token: compact JWS, HS256 under K, header `{alg, kid: session}`, claims iss, sub,
 * aud, iat, exp, jti, htm and htu (in that order), bound to this one request's method and path.
 */
export function createSessionRequestToken(options: SessionRequestTokenOptions): string {
  const iat = Math.floor((options.now ?? Date.now()) / 1000);
  const path = options.path;
  const end = path.search(/[?#]/);
  const header = Buffer.from(JSON.stringify({ alg: 'HS256', kid: options.session })).toString('base64url');
  const payload = Buffer.from(JSON.stringify({
    iss: options.principal, sub: options.principal, aud: options.audience ?? 'writ', iat, exp: iat + Math.ceil(options.ttlSeconds ?? 60),
    jti: options.jti ?? randomUUID(), htm: options.method.toUpperCase(), htu: end < 0 ? path : path.slice(0, end),
  })).toString('base64url');
  const input = `${header}.${payload}`;
  return `${input}.${createHmac('sha256', options.key).update(input).digest('base64url')}`;
}
