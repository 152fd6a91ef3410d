import { generateKeyPairSync, sign } from 'node:crypto';
import { describe, expect, it, vi } from 'vitest';
import { libsodiumEd25519, offLoop } from '../../src/decision/ed25519-libsodium.js';
import { opensslEd25519, useEd25519 } from '../../src/decision/ed25519.js';
import { countWorkInFlight, decodeCompactJws, signatureChecks, signEdDsaJws, verifyJwsSignatureAsync } from '../../src/decision/jws.js';

// Records whether each node:crypto check ran on the thread pool (a callback given) or on the event loop.
const calls = vi.hoisted(() => ({ pool: 0, inline: 0 }));
vi.mock('node:crypto', async (original) => {
  const crypto = await original<typeof import('node:crypto')>();
  const verify = ((...args: unknown[]) => {
    if (typeof args[args.length - 1] === 'function') calls.pool += 1;
    else calls.inline += 1;
    return (crypto.verify as (...a: unknown[]) => unknown)(...args);
  }) as typeof crypto.verify;
  return { ...crypto, default: { ...crypto, verify }, verify };
});

const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
const withPayload = (token: string, payload: unknown) => {
  const [h, , s] = token.split('.');
  return `${h}.${b64(payload)}.${s}`;
};

const ed = generateKeyPairSync('ed25519');
const edOther = generateKeyPairSync('ed25519').publicKey;
const edToken = signEdDsaJws({ kid: 'k1', privateKey: ed.privateKey }, 'test+jwt', JSON.stringify({ sub: 'a' }));

const p256 = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const p256Other = generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey;
const esInput = `${b64({ alg: 'ES256', kid: 'k2', typ: 'test+jwt' })}.${b64({ sub: 'a' })}`;
const esToken = `${esInput}.${sign('sha256', Buffer.from(esInput), { key: p256.privateKey, dsaEncoding: 'ieee-p1363' }).toString('base64url')}`;

/** A good signature, another payload, another key, another algorithm: for each kind of key. */
async function answers(token: string, alg: 'EdDSA' | 'ES256', key: typeof ed.publicKey, other: typeof ed.publicKey): Promise<boolean[]> {
  return Promise.all([
    verifyJwsSignatureAsync(decodeCompactJws(token), alg, key),
    verifyJwsSignatureAsync(decodeCompactJws(withPayload(token, { sub: 'b' })), alg, key),
    verifyJwsSignatureAsync(decodeCompactJws(token), alg, other),
    verifyJwsSignatureAsync(decodeCompactJws(token), alg === 'EdDSA' ? 'ES256' : 'EdDSA', key),
  ]);
}

/** Keeps the event loop busy for `ms` (synchronously), as a loaded server's is. */
function busy(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function quiet(): Promise<void> {
  // The loop sleeps through the last window. A check more than one window (20 ms) after the last sample
  // closes the window the imports and key generation were in; only then does the sleep start a clean one.
  await sleep(30);
  await answers(esToken, 'ES256', p256.publicKey, p256Other);
  await sleep(200);
}

describe('which thread checks a signature', () => {
  it('ES256: on the event loop when it is quiet, on the thread pool when it is busy, with the same answers', async () => {
    // Quiet is measured on the loop's own time: on a machine loaded by other test files a window may read
    // busy although this test slept through it, so the quiet case is looked at until one reads quiet.
    for (let attempt = 1; ; attempt++) {
      await quiet();
      calls.pool = calls.inline = 0;
      expect(await answers(esToken, 'ES256', p256.publicKey, p256Other)).toEqual([true, false, false, false]);
      if (calls.inline === 3 || attempt === 5) break;
    }
    expect(calls).toEqual({ pool: 0, inline: 3 });

    busy(60);
    calls.pool = calls.inline = 0;
    const before = signatureChecks();
    expect(await answers(esToken, 'ES256', p256.publicKey, p256Other)).toEqual([true, false, false, false]);
    expect(calls).toEqual({ pool: 3, inline: 0 });
    // Every check is counted where it was made (/metrics writ_signature_checks_total): the three on the
    // pool as made on another thread, the one naming EdDSA for a P-256 key on the loop.
    const after = signatureChecks();
    expect({ onLoop: after.onLoop - before.onLoop, offLoop: after.offLoop - before.offLoop }).toEqual({ onLoop: 1, offLoop: 3 });
  });

  it('EdDSA: by OpenSSL (the default) on the event loop always; by libsodium (the server) on the event loop when it is quiet, on its worker thread when it is busy, with the same answers', async () => {
    await quiet();
    calls.pool = calls.inline = 0;
    expect(await answers(edToken, 'EdDSA', ed.publicKey, edOther)).toEqual([true, false, false, false]);
    busy(60);
    expect(await answers(edToken, 'EdDSA', ed.publicKey, edOther)).toEqual([true, false, false, false]);
    expect(calls).toEqual({ pool: 0, inline: 6 });

    useEd25519(libsodiumEd25519);
    const worker = vi.spyOn(offLoop, 'verify');
    try {
      await quiet();
      calls.pool = calls.inline = 0;
      expect(await answers(edToken, 'EdDSA', ed.publicKey, edOther)).toEqual([true, false, false, false]);
      expect(worker).not.toHaveBeenCalled();
      busy(60);
      const before = signatureChecks();
      expect(await answers(edToken, 'EdDSA', ed.publicKey, edOther)).toEqual([true, false, false, false]);
      // The three EdDSA checks (good, another payload, another key); the fourth names ES256 for an Ed25519 key.
      expect(worker).toHaveBeenCalledTimes(3);
      expect(calls).toEqual({ pool: 0, inline: 0 });
      // That one is refused at once on the loop, and counted there too.
      const after = signatureChecks();
      expect({ onLoop: after.onLoop - before.onLoop, offLoop: after.offLoop - before.offLoop }).toEqual({ onLoop: 1, offLoop: 3 });
    } finally {
      worker.mockRestore();
      useEd25519(opensslEd25519);
    }
  });

  it('a server with no other request in flight keeps its checks on the event loop, busy or not: a hand-off would only add to the one caller\'s wait', async () => {
    let inFlight = 1;
    const uncount = countWorkInFlight(() => inFlight);
    useEd25519(libsodiumEd25519);
    const worker = vi.spyOn(offLoop, 'verify');
    try {
      await quiet();
      calls.pool = calls.inline = 0;
      busy(60);
      expect(await answers(edToken, 'EdDSA', ed.publicKey, edOther)).toEqual([true, false, false, false]);
      expect(await answers(esToken, 'ES256', p256.publicKey, p256Other)).toEqual([true, false, false, false]);
      expect(worker).not.toHaveBeenCalled();
      expect(calls).toEqual({ pool: 0, inline: 3 });

      // Another request in flight (this server's or another's in the process): handed over.
      const another = countWorkInFlight(() => 1);
      busy(60);
      // Both in the same turn: the loop still counts as busy for each (a worker's first start takes longer than the 20 ms window).
      const [edAnswers, esAnswers] = await Promise.all([answers(edToken, 'EdDSA', ed.publicKey, edOther), answers(esToken, 'ES256', p256.publicKey, p256Other)]);
      expect(edAnswers).toEqual([true, false, false, false]);
      expect(esAnswers).toEqual([true, false, false, false]);
      expect(worker).toHaveBeenCalledTimes(3);
      expect(calls).toEqual({ pool: 3, inline: 3 });

      another();
      inFlight = 2;
      busy(60);
      expect(await answers(edToken, 'EdDSA', ed.publicKey, edOther)).toEqual([true, false, false, false]);
      expect(worker).toHaveBeenCalledTimes(6);
    } finally {
      uncount();
      worker.mockRestore();
      useEd25519(opensslEd25519);
    }
  });
});
