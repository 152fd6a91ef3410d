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
 * by the identity point for any message). test/decision/ed25519.test.ts checks both. The server's
 * choice is one-way for the process (a test that opened a Writ leaves libsodium installed).
 */
export interface Ed25519 {
  readonly name: 'openssl' | 'libsodium';
  /** The 64-byte signature of `data`. Throws for a key that is not an Ed25519 private key. */
  sign(privateKey: KeyObject, data: Uint8Array): Buffer;
  /** Whether `signature` is a valid signature of `data` by `publicKey`: false, never a throw, for a signature that is not 64 bytes. Throws for a key that is not an Ed25519 public key. */
  verify(publicKey: KeyObject, data: Uint8Array, signature: Uint8Array): boolean;
}

/** Throws unless `key` is an Ed25519 key of that type: no implementation signs or verifies with another kind. */
export function checkEd25519Key(key: KeyObject, type: 'private' | 'public'): void {
  if (key.type !== type || key.asymmetricKeyType !== 'ed25519') throw new TypeError(`not an Ed25519 ${type} key`);
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
