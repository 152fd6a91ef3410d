import { randomUUID } from 'node:crypto';
import { importJWK, SignJWT, type CryptoKey, type JWK } from 'jose';

/**
 * Caller assertions: the short-lived JWT a caller sends as `Authorization: Bearer …` to prove it is
 * its principal, and approval assertions, which an approver signs the same way. Made by clients: the
 * SDK, and `writ approve` for a human approver. Imports jose and Node built-ins only, so the SDK can
 * carry it.
 */

export interface CallerAssertionOptions {
  /** The principal id; becomes both `iss` and `sub`. */
  principal: string;
  /** A private JWK registered (its public half) for the principal; must carry `kid`. Ed25519 or P-256. */
  privateJwk: JWK;
  /** Default 'writ'. */
  audience?: string;
  /** Default 60; Writ refuses assertions that live longer than 5 minutes. */
  ttlSeconds?: number;
  /** Default a random UUID. Writ accepts a jti only once. */
  jti?: string;
  /** Milliseconds since the epoch; default the system clock. */
  now?: number;
  /** Extra claims (e.g. `approve` in an approval assertion). */
  claims?: Record<string, unknown>;
}

/** The JWS algorithm a key signs assertions with: EdDSA for OKP Ed25519, ES256 for EC P-256. */
export function assertionAlgorithm(jwk: JWK): 'EdDSA' | 'ES256' {
  if (jwk.kty === 'OKP' && jwk.crv === 'Ed25519') return 'EdDSA';
  if (jwk.kty === 'EC' && jwk.crv === 'P-256') return 'ES256';
  throw new TypeError(`unsupported key for caller assertions (kty ${jwk.kty}, crv ${jwk.crv}); use Ed25519 or P-256`);
}

const imported = new WeakMap<JWK, Promise<CryptoKey>>();

/** Creates a caller assertion (compact JWS) signed with `privateJwk`. */
export async function createCallerAssertion(options: CallerAssertionOptions): Promise<string> {
  const { principal, privateJwk, audience = 'writ', ttlSeconds = 60 } = options;
  if (typeof principal !== 'string' || principal === '') throw new TypeError('principal is required');
  if (typeof privateJwk.kid !== 'string' || privateJwk.kid === '') throw new TypeError('privateJwk has no kid');
  if (typeof privateJwk.d !== 'string') throw new TypeError('privateJwk is not a private key');
  if (!(ttlSeconds > 0)) throw new RangeError('ttlSeconds must be positive');
  const alg = assertionAlgorithm(privateJwk);
  let key = imported.get(privateJwk);
  if (!key) {
    key = importJWK(privateJwk, alg) as Promise<CryptoKey>;
    imported.set(privateJwk, key);
  }
  const iat = Math.floor((options.now ?? Date.now()) / 1000);
  return new SignJWT({ ...(options.claims ?? {}) })
    .setProtectedHeader({ alg, kid: privateJwk.kid, typ: 'JWT' })
    .setIssuer(principal)
    .setSubject(principal)
    .setAudience(audience)
    .setIssuedAt(iat)
    .setExpirationTime(iat + Math.ceil(ttlSeconds))
    .setJti(options.jti ?? randomUUID())
    .sign(await key);
}

/**
 * What an approver signs off: this principal may do this action on this resource in this environment,
 * touching these fields: a request whose fields are all among them; "*" covers every field and the
 * whole resource (a request that names no fields), as in a scope. Writ refuses an approval without
 * `fields`.
 */
export interface ApprovalRequest {
  principal: string;
  action: string;
  resource: string;
  environment: string;
  fields: string[];
}

/**
 * An approval assertion: signed by the approver's own key, addressed to `writ:approval`, single-use.
 * The requester passes it as `context.approval`; Writ verifies it and the policy checks that a live
 * `approves` edge from the approver to the requester covers the request at its risk.
 */
export function createApprovalAssertion(options: { approver: string; privateJwk: JWK; approve: ApprovalRequest; ttlSeconds?: number; audience?: string; now?: number }): Promise<string> {
  return createCallerAssertion({
    principal: options.approver,
    privateJwk: options.privateJwk,
    audience: options.audience ?? 'writ:approval',
    ttlSeconds: options.ttlSeconds ?? 300,
    claims: { approve: options.approve },
    ...(options.now !== undefined ? { now: options.now } : {}),
  });
}
