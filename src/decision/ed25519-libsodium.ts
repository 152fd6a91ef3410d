/// <reference path="../types/sodium-native.d.ts" />
import type { KeyObject } from 'node:crypto';
import sodium from 'sodium-native';
import type { Ed25519 } from './ed25519.js';

/**
 * Ed25519 through libsodium (sodium-native): see ed25519.ts for why and where. Keys stay node:crypto
 * KeyObjects everywhere (key files, JWKS import, jose in the SDK): the raw bytes libsodium takes are
 * derived once per KeyObject and kept beside it (a WeakMap, so they go with it), a secret key in
 * sodium_malloc'd memory (guard pages, never swapped out).
 */
const secretKeys = new WeakMap<KeyObject, Buffer>();
const publicKeys = new WeakMap<KeyObject, Buffer>();

function secretKeyOf(privateKey: KeyObject): Buffer {
  let sk = secretKeys.get(privateKey);
  if (sk === undefined) {
    if (privateKey.type !== 'private' || privateKey.asymmetricKeyType !== 'ed25519') throw new TypeError('not an Ed25519 private key');
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
    if (publicKey.type !== 'public' || publicKey.asymmetricKeyType !== 'ed25519') throw new TypeError('not an Ed25519 public key');
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
};
