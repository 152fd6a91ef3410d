import { afterAll, describe, expect, it } from 'vitest';
import { hashLeaseToken } from '../../src/lease/index.js';
import { codeOf, leaseHarness, snapshot } from './fixtures/in-process.js';
import { removeTempDirs } from './fixtures/processes.js';

afterAll(removeTempDirs);

const A = 'seo-agent-7';
const B = 'content-agent-2';

describe('acquiring a lease', () => {
  it('grants a token, a lease id and epoch 1 for a never-leased key, and records it in Kubernetes Lease terms', async () => {
    const { leases, clock, db } = leaseHarness();
    const t0 = clock.now();
    const grant = await leases.acquire({ resources: ['wp:post:1024'], holder: A, priority: 10, ttlMs: 30_000, instance: 'pid-1' });
    expect(grant.epochs).toEqual({ 'wp:post:1024': 1 });
    expect(grant.expires_at).toBe(t0 + 30_000);
    expect(grant.token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(grant.lease_id).toMatch(/^lease_/);
    expect(await leases.describe('wp:post:1024')).toEqual({
      key: 'wp:post:1024',
      holderIdentity: A,
      holderInstance: 'pid-1',
      leaseDurationSeconds: 30,
      acquireTime: t0,
      renewTime: t0,
      leaseTransitions: 0,
      epoch: 1,
      expiresAt: t0 + 30_000,
      leaseId: grant.lease_id,
      priority: 10,
      state: 'HELD',
      preemptedBy: null,
    });
    // Only the hash is stored: the token appears nowhere in the file's lease tables.
    expect(JSON.stringify(snapshot(db))).not.toContain(grant.token);
    expect(JSON.stringify(snapshot(db))).toContain(hashLeaseToken(grant.token));
  });

  it('answers RESOURCE_BUSY with the holder, its expiry and a retry-after while the key is held', async () => {
    const { leases, clock } = leaseHarness();
    const held = await leases.acquire({ resources: ['wp:post:1'], holder: A, priority: 0, ttlMs: 10_000 });
    clock.advance(4_000);
    const err = await leases.acquire({ resources: ['wp:post:1'], holder: B, priority: 0, ttlMs: 10_000 }).catch((e) => e);
    expect(err.code).toBe('RESOURCE_BUSY');
    expect(err.details).toMatchObject({ key: 'wp:post:1', holder: A, expires_at: held.expires_at, retry_after_ms: 6_000 });
  });

  it('refuses a second acquisition by the same principal while it holds the key (no re-entry by name)', async () => {
    const { leases } = leaseHarness();
    await leases.acquire({ resources: ['wp:post:1'], holder: A, priority: 0, ttlMs: 10_000 });
    expect(await codeOf(leases.acquire({ resources: ['wp:post:1'], holder: A, priority: 0, ttlMs: 10_000 }))).toBe('RESOURCE_BUSY');
  });

  it('takes several keys all-or-nothing: one busy key leaves the others untouched', async () => {
    const { leases } = leaseHarness();
    await leases.acquire({ resources: ['wp:post:2'], holder: A, priority: 0, ttlMs: 10_000 });
    const err = await leases.acquire({ resources: ['wp:post:3', 'wp:post:2', 'wp:post:1'], holder: B, priority: 0, ttlMs: 10_000 }).catch((e) => e);
    expect(err.code).toBe('RESOURCE_BUSY');
    expect(err.details.key).toBe('wp:post:2');
    expect(await leases.describe('wp:post:1')).toBeUndefined();
    expect(await leases.currentEpoch('wp:post:1')).toBe(0);
    const both = await leases.acquire({ resources: ['wp:post:3', 'wp:post:1', 'wp:post:3'], holder: B, priority: 0, ttlMs: 10_000 });
    expect(both.epochs).toEqual({ 'wp:post:1': 1, 'wp:post:3': 1 });
  });

  it('refuses ttl outside the configured bounds, and bad input, with UNPROCESSABLE', async () => {
    const { leases } = leaseHarness({ minTtlMs: 500, maxTtlMs: 60_000 });
    const base = { resources: ['wp:post:1'], holder: A, priority: 0, ttlMs: 1_000 };
    expect(await codeOf(leases.acquire({ ...base, ttlMs: 499 }))).toBe('UNPROCESSABLE');
    expect(await codeOf(leases.acquire({ ...base, ttlMs: 60_001 }))).toBe('UNPROCESSABLE');
    expect(await codeOf(leases.acquire({ ...base, ttlMs: 1_000.5 }))).toBe('UNPROCESSABLE');
    expect(await codeOf(leases.acquire({ ...base, resources: [] }))).toBe('UNPROCESSABLE');
    expect(await codeOf(leases.acquire({ ...base, resources: ['wp:post 1'] }))).toBe('UNPROCESSABLE');
    expect(await codeOf(leases.acquire({ ...base, waitMs: -1 }))).toBe('UNPROCESSABLE');
    expect(await codeOf(leases.acquire({ ...base, priority: 1.5 }))).toBe('UNPROCESSABLE');
    expect(await leases.list()).toEqual([]);
    expect(await codeOf(leases.acquire({ ...base, ttlMs: 60_000 }))).toBe('RESOLVED');
  });
});

describe('renewing and releasing', () => {
  it('renew extends every key of the lease from now, by the same duration unless a new ttl is given', async () => {
    const { leases, clock } = leaseHarness();
    const g = await leases.acquire({ resources: ['wp:post:1', 'wp:post:2'], holder: A, priority: 0, ttlMs: 10_000 });
    clock.advance(8_000);
    const r1 = await leases.renew(g.lease_id, g.token);
    expect(r1).toEqual({ lease_id: g.lease_id, epochs: g.epochs, expires_at: clock.now() + 10_000 });
    clock.advance(9_000);
    const r2 = await leases.renew(g.lease_id, g.token, 20_000);
    expect(r2.expires_at).toBe(clock.now() + 20_000);
    for (const key of ['wp:post:1', 'wp:post:2']) {
      expect(await leases.describe(key)).toMatchObject({ state: 'HELD', renewTime: clock.now(), leaseDurationSeconds: 20, epoch: 1 });
    }
  });

  it('release then re-acquire gives a new token and epoch + 1; the old token is refused for renew, release and the fence', async () => {
    const { leases } = leaseHarness();
    const first = await leases.acquire({ resources: ['wp:post:9'], holder: A, priority: 0, ttlMs: 10_000 });
    expect(await leases.release(first.lease_id, first.token)).toEqual({ lease_id: first.lease_id, epochs: { 'wp:post:9': 1 } });
    expect(await leases.describe('wp:post:9')).toMatchObject({ state: 'FREE', holderIdentity: null, epoch: 1 });
    const second = await leases.acquire({ resources: ['wp:post:9'], holder: A, priority: 0, ttlMs: 10_000 });
    expect(second.token).not.toBe(first.token);
    expect(second.epochs['wp:post:9']).toBe(2);
    expect(await codeOf(leases.renew(first.lease_id, first.token))).toBe('LEASE_EXPIRED');
    expect(await codeOf(leases.release(first.lease_id, first.token))).toBe('LEASE_EXPIRED');
    const fence = { key: 'wp:post:9', principal: A };
    expect(await codeOf(leases.validateFence({ ...fence, token: first.token, epoch: 1 }))).toBe('STALE_FENCING_EPOCH');
    expect(await codeOf(leases.validateFence({ ...fence, token: first.token, epoch: 2 }))).toBe('LEASE_EXPIRED');
    expect(await codeOf(leases.validateFence({ ...fence, token: first.token, epoch: 2, lease_id: second.lease_id }))).toBe('LEASE_TOKEN_MISMATCH');
    expect(await codeOf(leases.renew(second.lease_id, first.token))).toBe('LEASE_TOKEN_MISMATCH');
    expect(await leases.validateFence({ ...fence, token: second.token, epoch: 2 })).toMatchObject({ lease_id: second.lease_id, epoch: 2 });
  });

  it('distinguishes an unknown lease, a wrong token and an expired lease', async () => {
    const { leases, clock } = leaseHarness();
    const g = await leases.acquire({ resources: ['wp:post:1'], holder: A, priority: 0, ttlMs: 1_000 });
    expect(await codeOf(leases.renew('lease_nope', g.token))).toBe('LEASE_NOT_FOUND');
    expect(await codeOf(leases.release('lease_nope', g.token))).toBe('LEASE_NOT_FOUND');
    expect(await codeOf(leases.renew(g.lease_id, 'not-the-token'))).toBe('LEASE_TOKEN_MISMATCH');
    clock.advance(1_000);
    expect(await codeOf(leases.renew(g.lease_id, g.token))).toBe('LEASE_EXPIRED');
    expect(await codeOf(leases.release(g.lease_id, g.token))).toBe('LEASE_EXPIRED');
  });

  it('counts leaseTransitions when the holder changes, not when the same holder takes the key again', async () => {
    const { leases } = leaseHarness();
    const take = async (holder: string) => {
      const g = await leases.acquire({ resources: ['job:daily'], holder, priority: 0, ttlMs: 1_000 });
      await leases.release(g.lease_id, g.token);
    };
    await take(A);
    await take(A);
    await take(B);
    await take(A);
    expect(await leases.describe('job:daily')).toMatchObject({ epoch: 4, leaseTransitions: 2 });
  });

  it('lists keys by holder, in key order', async () => {
    const { leases } = leaseHarness();
    await leases.acquire({ resources: ['wp:post:2', 'wp:post:1'], holder: A, priority: 0, ttlMs: 1_000 });
    await leases.acquire({ resources: ['wp:post:3'], holder: B, priority: 0, ttlMs: 1_000 });
    expect((await leases.list({ holder: A })).map((r) => r.key)).toEqual(['wp:post:1', 'wp:post:2']);
    expect((await leases.list()).map((r) => r.holderIdentity)).toEqual([A, A, B]);
    expect((await leases.list({ key: 'wp:post:3' })).map((r) => r.holderIdentity)).toEqual([B]);
  });
});
