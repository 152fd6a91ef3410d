import { generateKeyPairSync, sign } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import sodium from 'sodium-native';
import { describe, expect, it, vi } from 'vitest';
import { Ed25519VerifyWorker } from '../../src/decision/ed25519-worker.js';

const keys = Array.from({ length: 3 }, () => {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  return { privateKey, raw: Buffer.from(publicKey.export({ format: 'jwk' }).x!, 'base64url') };
});
const inline = (publicKey: Uint8Array, data: Uint8Array, signature: Uint8Array) => sodium.crypto_sign_verify_detached(signature, data, publicKey);

interface Case {
  key: number;
  signer: number;
  message: Buffer;
  flip: number | null;
}

/** A signature by `signer` over the message, checked against `key`, with one bit of it flipped or not. */
function check(c: Case): [Uint8Array, Uint8Array, Uint8Array] {
  const signature = sign(null, c.message, keys[c.signer]!.privateKey);
  if (c.flip !== null) signature[c.flip >> 3]! ^= 1 << (c.flip & 7);
  return [keys[c.key]!.raw, c.message, signature];
}

const cases = fc.record({
  key: fc.integer({ min: 0, max: keys.length - 1 }),
  signer: fc.integer({ min: 0, max: keys.length - 1 }),
  message: fc.uint8Array({ maxLength: 3000 }).map((b) => Buffer.from(b)),
  flip: fc.option(fc.integer({ min: 0, max: 511 })),
});

describe('Ed25519 checks on a worker thread (ed25519-worker.ts)', () => {
  it('answers as libsodium inline does, for batches of any size made in one turn, and across turns (the worker answering, not the inline fallback)', async () => {
    const fallback = vi.fn(inline);
    const worker = new Ed25519VerifyWorker(fallback);
    try {
      await fc.assert(
        fc.asyncProperty(fc.array(cases, { minLength: 1, maxLength: 40 }), async (batch) => {
          const checks = batch.map(check);
          const answers = await Promise.all(checks.map(([k, m, s]) => worker.verify(k, m, s)));
          expect(answers).toEqual(checks.map(([k, m, s]) => inline(k, m, s)));
        }),
        { numRuns: 60, seed: 5 },
      );
      // Enough good and bad answers among them for the comparison to mean something.
      const mixed = await Promise.all([0, 1].map((signer) => worker.verify(...check({ key: 0, signer, message: Buffer.from('writ'), flip: null }))));
      expect(mixed).toEqual([true, false]);
      expect(fallback).not.toHaveBeenCalled();
    } finally {
      await worker.stop();
    }
  });

  it('refuses a signature that is not 64 bytes or a key that is not 32, as false, without a throw', async () => {
    const worker = new Ed25519VerifyWorker(inline);
    try {
      const [key, message, signature] = check({ key: 0, signer: 0, message: Buffer.from('writ'), flip: null });
      expect(await worker.verify(key, message, signature)).toBe(true);
      expect(await worker.verify(key, message, signature.subarray(0, 63))).toBe(false);
      expect(await worker.verify(key, message, Buffer.concat([signature, Buffer.alloc(1)]))).toBe(false);
      expect(await worker.verify(key.subarray(0, 31), message, signature)).toBe(false);
    } finally {
      await worker.stop();
    }
  });

  it('a worker that ends with checks in flight: each is still answered, by the inline check, and so is every later one', async () => {
    const worker = new Ed25519VerifyWorker(inline);
    const good = check({ key: 1, signer: 1, message: Buffer.from('before'), flip: null });
    const bad = check({ key: 1, signer: 1, message: Buffer.from('before'), flip: 9 });
    // Started, so the next batch is on its way to a live worker when it is stopped.
    expect(await worker.verify(...good)).toBe(true);
    const held = [worker.verify(...good), worker.verify(...bad)];
    await new Promise((r) => setImmediate(r));
    expect(worker.fallbacks).toBe(0);
    await worker.stop();
    expect(await Promise.all(held)).toEqual([true, false]);
    expect(await Promise.all([worker.verify(...good), worker.verify(...bad)])).toEqual([true, false]);
    // Counted (the server's metrics report them as made on the event loop).
    expect(worker.fallbacks).toBe(4);
  });

  it('a worker that dies while it checks (its thread exits mid-batch): the batch is answered inline, right, and reported once as WRIT_ED25519_WORKER', async () => {
    // A library that kills the worker thread at its first check.
    const dir = mkdtempSync(join(tmpdir(), 'writ-ed25519-'));
    const library = join(dir, 'dies.cjs');
    writeFileSync(library, 'module.exports = { crypto_sign_verify_detached() { process.exit(7); } };');
    const warnings: { message: string; code?: string }[] = [];
    const onWarning = (w: Error & { code?: string }) => warnings.push({ message: w.message, code: w.code });
    process.on('warning', onWarning);
    try {
      const worker = new Ed25519VerifyWorker(inline, library);
      const good = check({ key: 2, signer: 2, message: Buffer.from('crash'), flip: null });
      const bad = check({ key: 2, signer: 0, message: Buffer.from('crash'), flip: null });
      expect(await Promise.all([worker.verify(...good), worker.verify(...bad), worker.verify(...good)])).toEqual([true, false, true]);
      expect(await Promise.all([worker.verify(...bad), worker.verify(...good)])).toEqual([false, true]);
      expect(worker.fallbacks).toBe(5);
      await new Promise((r) => setImmediate(r)); // warnings are emitted on the next tick
      expect(warnings.filter((w) => w.code === 'WRIT_ED25519_WORKER')).toEqual([
        { code: 'WRIT_ED25519_WORKER', message: expect.stringMatching(/exited with code 7.*event loop from now on/) },
      ]);
    } finally {
      process.off('warning', onWarning);
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a worker that cannot start (its library fails to load): every check is answered inline, right', async () => {
    const codes: (string | undefined)[] = [];
    const onWarning = (w: Error & { code?: string }) => codes.push(w.code);
    process.on('warning', onWarning);
    try {
      const worker = new Ed25519VerifyWorker(inline, join(tmpdir(), 'writ-no-such-library.cjs'));
      const good = check({ key: 0, signer: 0, message: Buffer.from('no worker'), flip: null });
      const flipped = check({ key: 0, signer: 0, message: Buffer.from('no worker'), flip: 100 });
      expect(await Promise.all([worker.verify(...good), worker.verify(...flipped)])).toEqual([true, false]);
      expect(await worker.verify(...good)).toBe(true);
      expect(worker.fallbacks).toBe(3);
      await new Promise((r) => setImmediate(r));
      expect(codes.filter((c) => c === 'WRIT_ED25519_WORKER')).toHaveLength(1);
    } finally {
      process.off('warning', onWarning);
    }
  });
});
