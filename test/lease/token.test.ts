import { describe, expect, it } from 'vitest';
import { hashLeaseToken, leaseIdOfToken, newLeaseCredentials, pooledRandomBytes } from '../../src/lease/token.js';

describe('lease tokens and ids', () => {
  it('derives the lease id from the token, so a presented token names its lease; the id reveals nothing of the stored hash', () => {
    const c = newLeaseCredentials(pooledRandomBytes, Date.UTC(2026, 0, 1));
    expect(c.token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(c.tokenHash).toBe(hashLeaseToken(c.token));
    expect(c.leaseId).toMatch(/^lease_[A-Za-z0-9_-]{22}$/);
    expect(leaseIdOfToken(c.token)).toBe(c.leaseId);
    expect(c.tokenHash).not.toContain(Buffer.from(c.leaseId.slice(6), 'base64url').subarray(6).toString('hex'));
    for (const notAToken of ['guessed', `${c.token}x`, c.token.slice(1), `${c.token.slice(0, 42)}=`]) expect(leaseIdOfToken(notAToken)).toBeNull();
  });

  it('gives every acquisition a fresh token and id; ids of acquisitions close in time share their beginning', () => {
    const t0 = Date.UTC(2026, 0, 1);
    const all = Array.from({ length: 200 }, (_, i) => newLeaseCredentials(pooledRandomBytes, t0 + i));
    expect(new Set(all.map((c) => c.token)).size).toBe(200);
    expect(new Set(all.map((c) => c.leaseId)).size).toBe(200);
    // 200 ms apart at most: the first 6 bytes (8 characters) are the time, so the first 6 characters are shared.
    expect(new Set(all.map((c) => c.leaseId.slice(0, 'lease_'.length + 6))).size).toBe(1);
    // Same millisecond: still distinct (26 random bytes each).
    const same = Array.from({ length: 50 }, () => newLeaseCredentials(pooledRandomBytes, t0));
    expect(new Set(same.map((c) => c.leaseId)).size).toBe(50);
    expect(new Set(same.map((c) => c.leaseId.slice(0, 'lease_'.length + 8))).size).toBe(1);
  });

  it('hands out pooled random bytes once each, as copies the pool does not overwrite', () => {
    const taken = Array.from({ length: 400 }, () => pooledRandomBytes(26)); // more than one 4 KiB pool
    const hex = taken.map((b) => b.toString('hex'));
    expect(new Set(hex).size).toBe(400);
    pooledRandomBytes(4096);
    expect(taken.map((b) => b.toString('hex'))).toEqual(hex);
    expect(pooledRandomBytes(10_000)).toHaveLength(10_000);
  });
});
