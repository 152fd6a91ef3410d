import { calculateJwkThumbprint, exportJWK, generateKeyPair, type JWK } from 'jose';

/**
 * A principal's key pair as JWKs, one definition for the SDK (agents make their own) and the server
 * (`writ serve` makes the governance principal's on first start). Imports jose only.
 */
export interface PrincipalKeyPair {
  publicJwk: JWK & { kid: string };
  privateJwk: JWK & { kid: string };
}

/** A new Ed25519 key pair for a principal; `kid` defaults to the RFC 7638 thumbprint. */
export async function generatePrincipalKeyPair(kid?: string): Promise<PrincipalKeyPair> {
  const { privateKey } = await generateKeyPair('Ed25519', { extractable: true });
  const full = await exportJWK(privateKey);
  const id = kid ?? (await calculateJwkThumbprint(full));
  const { kty, crv, x } = full;
  return {
    publicJwk: { kty, crv, x, kid: id, alg: 'EdDSA', use: 'sig' },
    // spread-then-add: once per key generated
    privateJwk: { ...full, kid: id, alg: 'EdDSA', use: 'sig' },
  };
}
