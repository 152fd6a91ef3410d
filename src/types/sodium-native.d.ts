/**
 * The part of sodium-native (libsodium bindings, CommonJS) Writ uses: Ed25519 signatures
 * (src/decision/ed25519.ts), and the two group operations its tests take as the oracle for
 * `ed25519PublicKeyProblem`.
 */
declare module 'sodium-native' {
  const sodium: {
    crypto_sign_BYTES: number;
    crypto_sign_PUBLICKEYBYTES: number;
    crypto_sign_SECRETKEYBYTES: number;
    /** Guarded, locked memory (not swapped out; freed when the buffer is collected). */
    sodium_malloc(size: number): Buffer;
    crypto_sign_seed_keypair(pk: Uint8Array, sk: Uint8Array, seed: Uint8Array): void;
    crypto_sign_detached(sig: Uint8Array, m: Uint8Array, sk: Uint8Array): void;
    crypto_sign_verify_detached(sig: Uint8Array, m: Uint8Array, pk: Uint8Array): boolean;
    /** Whether p is a canonical encoding of a point on the curve, in the prime-order subgroup, not of small order. */
    crypto_core_ed25519_is_valid_point(p: Uint8Array): boolean;
    /** r = p + q; throws when p or q does not decode to a point of the curve. */
    crypto_core_ed25519_add(r: Uint8Array, p: Uint8Array, q: Uint8Array): void;
  };
  export default sodium;
}
