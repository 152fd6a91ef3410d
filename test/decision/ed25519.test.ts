import { createPublicKey, generateKeyPairSync, sign, verify } from 'node:crypto';
import fc from 'fast-check';
import { createLocalJWKSet, jwtVerify } from 'jose';
import { describe, expect, it } from 'vitest';
import sodiumNative from 'sodium-native';
import { libsodiumEd25519 as sodium } from '../../src/decision/ed25519-libsodium.js';
import { ed25519, ed25519PublicKeyProblem, opensslEd25519 as openssl, useEd25519 } from '../../src/decision/ed25519.js';
import { publicKeyFromJwk } from '../../src/decision/jws.js';
import { startHarness } from '../support/harness.js';

/** The group order L of Ed25519 (RFC 8032 §5.1), little-endian, as a signature's S is encoded. */
const L = (1n << 252n) + 27742317777372353535851937790883648493n;
const le32 = (n: bigint) => Buffer.from(Array.from({ length: 32 }, (_, i) => Number((n >> BigInt(8 * i)) & 0xffn)));
const fromLe = (b: Buffer) => b.reduceRight((acc, byte) => (acc << 8n) | BigInt(byte), 0n);

const keys = Array.from({ length: 4 }, () => generateKeyPairSync('ed25519'));

describe('Ed25519: libsodium (the server) and OpenSSL (the default, the SDK)', () => {
  it('signs exactly as node:crypto (OpenSSL) does, and each verifies the other', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: keys.length - 1 }), fc.uint8Array({ maxLength: 2048 }), (k, bytes) => {
        const { privateKey, publicKey } = keys[k]!;
        const message = Buffer.from(bytes);
        const bySodium = sodium.sign(privateKey, message);
        expect(bySodium.equals(openssl.sign(privateKey, message))).toBe(true);
        expect(bySodium.equals(sign(null, message, privateKey))).toBe(true);
        expect(openssl.verify(publicKey, message, bySodium)).toBe(true);
        expect(sodium.verify(publicKey, message, sign(null, message, privateKey))).toBe(true);
      }),
      { numRuns: 300, seed: 11 },
    );
  });

  it('libsodium off the event loop (its worker) answers as its inline check does: another message, another key, a flipped bit, any length but 64', async () => {
    const { privateKey, publicKey } = keys[0]!;
    const message = Buffer.from('writ decision');
    const signature = sodium.sign(privateKey, message);
    const flipped = Buffer.from(signature);
    flipped[5]! ^= 2;
    const cases: [typeof publicKey, Buffer, Buffer][] = [
      [publicKey, message, signature],
      [publicKey, Buffer.from('writ decisioN'), signature],
      [keys[1]!.publicKey, message, signature],
      [publicKey, message, flipped],
      [publicKey, message, signature.subarray(0, 63)],
      [publicKey, message, Buffer.concat([signature, Buffer.alloc(1)])],
      [publicKey, message, Buffer.alloc(0)],
    ];
    const offLoop = await Promise.all(cases.map(([k, m, sig]) => sodium.verifyOffLoop!(k, m, sig)));
    expect(offLoop).toEqual([true, false, false, false, false, false, false]);
    expect(offLoop).toEqual(cases.map(([k, m, sig]) => sodium.verify(k, m, sig)));
  });

  it.each([sodium, openssl])('$name refuses another message, another key, any flipped bit and any length but 64, as false', (impl) => {
    const { privateKey, publicKey } = keys[0]!;
    const message = Buffer.from('writ decision');
    const signature = impl.sign(privateKey, message);
    expect(impl.verify(publicKey, message, signature)).toBe(true);
    expect(impl.verify(publicKey, Buffer.from('writ decisioN'), signature)).toBe(false);
    expect(impl.verify(keys[1]!.publicKey, message, signature)).toBe(false);
    for (let bit = 0; bit < 512; bit += 7) {
      const flipped = Buffer.from(signature);
      flipped[bit >> 3]! ^= 1 << (bit & 7);
      expect(impl.verify(publicKey, message, flipped), `bit ${bit}`).toBe(false);
    }
    expect(impl.verify(publicKey, message, signature.subarray(0, 63))).toBe(false);
    expect(impl.verify(publicKey, message, Buffer.concat([signature, Buffer.alloc(1)]))).toBe(false);
    expect(impl.verify(publicKey, message, Buffer.alloc(0))).toBe(false);
  });

  it.each([sodium, openssl])('$name refuses a malleated signature (S + L: the same point, a non-canonical scalar)', (impl) => {
    const { privateKey, publicKey } = keys[2]!;
    const message = Buffer.from('pay 10');
    const signature = impl.sign(privateKey, message);
    const s = fromLe(signature.subarray(32));
    const malleated = Buffer.concat([signature.subarray(0, 32), le32(s + L)]);
    expect(impl.verify(publicKey, message, malleated)).toBe(false);
  });

  it('libsodium refuses a small-order public key, with which one signature verifies for every message', () => {
    // The identity point (y = 1) as a public key, and the signature R = identity, S = 0: it satisfies the
    // bare verification equation for any message. Writ's keys are registered by governance, so this is
    // defence in depth: such a key verifies nothing here.
    const identity = le32(1n);
    const publicKey = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: identity.toString('base64url') }, format: 'jwk' });
    const forged = Buffer.concat([identity, Buffer.alloc(32)]);
    // (OpenSSL 3, under Node 20, accepts it: `openssl.verify(publicKey, …, forged)` is true. Not asserted: a
    // later OpenSSL may refuse it too.)
    expect(sodium.verify(publicKey, Buffer.from('any message'), forged)).toBe(false);
    expect(sodium.verify(publicKey, Buffer.from('another one'), forged)).toBe(false);
  });

  it('refuses every small-order key where keys come in (publicKeyFromJwk), so OpenSSL never sees one', () => {
    const identity = le32(1n);
    expect(() => publicKeyFromJwk({ kty: 'OKP', crv: 'Ed25519', x: identity.toString('base64url') })).toThrow(/small order/);
    // Each y of small order, with x of either sign: libsodium (the oracle) finds 8·P = identity for each.
    const p = (1n << 255n) - 19n;
    const y8 = 2707385501144840649318225287225658788936804267575313519463743609750303402022n;
    for (const y of [0n, 1n, p - 1n, y8, p - y8]) {
      for (const sign of [0, 0x80]) {
        if (sign && (y === 1n || y === p - 1n)) continue; // their x is 0, which has no sign to set
        const point = le32(y);
        point[31]! |= sign;
        let multiple = Buffer.from(point);
        for (let i = 0; i < 3; i++) {
          const doubled = Buffer.alloc(32);
          sodiumNative.crypto_core_ed25519_add(doubled, multiple, multiple);
          multiple = doubled;
        }
        expect(multiple.equals(identity), `y = ${y}, sign ${sign}`).toBe(true);
        expect(ed25519PublicKeyProblem(point), `y = ${y}`).toMatch(/small order/);
        expect(sodiumNative.crypto_core_ed25519_is_valid_point(point)).toBe(false);
      }
    }
    // The other spellings of 0 and 1 (y + p) and every other y ≥ p: not canonical.
    for (let k = 0n; k <= 18n; k++) expect(ed25519PublicKeyProblem(le32(p + k))).toMatch(/not canonically encoded/);
  });

  it('accepts every generated key, and finds "not a point of the curve" exactly where libsodium cannot decode one', () => {
    for (let i = 0; i < 200; i++) {
      const x = Buffer.from(generateKeyPairSync('ed25519').publicKey.export({ format: 'jwk' }).x!, 'base64url');
      expect(ed25519PublicKeyProblem(x)).toBeNull();
    }
    let offCurve = 0;
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 32, maxLength: 32 }), (bytes) => {
        const raw = Buffer.from(bytes);
        raw[31]! &= 0x7f; // canonical (y < 2^255 − 19) but for 19 values in 2^255
        const problem = ed25519PublicKeyProblem(raw);
        let decodes = true;
        try {
          sodiumNative.crypto_core_ed25519_add(Buffer.alloc(32), raw, raw);
        } catch {
          decodes = false;
        }
        if (!decodes) offCurve++;
        expect(problem === 'is not a point of the curve').toBe(!decodes);
        if (decodes) expect(problem).toBeNull();
      }),
      { numRuns: 400, seed: 5 },
    );
    expect(offCurve).toBeGreaterThan(100); // about half of all y have no x
    expect(ed25519PublicKeyProblem(Buffer.alloc(31))).toMatch(/31 bytes/);
  });

  it.each([sodium, openssl])('$name throws for a key of another kind (never signs or verifies with it)', (impl) => {
    const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    expect(() => impl.sign(ec.privateKey, Buffer.from('x'))).toThrow(/not an Ed25519 private key/);
    expect(() => impl.verify(ec.publicKey, Buffer.from('x'), Buffer.alloc(64))).toThrow(/not an Ed25519 public key/);
    expect(() => impl.sign(keys[0]!.publicKey, Buffer.from('x'))).toThrow(/not an Ed25519 private key/);
  });

  it('a Writ, once open, signs with libsodium: its decisions over HTTP verify with jose against its JWKS', async () => {
    expect(ed25519().name).toBe('openssl');
    const h = await startHarness().catch((e) => {
      useEd25519(openssl);
      throw e;
    });
    try {
      expect(ed25519().name).toBe('libsodium');
      const res = await h.call('seo-agent-7', { method: 'POST', url: '/v1/decisions', payload: { action: 'update_post', resource: 'wp:post:1024', environment: 'production', fields: ['title'] } });
      expect(res.status).toBe(200);
      const jwks = (await h.call(null, { method: 'GET', url: '/.well-known/jwks.json' })).body;
      const { payload } = await jwtVerify(res.body.token, createLocalJWKSet(jwks), { audience: h.config.gatewayAudience, currentDate: new Date(h.clock.now()) });
      expect(payload.jti).toBe(res.body.decision_id);
    } finally {
      await h.close();
      useEd25519(openssl);
    }
  });
});
