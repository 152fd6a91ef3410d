/** The part of sodium-native (libsodium bindings, CommonJS) Writ uses: Ed25519 signatures (src/decision/ed25519.ts). */
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
  };
  export default sodium;
}
