import { randomBytes } from 'node:crypto';
import type { DecisionKeyResolver } from './decision-verify.js';
import type { DecisionSigner } from './decision-token.js';
import { audienceIncludes, decodeCompactJws, signEdDsaJws, verifyJwsSignature } from './jws.js';

/**
 * The console's two tokens, signed by the service key ring (the decision keys), each with its own
 * `typ` so that neither can pass for the other nor for a decision:
 * - a one-time **login** token (`writ console` prints it in a link; exchanged once for a session),
 * - a **session** token (the value of the HttpOnly console cookie).
 * Their `jti` is what the single-use store spends: a login once when exchanged, a session at sign-out.
 */
export type ConsoleTokenKind = 'login' | 'session';

const TYP: Record<ConsoleTokenKind, string> = { login: 'writ-console-login+jwt', session: 'writ-console-session+jwt' };
const ALG = 'EdDSA';
const ISSUER = 'writ';

export interface ConsoleClaims {
  kind: ConsoleTokenKind;
  principal: string;
  jti: string;
  /** ms since the epoch. */
  issuedAt: number;
  expiresAt: number;
}

export function newConsoleTokenId(): string {
  return randomBytes(18).toString('base64url');
}

export function signConsoleToken(keys: DecisionSigner, claims: ConsoleClaims, audience: string): string {
  return signEdDsaJws(keys.current(), TYP[claims.kind], JSON.stringify({
    iss: ISSUER, sub: claims.principal, aud: audience, jti: claims.jti,
    iat: Math.floor(claims.issuedAt / 1000), exp: Math.ceil(claims.expiresAt / 1000),
  }));
}

/**
 * The claims of a console token of `kind`, or a sentence saying why it is refused (the caller picks
 * the error code: a bad login link and a bad session cookie are refused differently).
 */
export function verifyConsoleToken(token: string, kind: ConsoleTokenKind, opts: { keys: DecisionKeyResolver; audience: string; now: number }): ConsoleClaims | { refused: string } {
  let jws;
  try {
    jws = decodeCompactJws(token);
  } catch {
    return { refused: 'malformed token' };
  }
  const { header, payload } = jws;
  if (header.alg !== ALG || header.typ !== TYP[kind] || typeof header.kid !== 'string') return { refused: `not a console ${kind} token` };
  const key = opts.keys.verificationKey(header.kid);
  if (!key) return { refused: `signing key ${header.kid} is not a current Writ key (it was rotated out)` };
  if (!verifyJwsSignature(jws, ALG, key)) return { refused: 'signature does not verify' };
  const { sub, jti, iat, exp, iss } = payload;
  if (iss !== ISSUER || typeof sub !== 'string' || typeof jti !== 'string' || typeof iat !== 'number' || typeof exp !== 'number') return { refused: 'malformed claims' };
  if (!audienceIncludes(payload.aud, opts.audience)) return { refused: 'token is for another Writ deployment' };
  if (exp * 1000 <= opts.now) return { refused: 'expired' };
  return { kind, principal: sub, jti, issuedAt: iat * 1000, expiresAt: exp * 1000 };
}
