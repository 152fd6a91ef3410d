import { describe, expect, it } from 'vitest';
import { newLeaseToken } from '../../src/wire/lease-token.js';
import { codeOf, leaseHarness, snapshot } from './fixtures/in-process.js';

const A = 'seo-agent-7';
const B = 'content-agent-2';
const K = 'wp:post:1024';
const token = () => newLeaseToken();

describe("an acquisition asked again with the caller's own token", () => {
  it('is answered with the lease it was granted (replayed), taking nothing: same id, epochs and expiry, one ACQUIRE in the history', async () => {
    const { leases, clock, db } = leaseHarness();
    const t = token();
    const first = await leases.acquire({ resources: [K, 'wp:post:7'], holder: A, priority: 0, ttlMs: 30_000, token: t });
    expect(first).toMatchObject({ token: t, replayed: false, epochs: { [K]: 1, 'wp:post:7': 1 } });
    const before = snapshot(db);
    clock.advance(1_000);
    // The keys in another order are the same acquisition; the ttl of the retry changes nothing.
    const again = await leases.acquire({ resources: ['wp:post:7', K], holder: A, priority: 0, ttlMs: 5_000, token: t });
    expect(again).toEqual({ lease_id: first.lease_id, token: t, epochs: first.epochs, expires_at: first.expires_at, preempted: [], replayed: true });
    expect(snapshot(db)).toEqual(before);
    expect((await leases.history({ leaseId: first.lease_id })).map((e) => e.event)).toEqual(['ACQUIRE', 'ACQUIRE']);
  });

  it('is answered at once even with a wait: it does not queue behind its own lease', async () => {
    const { leases } = leaseHarness();
    const t = token();
    const first = await leases.acquire({ resources: [K], holder: A, priority: 0, ttlMs: 30_000, token: t });
    const again = await leases.acquire({ resources: [K], holder: A, priority: 0, ttlMs: 30_000, waitMs: 60_000, token: t });
    expect(again).toMatchObject({ lease_id: first.lease_id, replayed: true });
    expect(await leases.waiters(K)).toEqual([]);
  });

  it('says why not, and changes nothing, when the lease ended, was preempted, or the token was used for other keys or by another principal', async () => {
    const { leases, clock, db } = leaseHarness();
    const released = token();
    const r = await leases.acquire({ resources: ['k:released'], holder: A, priority: 0, ttlMs: 30_000, token: released });
    await leases.release(r.lease_id, released);
    const lapsed = token();
    await leases.acquire({ resources: ['k:lapsed'], holder: A, priority: 0, ttlMs: 1_000, token: lapsed });
    const preempted = token();
    await leases.acquire({ resources: ['k:preempted'], holder: A, priority: 0, ttlMs: 30_000, token: preempted });
    await leases.acquire({ resources: ['k:preempted'], holder: B, priority: 0, ttlMs: 30_000, preempt: true });
    const live = token();
    await leases.acquire({ resources: [K], holder: A, priority: 0, ttlMs: 30_000, token: live });
    clock.advance(2_000);
    const before = snapshot(db);
    const ask = (resources: string[], holder: string, t: string) => leases.acquire({ resources, holder, priority: 0, ttlMs: 30_000, token: t });
    const message = (p: Promise<unknown>) => p.then(() => '', (e: Error) => e.message);

    expect(await codeOf(ask(['k:released'], A, released))).toBe('LEASE_EXPIRED');
    expect(await message(ask(['k:released'], A, released))).toContain('released');
    expect(await codeOf(ask(['k:lapsed'], A, lapsed))).toBe('LEASE_EXPIRED');
    expect(await codeOf(ask(['k:preempted'], A, preempted))).toBe('LEASE_PREEMPTED');
    expect(await codeOf(ask(['wp:post:9'], A, live))).toBe('IDEMPOTENCY_MISMATCH');
    expect(await message(ask(['wp:post:9'], A, live))).toContain(K);
    // Another principal presenting this token learns nothing of the lease (neither its keys nor its holder).
    expect(await codeOf(ask([K], B, live))).toBe('IDEMPOTENCY_MISMATCH');
    expect(await message(ask([K], B, live))).not.toMatch(new RegExp(`${A}|${K}`));
    expect(snapshot(db)).toEqual(before);
    // Free keys stay free: the released key was not taken again under the used token.
    expect((await leases.describe('k:released'))?.state).toBe('FREE');
  });

  it('a replay of an acquisition that preempted answers preempted: [] (it took nothing over); the holder preempted stays fenced out', async () => {
    const { leases, db } = leaseHarness();
    const old = await leases.acquire({ resources: [K], holder: B, priority: 0, ttlMs: 30_000 });
    const t = token();
    const first = await leases.acquire({ resources: [K], holder: A, priority: 0, ttlMs: 30_000, preempt: true, token: t });
    expect(first.preempted).toEqual([{ lease_id: old.lease_id, holder: B, key: K, epoch: 1 }]);
    const before = snapshot(db);
    const again = await leases.acquire({ resources: [K], holder: A, priority: 0, ttlMs: 30_000, preempt: true, token: t });
    expect(again).toMatchObject({ lease_id: first.lease_id, epochs: { [K]: 2 }, preempted: [], replayed: true });
    expect(snapshot(db)).toEqual(before);
    expect(await codeOf(leases.renew(old.lease_id, old.token))).toBe('LEASE_PREEMPTED');
  });

  it('refuses a token that does not have a token\'s shape (43 base64url characters), taking nothing', async () => {
    const { leases, db } = leaseHarness();
    const before = snapshot(db);
    for (const bad of ['', 'short', `${token()}x`, `${token().slice(0, 42)}=`]) {
      expect(await codeOf(leases.acquire({ resources: [K], holder: A, priority: 0, ttlMs: 30_000, token: bad }))).toBe('UNPROCESSABLE');
    }
    expect(snapshot(db)).toEqual(before);
  });
});
