/// <reference path="../types/sodium-native.d.ts" />
// (The reference: the lease tests compile a few files for their child processes, without the tsconfig.)
import type { KeyObject } from 'node:crypto';
import sodium from 'sodium-native';
import { checkEd25519Key, type Ed25519 } from './ed25519.js';
import { Ed25519VerifyWorker } from './ed25519-worker.js';

/**
 * Ed25519 through libsodium (sodium-native): see ed25519.ts for why and where. Keys stay node:crypto
 * KeyObjects everywhere (key files, JWKS import, jose in the SDK): the raw bytes libsodium takes are
 * derived once per KeyObject and kept beside it (a WeakMap, so they go with it). libsodium's copy of a
 * secret key is in sodium_malloc'd memory (guard pages, locked where the system allows); the KeyObject
 * it came from keeps its own copy, as before.
 */
const secretKeys = new WeakMap<KeyObject, Buffer>();
const publicKeys = new WeakMap<KeyObject, Buffer>();

function secretKeyOf(privateKey: KeyObject): Buffer {
  let sk = secretKeys.get(privateKey);
  if (sk === undefined) {
    checkEd25519Key(privateKey, 'private');
    const seed = Buffer.from(privateKey.export({ format: 'jwk' }).d!, 'base64url');
    sk = sodium.sodium_malloc(sodium.crypto_sign_SECRETKEYBYTES);
    sodium.crypto_sign_seed_keypair(Buffer.alloc(sodium.crypto_sign_PUBLICKEYBYTES), sk, seed);
    seed.fill(0);
    secretKeys.set(privateKey, sk);
  }
  return sk;
}

function publicKeyOf(publicKey: KeyObject): Buffer {
  let pk = publicKeys.get(publicKey);
  if (pk === undefined) {
    checkEd25519Key(publicKey, 'public');
    pk = Buffer.from(publicKey.export({ format: 'jwk' }).x!, 'base64url');
    publicKeys.set(publicKey, pk);
  }
  return pk;
}

export const libsodiumEd25519: Ed25519 = {
  name: 'libsodium',
  sign(privateKey, data) {
    const signature = Buffer.allocUnsafe(sodium.crypto_sign_BYTES);
    sodium.crypto_sign_detached(signature, data, secretKeyOf(privateKey));
    return signature;
  },
  verify(publicKey, data, signature) {
    const pk = publicKeyOf(publicKey);
    return signature.length === sodium.crypto_sign_BYTES && sodium.crypto_sign_verify_detached(signature, data, pk);
  },
  verifyOffLoop(publicKey, data, signature) {
    // (The worker refuses a signature that is not 64 bytes, as `verify` does.)
    return offLoop.verify(publicKeyOf(publicKey), data, signature);
  },
  offLoopFallbacks: () => offLoop.fallbacks,
};

/** The worker behind `verifyOffLoop` (started on its first check). */
export const offLoop = new Ed25519VerifyWorker((pk, data, signature) => sodium.crypto_sign_verify_detached(signature, data, pk));
