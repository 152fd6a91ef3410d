import { describe, expect, it, vi } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { KeyRing, signDecision, verifyDecision } from '../../src/decision/index.js';
import { DECISION_TYP } from '../../src/decision/decision-claims.js';
import { signEdDsaJws } from '../../src/decision/jws.js';
import { AUDIENCE, claims, T0, tempDir } from './helpers.js';

// Counts the Ed25519 checks and the decodings verifyDecision asks for (the real ones still run).
const checks = vi.hoisted(() => ({ n: 0, decoded: 0 }));
vi.mock('../../src/decision/jws.js', async (original) => {
  const jws = await original<typeof import('../../src/decision/jws.js')>();
  return {
    ...jws,
    decodeCompactJws: (token: string) => {
      checks.decoded += 1;
      return jws.decodeCompactJws(token);
    },
    verifyJwsSignatureAsync: (...args: Parameters<typeof jws.verifyJwsSignatureAsync>) => {
      checks.n += 1;
      return jws.verifyJwsSignatureAsync(...args);
    },
  };
});

describe('a decision this process signed', () => {
  it('is accepted by its own key ring without an Ed25519 check, and with every claim checked', async () => {
    const clock = new ManualClock(T0);
    const ring = await KeyRing.open(tempDir(), clock);
    const token = await signDecision(ring, claims({ decision_id: 'dec-own' }));
    checks.n = 0;
    expect(await verifyDecision(token, { keys: ring, audience: AUDIENCE, now: T0 + 1000 })).toEqual(claims({ decision_id: 'dec-own' }));
    expect(checks.n).toBe(0);
    // The claims are still judged: expired, or for another audience, it is refused.
    await expect(verifyDecision(token, { keys: ring, audience: AUDIENCE, now: T0 + 30_000 })).rejects.toMatchObject({ code: 'DECISION_EXPIRED' });
    await expect(verifyDecision(token, { keys: ring, audience: 'another-gateway', now: T0 + 1000 })).rejects.toMatchObject({ code: 'DECISION_INVALID' });
    expect(checks.n).toBe(0);
  });

  it('is checked when it comes through another key object (a client\'s JWKS), when one byte differs, and refused once its key is retired', async () => {
    const clock = new ManualClock(T0);
    const ring = await KeyRing.open(tempDir(), clock);
    const token = await signDecision(ring, claims());
    checks.n = 0;
    const jwks = JSON.parse(JSON.stringify(ring.jwks()));
    expect(await verifyDecision(token, { keys: jwks, audience: AUDIENCE, now: T0 + 1000 })).toEqual(claims());
    expect(checks.n).toBe(1);

    // The same signature over other claims: checked, and refused.
    const [h, p, s] = token.split('.') as [string, string, string];
    const forged = Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.from(p, 'base64url').toString()), sub: 'impostor-agent' })).toString('base64url');
    await expect(verifyDecision(`${h}.${forged}.${s}`, { keys: ring, audience: AUDIENCE, now: T0 + 1000 })).rejects.toMatchObject({ code: 'DECISION_INVALID', message: expect.stringMatching(/signature/) });
    expect(checks.n).toBe(2);

    // Another process's ring on the same key folder: the same kid, another key object. What this ring
    // signed is checked there (and accepted), not taken on trust.
    const replica = await KeyRing.open(ring.dir, clock);
    expect(replica.current().kid).toBe(ring.current().kid);
    expect(replica.verificationKey(ring.current().kid)).not.toBe(ring.verificationKey(ring.current().kid));
    const fresh = await signDecision(ring, claims({ decision_id: 'dec-for-the-replica' }));
    const before = checks.n;
    expect(await verifyDecision(fresh, { keys: replica, audience: AUDIENCE, now: T0 + 1000 })).toEqual(claims({ decision_id: 'dec-for-the-replica' }));
    expect(checks.n).toBe(before + 1);

    // Retired past the grace period, the key is no longer published: the remembered token is unknown.
    await ring.rotate();
    clock.advance(ring.retiredKeyPublishedMs + 1);
    await expect(verifyDecision(token, { keys: ring, audience: AUDIENCE, now: clock.now() })).rejects.toMatchObject({ code: 'DECISION_INVALID', message: expect.stringMatching(/not a known Writ key/) });
  });

  it('is decoded once: later calls judge its claims again on what was read, and share one frozen copy of them', async () => {
    const clock = new ManualClock(T0);
    const ring = await KeyRing.open(tempDir(), clock);
    const token = await signDecision(ring, claims({ decision_id: 'dec-read-once' }));
    checks.decoded = 0;
    const first = await verifyDecision(token, { keys: ring, audience: AUDIENCE, now: T0 + 1000 });
    const again = await verifyDecision(token, { keys: ring, audience: AUDIENCE, now: T0 + 2000 });
    expect(checks.decoded).toBe(1);
    expect(again).toBe(first);
    expect(first).toEqual(claims({ decision_id: 'dec-read-once' }));
    // Nobody can change what the next caller is given.
    expect(Object.isFrozen(first) && Object.isFrozen(first.fields) && Object.isFrozen(first.obligations)).toBe(true);
    expect(() => (first.fields as string[]).push('slug')).toThrow(TypeError);
    // Judged again on each call, without decoding again.
    await expect(verifyDecision(token, { keys: ring, audience: 'another-gateway', now: T0 + 1000 })).rejects.toMatchObject({ code: 'DECISION_INVALID' });
    await expect(verifyDecision(token, { keys: ring, audience: AUDIENCE, now: T0 + 30_000 })).rejects.toMatchObject({ code: 'DECISION_EXPIRED' });
    expect(checks.decoded).toBe(1);
    // A token that fails its claims is refused on every call, the same way.
    const { action: _, ...payload } = JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()) as Record<string, unknown>;
    const noAction = signEdDsaJws(ring.current(), DECISION_TYP, JSON.stringify(payload));
    for (let i = 0; i < 2; i++) {
      await expect(verifyDecision(noAction, { keys: ring, audience: AUDIENCE, now: T0 + 1000 })).rejects.toMatchObject({ code: 'DECISION_INVALID', message: expect.stringMatching(/action/) });
    }
  });

  it('keeps what it read of the 2,048 tokens read last: an older one is decoded again, without a signature check', async () => {
    const clock = new ManualClock(T0);
    const ring = await KeyRing.open(tempDir(), clock);
    const first = await signDecision(ring, claims({ decision_id: 'dec-oldest' }));
    await verifyDecision(first, { keys: ring, audience: AUDIENCE, now: T0 + 1000 });
    for (let i = 0; i < 2048; i++) {
      await verifyDecision(await signDecision(ring, claims({ decision_id: `dec-${i}` })), { keys: ring, audience: AUDIENCE, now: T0 + 1000 });
    }
    checks.n = 0;
    checks.decoded = 0;
    expect((await verifyDecision(first, { keys: ring, audience: AUDIENCE, now: T0 + 1000 })).decision_id).toBe('dec-oldest');
    expect(checks.decoded).toBe(1);
    expect(checks.n).toBe(0);
  });

  it('a token read before is refused once its key has left the JWKS, as one never read', async () => {
    const clock = new ManualClock(T0);
    const ring = await KeyRing.open(tempDir(), clock);
    const token = await signDecision(ring, claims({ decision_id: 'dec-then-retired' }));
    await verifyDecision(token, { keys: ring, audience: AUDIENCE, now: clock.now() });
    checks.decoded = 0;
    await verifyDecision(token, { keys: ring, audience: AUDIENCE, now: clock.now() });
    expect(checks.decoded).toBe(0);
    await ring.rotate();
    clock.advance(ring.retiredKeyPublishedMs + 1);
    await expect(verifyDecision(token, { keys: ring, audience: AUDIENCE, now: clock.now() })).rejects.toMatchObject({ code: 'DECISION_INVALID', message: expect.stringMatching(/not a known Writ key/) });
  });
});
