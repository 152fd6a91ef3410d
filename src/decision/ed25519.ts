import { sign, verify, type KeyObject } from 'node:crypto';

/**
 * Ed25519 signatures (RFC 8032, pure Ed25519) for every EdDSA JWS Writ signs or verifies (jws.ts):
 * decisions, console tokens, receipt checkpoints, and the caller assertion of every request.
 *
 * Two implementations of one job, chosen once per process at its composition root: node:crypto's
 * one-shot `sign` / `verify` (OpenSSL), the default, which is all the agents' SDK needs to verify
 * decisions offline; and libsodium (ed25519-libsodium.ts), which the server installs (`openWrit`):
 * it signs in ~18 µs against ~28 µs and verifies in ~49 µs against ~79 µs on these machines, and one
 * of each is on every decision and every lease call (bench/RESULTS.md, issue 10). Signing is
 * deterministic, so both give the same bytes for the same key and message; libsodium's verification is
 * the stricter one (it also refuses small-order public keys and `R`s; OpenSSL 3 accepted a signature
 * by the identity point for any message), and no such key gets in anyway: every JWK is imported
 * through `publicKeyFromJwk`, which refuses it (`ed25519PublicKeyProblem`): a principal's key at
 * registration, by API or manifest, and a key in a fetched JWKS. test/decision/ed25519.test.ts checks
 * both. The server's choice is one-way for the process (a test that opened a Writ leaves libsodium
 * installed).
 */
export interface Ed25519 {
  readonly name: 'openssl' | 'libsodium';
  /** The 64-byte signature of `data`. Throws for a key that is not an Ed25519 private key. */
  sign(privateKey: KeyObject, data: Uint8Array): Buffer;
  /** Whether `signature` is a valid signature of `data` by `publicKey`: false, never a throw, for a signature that is not 64 bytes. Throws for a key that is not an Ed25519 public key. */
  verify(publicKey: KeyObject, data: Uint8Array, signature: Uint8Array): boolean;
  /** `verify`, answered off the event loop (libsodium: on a worker thread, ed25519-worker.ts); absent where the implementation has no such way. */
  verifyOffLoop?(publicKey: KeyObject, data: Uint8Array, signature: Uint8Array): Promise<boolean>;
  /** How many checks given to `verifyOffLoop` were made on the event loop after all (its thread had failed). */
  offLoopFallbacks?(): number;
}

/** Throws unless `key` is an Ed25519 key of that type: no implementation signs or verifies with another kind. */
export function checkEd25519Key(key: KeyObject, type: 'private' | 'public'): void {
  if (key.type !== type || key.asymmetricKeyType !== 'ed25519') throw new TypeError(`not an Ed25519 ${type} key`);
}

/** The field prime of Ed25519, 2^255 − 19, and the curve constant d = −121665/121666 (RFC 8032 §5.1). */
const P = (1n << 255n) - 19n;
const D = 37095705934669439343138083508754565189542113879843219016388785533085940283555n;
/** y of two of the four points of order 8 (x of either sign; the other two have p − y): with 0, 1 and −1 the only small-order y. */
const Y_ORDER_8 = 2707385501144840649318225287225658788936804267575313519463743609750303402022n;
const SMALL_ORDER_Y = new Set([0n, 1n, P - 1n, Y_ORDER_8, P - Y_ORDER_8]);

function powMod(base: bigint, exponent: bigint): bigint {
  let result = 1n;
  for (let b = base % P, e = exponent; e > 0n; e >>= 1n, b = (b * b) % P) if (e & 1n) result = (result * b) % P;
  return result;
}

/**
 * Why these 32 bytes are no Ed25519 public key to accept, or null: not 32 bytes; a non-canonical
 * encoding (y ≥ p); no point of the curve (no x for that y); or a point of small order (order 1, 2, 4
 * or 8), with which a signature can be forged for any message (the identity with R = identity, S = 0)
 * and which OpenSSL 3 accepts. Every key that `generateKeyPair('ed25519')` makes passes. libsodium
 * refuses the same keys when it verifies; this refuses them where a key comes in (`publicKeyFromJwk`:
 * registration, JWKS), whichever implementation verifies later. Public data: variable-time arithmetic
 * is fine.
 */
export function ed25519PublicKeyProblem(raw: Uint8Array): string | null {
  if (raw.length !== 32) return `is ${raw.length} bytes, not 32`;
  let y = 0n;
  for (let i = 31; i >= 0; i--) y = (y << 8n) | BigInt(i === 31 ? raw[i]! & 0x7f : raw[i]!);
  if (y >= P) return 'is not canonically encoded (y ≥ 2^255 − 19)';
  // (x = 0 only for y = ±1, both of small order: a "−0" x is refused with them.)
  if (SMALL_ORDER_Y.has(y)) return 'is a point of small order (it would verify forged signatures)';
  // x² = u / v with u = y² − 1, v = d·y² + 1 (never 0: d is not a square): a point exists only if that
  // is a square mod p, i.e. u·v is (it is u/v times the square v²); Euler's criterion. u ≠ 0 here (y ≠ ±1).
  const y2 = (y * y) % P;
  if (powMod(((y2 - 1n + P) % P) * ((D * y2 + 1n) % P), (P - 1n) / 2n) !== 1n) return 'is not a point of the curve';
  return null;
}

export const opensslEd25519: Ed25519 = {
  name: 'openssl',
  sign(privateKey, data) {
    checkEd25519Key(privateKey, 'private');
    return sign(null, data, privateKey);
  },
  verify(publicKey, data, signature) {
    checkEd25519Key(publicKey, 'public');
    return signature.length === 64 && verify(null, data, publicKey, signature);
  },
};

let current: Ed25519 = opensslEd25519;

/** Makes `impl` the implementation of this process (the server: libsodium). */
export function useEd25519(impl: Ed25519): void {
  current = impl;
}

/** The implementation in use. */
export function ed25519(): Ed25519 {
  return current;
}
