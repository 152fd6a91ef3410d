/**
 * A principal revoked on a replica whose clock is ahead of this one's reads here as revoked_at > now.
 * An authenticated caller (a lease stream's opening assertion, a lease request's caller) is no longer
 * who it was once any revocation is recorded, as a new assertion is refused (caller-auth.ts).
 */
import { describe, expect, it } from 'vitest';
import { callerNoLongerValid, type AuthenticatedCaller } from '../../src/decision/index.js';
import { keyMaterial } from '../../src/decision/caller-auth.js';
import type { PublicJwk } from '../../src/graph/model.js';

const NOW = Date.UTC(2026, 5, 1, 12);
const key: PublicJwk = { kty: 'OKP', crv: 'Ed25519', kid: 'k1', x: 'abcdefghijklmnopqrstuvwxyz012345' };
const caller: AuthenticatedCaller = { principal: 'agent', kid: 'k1', key: keyMaterial(key), jti: 'j', expiresAt: NOW + 60_000, spendUntil: NOW + 61_000 } as AuthenticatedCaller;

describe('callerNoLongerValid', () => {
  it('a principal whose revocation is recorded at a time after this replica\'s now is no longer valid', () => {
    expect(callerNoLongerValid(caller, () => ({ keys: [key], revoked_at: null }))).toBeNull();
    expect(callerNoLongerValid(caller, () => ({ keys: [key], revoked_at: NOW - 1 }))).toMatch(/revoked/);
    expect(callerNoLongerValid(caller, () => ({ keys: [key], revoked_at: NOW + 60_000 }))).toMatch(/revoked/);
  });
});
