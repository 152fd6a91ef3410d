import { signEdDsaJws } from './jws.js';
import { WritError } from '../errors.js';
import { claimsToPayload, DECISION_TYP, type DecisionClaims } from './decision-claims.js';
import { trustIssued } from './decision-verify.js';
import type { SigningKey } from './key-ring.js';

/** Whatever hands out the current signing key (the KeyRing). */
export interface DecisionSigner {
  current(): SigningKey;
}

/**
 * Signs a decision as a compact JWS: header `{ alg: 'EdDSA', kid, typ: 'writ-decision+jwt' }`,
 * `jti` = decision_id, `sub` = principal, `aud` = audience, `iss` = 'writ', `iat`/`exp` in seconds,
 * and the other claims under their own names (see `claimsToPayload`).
 *
 * Why not jose's SignJWT here: jose 6 signs through WebCrypto, which costs ~135 µs per Ed25519
 * signature on these machines against ~18 µs for libsodium (jws.ts, ed25519.ts), and signing is a
 * large part of a decision's latency budget (bench/RESULTS.md). The compact serialization is three
 * base64url parts joined by dots (RFC 7515 §7.1); every token is verified by `verifyDecision` (the same
 * implementation), and the tests check that jose, an independent implementation, accepts what this produces.
 */
export async function signDecision(keyRing: DecisionSigner, claims: DecisionClaims): Promise<string> {
  if (!(claims.expires_at > claims.issued_at)) {
    throw new WritError('INTERNAL', `decision ${claims.decision_id} would expire before it is issued`);
  }
  const key = keyRing.current();
  const token = signEdDsaJws(key, DECISION_TYP, JSON.stringify(claimsToPayload(claims)));
  // What this process signed needs no Ed25519 check when it comes back (to the gateway, with a lease).
  trustIssued(token, key.publicKey);
  return token;
}

export { verifyDecision, type DecisionKeys, type DecisionKeyResolver, type VerifyDecisionOptions } from './decision-verify.js';
export { checkDecisionBinding, type DecisionRequest } from './decision-binding.js';
