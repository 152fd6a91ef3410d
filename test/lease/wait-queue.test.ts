import { afterAll, describe, expect, it } from 'vitest';
import type { LeaseGrant } from '../../src/lease/index.js';
import { hashLeaseToken } from '../../src/lease/token.js';
import { codeOf, leaseHarness, snapshot } from './fixtures/in-process.js';
import { removeTempDirs } from './fixtures/processes.js';

afterAll(removeTempDirs);

const KEY = 'wp:post:1024';

/**
 * Waiters sleep until the test says `tick`, so the order of attempts is the test's, not the timer's.
 * Each test wakes them in the order that would let the wrong waiter win if the store's queue order were ignored.
 */
function gate() {
  let sleeping: (() => void)[] = [];
  const flush = async () => {
    for (let i = 0; i < 10; i++) await new Promise((r) => setImmediate(r));
  };
  return {
    sleep: () => new Promise<void>((r) => sleeping.push(r)),
    flush,
    async tick(order: 'oldest-first' | 'newest-first' = 'newest-first') {
      const wake = order === 'oldest-first' ? sleeping : sleeping.reverse();
      sleeping = [];
      wake.forEach((r) => r());
      await flush();
    },
  };
}

/** A promise whose outcome can be looked at without awaiting it. */
function watch(p: Promise<LeaseGrant>) {
  const w: { grant?: LeaseGrant; error?: any; done: boolean } = { done: false };
  p.then((g) => Object.assign(w, { grant: g, done: true }), (e) => Object.assign(w, { error: e, done: true }));
  return w;
}

function setup() {
  const g = gate();
  const h = leaseHarness({ sleep: g.sleep });
  const take = (holder: string, priority: number, waitMs = 0) => h.leases.acquire({ resources: [KEY], holder, priority, ttlMs: 10_000, waitMs });
  return { ...h, ...g, take };
}

describe('the wait queue', () => {
  it('serves a higher-priority waiter first even if it came later, then the older lower-priority one', async () => {
    const q = setup();
    const holder = await q.take('holder', 0);
    const low = watch(q.take('low', 1, 5_000));
    await q.flush();
    const high = watch(q.take('high', 5, 5_000));
    await q.flush();
    expect((await q.leases.waiters(KEY)).map((w) => w.holder)).toEqual(['high', 'low']);

    await q.leases.release(holder.lease_id, holder.token);
    await q.tick('oldest-first');
    expect(high.grant?.epochs[KEY]).toBe(2);
    expect(low.done).toBe(false);
    await q.tick();
    expect(low.done).toBe(false);

    await q.leases.release(high.grant!.lease_id, high.grant!.token);
    await q.tick();
    expect(low.grant?.epochs[KEY]).toBe(3);
    expect(await q.leases.waiters(KEY)).toEqual([]);
    expect(snapshot(q.db).lease_waiters).toEqual([]);
  });

  it('a release in this process wakes its queued waiter at once, without waiting for the next poll', async () => {
    const q = setup();
    const holder = await q.take('holder', 0);
    const waiter = watch(q.take('waiter', 1, 5_000));
    await q.flush();
    expect(waiter.done).toBe(false);
    await q.leases.release(holder.lease_id, holder.token);
    await q.flush(); // no tick: the poll timer never fires in this test
    expect(waiter.grant?.epochs[KEY]).toBe(2);
  });

  it('serves waiters of equal priority by age', async () => {
    const q = setup();
    const holder = await q.take('holder', 0);
    const first = watch(q.take('first', 3, 5_000));
    await q.flush();
    const second = watch(q.take('second', 3, 5_000));
    await q.flush();
    await q.leases.release(holder.lease_id, holder.token);
    await q.tick();
    expect(first.grant).toBeDefined();
    expect(second.done).toBe(false);
    await q.leases.release(first.grant!.lease_id, first.grant!.token);
    await q.tick();
    expect(second.grant).toBeDefined();
  });

  it('a newcomer of equal or lower priority cannot take a free key that a waiter is queued for; a higher one can', async () => {
    const q = setup();
    const holder = await q.take('holder', 0);
    const waiter = watch(q.take('waiter', 3, 5_000));
    await q.flush();
    // Released by another process sharing the store (a release in this one wakes its waiters at once):
    // the key is free now, but the waiter has not polled yet.
    await q.store.readWrite((tx) => tx.leases.release({ leaseId: holder.lease_id, tokenHash: hashLeaseToken(holder.token), now: q.clock.now() }));
    const equal = await q.take('newcomer', 3).catch((e) => e);
    expect(equal.code).toBe('RESOURCE_BUSY');
    expect(equal.details).toMatchObject({ key: KEY, holder: null, queued: true });
    expect(await codeOf(q.take('newcomer', 2))).toBe('RESOURCE_BUSY');
    const urgent = await q.take('urgent', 4);
    expect(urgent.epochs[KEY]).toBe(2);
    await q.tick();
    expect(waiter.done).toBe(false);
    await q.leases.release(urgent.lease_id, urgent.token);
    await q.tick();
    expect(waiter.grant?.epochs[KEY]).toBe(3);
  });

  it('times out at the deadline with LEASE_WAIT_TIMEOUT and the holder, leaving the queue empty', async () => {
    const q = setup();
    const holder = await q.take('holder', 0);
    const waiter = watch(q.take('waiter', 3, 1_000));
    await q.flush();
    q.clock.advance(999);
    await q.tick();
    expect(waiter.done).toBe(false);
    q.clock.advance(1);
    await q.tick();
    expect(waiter.error?.code).toBe('LEASE_WAIT_TIMEOUT');
    expect(waiter.error?.details).toMatchObject({ key: KEY, holder: 'holder', expires_at: holder.expires_at, waited_ms: 1_000 });
    expect(snapshot(q.db).lease_waiters).toEqual([]);
    expect(snapshot(q.db).lease_waiter_keys).toEqual([]);
  });

  it('a waiter that vanished without leaving the queue blocks newcomers only until its deadline', async () => {
    const q = setup();
    await q.store.readWrite((tx) => tx.leases.enqueue({ keys: [KEY], holder: 'crashed', instance: null, priority: 9, enqueuedAt: q.clock.now(), deadline: q.clock.now() + 2_000 }));
    expect(await codeOf(q.take('newcomer', 1))).toBe('RESOURCE_BUSY');
    q.clock.advance(2_000);
    expect((await q.take('newcomer', 1)).epochs[KEY]).toBe(1);
  });

  it('a multi-key waiter holds its place on every key it waits for', async () => {
    const q = setup();
    const a = await q.leases.acquire({ resources: ['wp:post:1'], holder: 'a', priority: 0, ttlMs: 10_000 });
    const both = watch(q.leases.acquire({ resources: ['wp:post:1', 'wp:post:2'], holder: 'both', priority: 5, ttlMs: 10_000, waitMs: 5_000 }));
    await q.flush();
    // wp:post:2 is free, but the queued waiter for it has a higher priority.
    expect(await codeOf(q.leases.acquire({ resources: ['wp:post:2'], holder: 'c', priority: 1, ttlMs: 10_000 }))).toBe('RESOURCE_BUSY');
    await q.leases.release(a.lease_id, a.token);
    await q.tick();
    expect(both.grant?.epochs).toEqual({ 'wp:post:1': 2, 'wp:post:2': 1 });
  });
});
