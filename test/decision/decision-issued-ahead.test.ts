import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { KeyRing, signDecision, verifyDecision, type DecisionKeys } from '../../src/decision/index.js';
import { AUDIENCE, claims, T0, tempDir } from './helpers.js';

/**
 * A decision signed by a replica whose clock is ahead carries an issued_at (iat) after the verifier's
 * time: accepted, it would live on the other replicas for its TTL plus the gap. It is refused once it is
 * dated after `now` by more than the skew tolerated (5 s by default, as for caller assertions), and
 * accepted within it (a replica a few ms ahead is no fault), by the server's key ring and a client's JWKS alike.
 */
async function setup(overrides: Parameters<typeof claims>[0] = {}) {
  const ring = await KeyRing.open(tempDir(), new ManualClock(T0));
  const jwks = JSON.parse(JSON.stringify(ring.jwks()));
  const token = await signDecision(ring, claims(overrides));
  return { keysets: [ring, jwks] as DecisionKeys[], token };
}

const refusal = (p: Promise<unknown>) => p.then(() => undefined, (e: unknown) => e as Error & { code: string });

describe('a decision dated after the verifier\'s time', () => {
  it('is accepted up to the tolerance (5 s by default) and refused past it, saying the signer\'s clock is probably ahead', async () => {
    const { keysets, token } = await setup();
    for (const keys of keysets) {
      // Issued at T0: a verifier 4 s behind accepts it, one 6 s behind refuses it; exactly 5 s is accepted.
      await expect(verifyDecision(token, { keys, audience: AUDIENCE, now: T0 - 4_000 })).resolves.toMatchObject({ decision_id: 'dec-1' });
      await expect(verifyDecision(token, { keys, audience: AUDIENCE, now: T0 - 5_000 })).resolves.toMatchObject({ decision_id: 'dec-1' });
      const e = await refusal(verifyDecision(token, { keys, audience: AUDIENCE, now: T0 - 6_000 }));
      expect(e).toMatchObject({ code: 'DECISION_INVALID' });
      expect(e!.message).toBe('decision dec-1 is issued in the future: its iat 2026-01-01T12:00:00.000Z is 6.0 s after Writ\'s time 2026-01-01T11:59:54.000Z, '
        + 'more than the 5 s of clock skew tolerated; the clock of the Writ replica that signed it is probably ahead: set it right (NTP) and decide again');
      // Not remembered as bad: once the verifier's time is within the tolerance, it is accepted.
      await expect(verifyDecision(token, { keys, audience: AUDIENCE, now: T0 })).resolves.toMatchObject({ decision_id: 'dec-1' });
    }
  });

  it('honours an explicit tolerance, ± 1 s around it, to the millisecond of issued_at', async () => {
    const { keysets, token } = await setup({ issued_at: T0 + 400, expires_at: T0 + 30_400 });
    for (const keys of keysets) {
      const verify = (now: number) => verifyDecision(token, { keys, audience: AUDIENCE, now, issuedAheadToleranceMs: 2_000 });
      await expect(verify(T0 + 400 - 1_000)).resolves.toBeDefined();
      await expect(verify(T0 + 400 - 2_000)).resolves.toBeDefined();
      await expect(verify(T0 + 400 - 2_001)).rejects.toMatchObject({ code: 'DECISION_INVALID', message: expect.stringMatching(/is 2\.0 s after Writ's time .*, more than the 2 s of clock skew tolerated/) });
      await expect(verify(T0 + 400 - 3_000)).rejects.toMatchObject({ code: 'DECISION_INVALID', message: expect.stringMatching(/is 3\.0 s after Writ's time/) });
    }
  });

  it('says whose time it is, and adds that this replica\'s own clock is behind its database\'s when it is', async () => {
    const { keysets, token } = await setup();
    const [ring, jwks] = keysets as [DecisionKeys, DecisionKeys];
    const client = await refusal(verifyDecision(token, { keys: jwks, audience: AUDIENCE, now: T0 - 90_000, clockOf: 'this client\'s' }));
    expect(client!.message).toMatch(/^decision dec-1 is issued in the future: its iat \S+ is 90\.0 s after this client's time \S+, more than the 5 s/);
    const replica = await refusal(verifyDecision(token, { keys: ring, audience: AUDIENCE, now: T0 - 90_000, clockOffsetMs: -91_000 }));
    expect(replica!.message).toMatch(/and decide again; but this replica's own clock is 91\.0 s behind its database's \(GET \/readyz\), so if the signer's clock is right it is this replica's that is wrong: set it right \(NTP\)$/);
    // A replica whose clock is right (within the tolerance of its database's) blames the signer only.
    expect((await refusal(verifyDecision(token, { keys: ring, audience: AUDIENCE, now: T0 - 90_000, clockOffsetMs: -1_000 })))!.message).toMatch(/and decide again$/);
  });

  it('is refused when it lives longer than maxLifetimeMs (a signer configured with a longer decision TTL)', async () => {
    const { keysets, token } = await setup({ expires_at: T0 + 60_000 });
    for (const keys of keysets) {
      await expect(verifyDecision(token, { keys, audience: AUDIENCE, now: T0 + 1_000 })).resolves.toBeDefined();
      await expect(verifyDecision(token, { keys, audience: AUDIENCE, now: T0 + 1_000, maxLifetimeMs: 60_000 })).resolves.toBeDefined();
      const e = await refusal(verifyDecision(token, { keys, audience: AUDIENCE, now: T0 + 1_000, maxLifetimeMs: 30_000 }));
      expect(e).toMatchObject({ code: 'DECISION_INVALID' });
      expect(e!.message).toBe('decision dec-1 lives 60.0 s (issued_at to expires_at), longer than the 30 s a decision is given here (WRIT_DECISION_TTL_MS): '
        + 'the replica that signed it is configured otherwise; give every replica the same WRIT_DECISION_TTL_MS');
    }
  });
});
