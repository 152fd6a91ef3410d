import { SignJWT } from 'jose';
import { WritError } from '../errors.js';
import { claimsToPayload, DECISION_ALG, DECISION_TYP, type DecisionClaims } from './decision-claims.js';
import type { SigningKey } from './key-ring.js';

/** Whatever hands out the current signing key (the KeyRing). */
export interface DecisionSigner {
  current(): SigningKey;
}

/**
 * Signs a decision as a compact JWS: header `{ alg: 'EdDSA', kid, typ: 'writ-decision+jwt' }`,
 * `jti` = decision_id, `sub` = principal, `aud` = audience, `iss` = 'writ', `iat`/`exp` in seconds,
 * and the other claims under their own names (see `claimsToPayload`).
 */
export async function signDecision(keyRing: DecisionSigner, claims: DecisionClaims): Promise<string> {
  if (!(claims.expires_at > claims.issued_at)) {
    throw new WritError('INTERNAL', `decision ${claims.decision_id} would expire before it is issued`);
  }
  const { kid, privateKey } = keyRing.current();
  return new SignJWT(claimsToPayload(claims)).setProtectedHeader({ alg: DECISION_ALG, kid, typ: DECISION_TYP }).sign(privateKey);
}

export { verifyDecision, type DecisionKeys, type DecisionKeyResolver, type VerifyDecisionOptions } from './decision-verify.js';
export { checkDecisionBinding, type DecisionRequest } from './decision-binding.js';
