import { createHmac, diffieHellman, generateKeyPairSync, randomUUID, createPublicKey } from 'node:crypto';
import { expect } from 'vitest';
import type { JWK } from 'jose';
import { deriveSessionKey } from '../../src/decision/index.js';
import { createCallerAssertion, generatePrincipalKeyPair } from '../../src/sdk/index.js';
import type { Harness } from './harness.js';

/**
 * The client's side of a caller session (README "Caller sessions"), written out in the test so the
 * server is checked against the protocol and not against the SDK's reading of it.
 */
export interface ClientSession {
  token: string;
  k: Buffer;
  principal: string;
  kid: string;
  expires_at: string;
}

/** A fresh X25519 key pair: its public x, and the K it agrees with the server's x. */
export function clientKeyPair(): { x: string; agree(serverX: string): Buffer } {
  const { privateKey, publicKey } = generateKeyPairSync('x25519');
  const x = publicKey.export({ format: 'jwk' }).x!;
  return {
    x,
    agree: (serverX) => deriveSessionKey(diffieHellman({ privateKey, publicKey: createPublicKey({ key: { kty: 'OKP', crv: 'X25519', x: serverX }, format: 'jwk' }) }), x, serverX),
  };
}

/** The body of POST /v1/sessions for the client's public x. */
export const sessionRequest = (x: string, ttl_ms?: number) => ({ public_key: { kty: 'OKP', crv: 'X25519', x }, ...(ttl_ms === undefined ? {} : { ttl_ms }) });

/**
 * The claims that bind the assertion opening a session to the body's key (README "Caller sessions" step 1):
 * RFC 7800 `cnf.jwk` naming the client's X25519 public key, and DPoP-style `htm`/`htu` naming the request.
 */
export const openingClaims = (x: string) => ({ cnf: { jwk: { kty: 'OKP', crv: 'X25519', x } }, htm: 'POST', htu: '/v1/sessions' });

/** The session from a 201 answer to POST /v1/sessions made with `pair`. */
export function sessionOf(body: { session: string; public_key: { x: string }; principal: string; kid: string; expires_at: string }, pair: ReturnType<typeof clientKeyPair>): ClientSession {
  return { token: body.session, k: pair.agree(body.public_key.x), principal: body.principal, kid: body.kid, expires_at: body.expires_at };
}

/** A session `principal` opens on `h` (a fresh X25519 pair, a bound assertion), expected to be granted. */
export async function openSession(h: Harness, principal: string, ttlMs?: number): Promise<ClientSession> {
  const pair = clientKeyPair();
  const r = await h.call(principal, { method: 'POST', url: '/v1/sessions', payload: sessionRequest(pair.x, ttlMs) }, { claims: openingClaims(pair.x) });
  expect(r.status, r.raw).toBe(201);
  return sessionOf(r.body, pair);
}

/** A session `principal` opens on `h` with this private key (an assertion bound to a fresh X25519 pair), expected to be granted. */
export async function openSessionWithKey(h: Harness, principal: string, privateJwk: JWK): Promise<ClientSession> {
  const pair = clientKeyPair();
  const assertion = await createCallerAssertion({ principal, privateJwk, now: h.clock.now(), claims: openingClaims(pair.x) });
  const opened = await h.app.inject({ method: 'POST', url: '/v1/sessions', headers: bearer(assertion), payload: sessionRequest(pair.x) });
  expect(opened.statusCode, opened.body).toBe(201);
  return sessionOf(opened.json(), pair);
}

/** A principal of its own, registered by governance with a fresh key (kid `${id}-k1`), and a session it opened with that key. */
export async function principalWithSession(h: Harness, id: string) {
  const pair = await generatePrincipalKeyPair(`${id}-k1`);
  const r = await h.call('governance', { method: 'POST', url: '/v1/principals', payload: { id, kind: 'agent', keys: [pair.publicJwk] } });
  expect(r.status, r.raw).toBe(201);
  return { pair, session: await openSessionWithKey(h, id, pair.privateJwk) };
}

export interface RequestTokenOptions {
  method: string;
  path: string;
  /** ms; Writ's clock as a client following it would read it. */
  now: number;
  jti?: string;
  ttlSeconds?: number;
  header?: Record<string, unknown>;
  /** Claims to add, replace, or (undefined) remove. */
  claims?: Record<string, unknown>;
  /** MAC with this key instead of the session's. */
  macKey?: Buffer;
  audience?: string;
}

/** A request token: HS256 over the session's K, kid = the session token, bound to the method and path. */
export function requestToken(session: Pick<ClientSession, 'token' | 'k' | 'principal'>, o: RequestTokenOptions): string {
  const iat = Math.floor(o.now / 1000);
  const header = { alg: 'HS256', kid: session.token, ...o.header };
  const payload: Record<string, unknown> = {
    iss: session.principal, sub: session.principal, aud: o.audience ?? 'writ', iat, exp: iat + (o.ttlSeconds ?? 60), jti: o.jti ?? randomUUID(), htm: o.method, htu: o.path,
  };
  for (const [name, value] of Object.entries(o.claims ?? {})) {
    if (value === undefined) delete payload[name];
    else payload[name] = value;
  }
  const input = `${Buffer.from(JSON.stringify(header)).toString('base64url')}.${Buffer.from(JSON.stringify(payload)).toString('base64url')}`;
  return `${input}.${createHmac('sha256', o.macKey ?? session.k).update(input).digest('base64url')}`;
}

export const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
