import { generateKeyPairSync } from 'node:crypto';
import { describe, expect, it, vi } from 'vitest';
import { decodeCompactJws, signEdDsaJws, verifyJwsSignatureAsync } from '../../src/decision/jws.js';

// Records whether each check ran on the thread pool (a callback given) or on the event loop.
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

const { privateKey, publicKey } = generateKeyPairSync('ed25519');
const other = generateKeyPairSync('ed25519').publicKey;
const token = signEdDsaJws({ kid: 'k1', privateKey }, 'test+jwt', JSON.stringify({ sub: 'a' }));
const tampered = (() => {
  const [h, , s] = token.split('.');
  return `${h}.${Buffer.from(JSON.stringify({ sub: 'b' })).toString('base64url')}.${s}`;
})();

async function answers(): Promise<boolean[]> {
  return Promise.all([
    verifyJwsSignatureAsync(decodeCompactJws(token), 'EdDSA', publicKey),
    verifyJwsSignatureAsync(decodeCompactJws(tampered), 'EdDSA', publicKey),
    verifyJwsSignatureAsync(decodeCompactJws(token), 'EdDSA', other),
    verifyJwsSignatureAsync(decodeCompactJws(token), 'ES256', publicKey),
  ]);
}

/** Keeps the event loop busy for `ms` (synchronously), as a loaded server's is. */
function busy(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until);
}

describe('an Ed25519 check, on the event loop when it is quiet and on the thread pool when it is busy', () => {
  it('gives the same answers either way: a good signature, another payload, another key, another algorithm', async () => {
    // Quiet: the loop slept through the last window (the first round closes the window the imports were in).
    await answers();
    await new Promise((r) => setTimeout(r, 200));
    calls.pool = calls.inline = 0;
    expect(await answers()).toEqual([true, false, false, false]);
    expect(calls).toEqual({ pool: 0, inline: 3 });

    // Busy: the loop worked through (nearly) the whole last window.
    busy(60);
    calls.pool = calls.inline = 0;
    expect(await answers()).toEqual([true, false, false, false]);
    expect(calls).toEqual({ pool: 3, inline: 0 });
  });
});
