import { afterAll, describe, expect, it } from 'vitest';
import { codeOf, leaseHarness, snapshot } from './fixtures/in-process.js';
import { removeTempDirs } from './fixtures/processes.js';

afterAll(removeTempDirs);

const A = 'seo-agent-7';
const B = 'content-agent-2';

describe('a refused lease request', () => {
  it('leaves every lease table exactly as it was', async () => {
    const { leases, clock, db } = leaseHarness();
    const held = await leases.acquire({ resources: ['wp:post:2'], holder: A, priority: 5, ttlMs: 10_000 });
    const stale = await leases.acquire({ resources: ['wp:post:3'], holder: A, priority: 5, ttlMs: 1_000 });
    const gone = await leases.acquire({ resources: ['wp:post:4'], holder: A, priority: 5, ttlMs: 10_000 });
    await leases.release(gone.lease_id, gone.token);
    clock.advance(1_000);
    const before = snapshot(db);

    // codeOf() handles each refusal as soon as it is made: they all run at once.
    const refusals: [string, Promise<string>][] = [
      // the first key (in canonical order) is free: taking it must be rolled back with the rest
      ['RESOURCE_BUSY', codeOf(leases.acquire({ resources: ['wp:post:1', 'wp:post:2'], holder: B, priority: 9, ttlMs: 5_000 }))],
      ['RESOURCE_BUSY', codeOf(leases.acquire({ resources: ['wp:post:2'], holder: A, priority: 5, ttlMs: 5_000 }))],
      ['UNPROCESSABLE', codeOf(leases.acquire({ resources: ['wp:post:9'], holder: B, priority: 0, ttlMs: 999_999 }))],
      ['UNPROCESSABLE', codeOf(leases.acquire({ resources: ['wp:post:9'], holder: '', priority: 0, ttlMs: 5_000 }))],
      ['LEASE_TOKEN_MISMATCH', codeOf(leases.renew(held.lease_id, stale.token))],
      ['LEASE_TOKEN_MISMATCH', codeOf(leases.release(held.lease_id, 'x'))],
      ['LEASE_NOT_FOUND', codeOf(leases.renew('lease_unknown', held.token))],
      ['LEASE_EXPIRED', codeOf(leases.renew(stale.lease_id, stale.token))],
      ['LEASE_EXPIRED', codeOf(leases.release(stale.lease_id, stale.token))],
      ['LEASE_EXPIRED', codeOf(leases.renew(gone.lease_id, gone.token))],
      ['LEASE_EXPIRED', codeOf(leases.release(gone.lease_id, gone.token))],
      ['UNPROCESSABLE', codeOf(leases.renew(held.lease_id, held.token, 10))],
      ['STALE_FENCING_EPOCH', codeOf(leases.validateFence({ key: 'wp:post:2', token: held.token, epoch: 7, principal: A }))],
      ['LEASE_TOKEN_MISMATCH', codeOf(leases.validateFence({ key: 'wp:post:2', token: stale.token, epoch: 1, principal: A }))],
    ];
    for (const [code, p] of refusals) expect(await p).toBe(code);

    const waited = leases.acquire({ resources: ['wp:post:2'], holder: B, priority: 0, ttlMs: 5_000, waitMs: 20 });
    clock.advance(20);
    expect(await codeOf(waited)).toBe('LEASE_WAIT_TIMEOUT');

    expect(snapshot(db)).toEqual(before);
  });
});
