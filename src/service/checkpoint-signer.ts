import type { KeyObject } from 'node:crypto';
import { canonicalJson } from '../audit/canonical-json.js';
import { CHECKPOINT_TYP, signedPayloadOf, type CheckpointSigner, type SignedPayload } from '../audit/checkpoint.js';
import { decodeCompactJws, signEdDsaJws, verifyJwsSignature } from '../decision/jws.js';
import type { KeyRing } from '../decision/key-ring.js';

/**
 * Receipt log checkpoints (and archive manifests) signed with the decision signing keys: a compact JWS, header
 * `{ alg: 'EdDSA', kid, typ: 'writ-checkpoint+jws' }`, payload the checkpoint (canonical JSON), so an
 * auditor checks one offline with the key of that kid from /.well-known/jwks.json.
 */
export function keyRingCheckpointSigner(ring: KeyRing): CheckpointSigner {
  return {
    sign: (payload) => signCheckpoint(ring.current(), payload),
    verify: (jws) => verifyCheckpoint(jws, (kid) => ring.verificationKey(kid), () => keysRead(ring)),
  };
}

export function signCheckpoint(key: { kid: string; privateKey: KeyObject }, payload: SignedPayload): string {
  return signEdDsaJws(key, CHECKPOINT_TYP, canonicalJson(payload));
}

/** The kid that signed a checkpoint, when `ring` does not publish it (null: it does, or the JWS names none: `writ audit verify` says why). */
export function checkpointSignerUnpublished(ring: KeyRing, jws: string): string | null {
  let kid: unknown;
  try {
    kid = decodeCompactJws(jws).header.kid;
  } catch {
    return null;
  }
  return typeof kid === 'string' && ring.verificationKey(kid) === undefined ? kid : null;
}

/** Where a ring's keys were read, for a problem that names a key it does not have: a copy without the servers' keys/ is not a forgery. */
function keysRead(ring: KeyRing): string {
  const n = ring.jwks().keys.length;
  return `the keys read from ${ring.dir} (${n === 0 ? 'none' : `${n} published`}); if this is not the keys/ folder of the data directory the servers use, run this there`;
}

/**
 * The checkpoint a JWS signs, if it is one and verifies with the key `keyFor` gives for its kid. `keysRead`
 * says where the keys came from, for the problem of a kid none of them has.
 */
export function verifyCheckpoint(jws: string, keyFor: (kid: string) => KeyObject | undefined, keysRead?: () => string): { payload: SignedPayload } | { problem: string } {
  let decoded;
  try {
    decoded = decodeCompactJws(jws);
  } catch (e) {
    return { problem: `the checkpoint's signature is not a compact JWS (${(e as Error).message})` };
  }
  const { header } = decoded;
  if (header.alg !== 'EdDSA' || header.typ !== CHECKPOINT_TYP || typeof header.kid !== 'string') {
    return { problem: `the checkpoint's JWS header is not a Writ checkpoint's (alg EdDSA, typ ${CHECKPOINT_TYP}, a kid)` };
  }
  let key: KeyObject | undefined;
  try {
    key = keyFor(header.kid);
  } catch (e) {
    return { problem: `the checkpoint was signed by key ${header.kid}, which is published but unusable (${(e as Error).message})` };
  }
  if (!key) return { problem: `the checkpoint was signed by key ${header.kid}, which is not among the published keys${keysRead ? `: ${keysRead()}` : ''}` };
  if (!verifyJwsSignature(decoded, 'EdDSA', key)) return { problem: `the checkpoint's signature does not verify with key ${header.kid} (it was forged or altered)` };
  const payload = signedPayloadOf(decoded.payload);
  if (!payload) return { problem: 'the checkpoint\'s payload is none of a checkpoint over the chain heads, an archive manifest or a legacy checkpoint' };
  return { payload };
}
