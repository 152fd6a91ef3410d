import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { leaseHarness, observer } from './fixtures/in-process.js';
import { useLeaseWorkers } from './fixtures/lease-workers.js';

const KEY = 'worker:seo-publisher:production';
const startWorkers = useLeaseWorkers();

describe('a holder process that stops', () => {
  it('paused (SIGSTOP) past its ttl: the next process gets epoch + 1, and the resumed one is fenced out', { timeout: 60_000 }, async () => {
    const { workers: [a, b] } = await startWorkers(['A', 'B']);
    const old = await a.value('acquire', { resources: [KEY], holder: 'publisher-a', priority: 0, ttlMs: 1_000 });
    a.child.kill('SIGSTOP');
    const next = await b.value('acquire', { resources: [KEY], holder: 'publisher-b', priority: 0, ttlMs: 30_000, waitMs: 10_000 });
    expect(next.epochs[KEY]).toBe(old.epochs[KEY] + 1);
    a.child.kill('SIGCONT');
    expect(await a.call('validateFence', { key: KEY, token: old.token, epoch: old.epochs[KEY], principal: 'publisher-a' })).toMatchObject({
      code: 'STALE_FENCING_EPOCH',
    });
    expect(await a.call('renew', { lease_id: old.lease_id, token: old.token })).toMatchObject({ code: 'LEASE_EXPIRED' });
    expect(await a.call('release', { lease_id: old.lease_id, token: old.token })).toMatchObject({ code: 'LEASE_EXPIRED' });
    expect(await b.value('validateFence', { key: KEY, token: next.token, epoch: next.epochs[KEY], principal: 'publisher-b' })).toMatchObject({
      epoch: 2,
    });
  });

  it('killed (SIGKILL) while holding: the epoch it took is durable, and the next acquirer continues above it', { timeout: 60_000 }, async () => {
    const { db, workers: [a] } = await startWorkers(['A']);
    for (let i = 0; i < 2; i++) {
      const g = await a.value('acquire', { resources: [KEY], holder: 'publisher-a', priority: 0, ttlMs: 1_000 });
      await a.value('release', { lease_id: g.lease_id, token: g.token });
    }
    const held = await a.value('acquire', { resources: [KEY], holder: 'publisher-a', priority: 0, ttlMs: 1_000 });
    expect(held.epochs[KEY]).toBe(3);
    await a.kill('SIGKILL');

    const clock = new ManualClock(held.expires_at + 1);
    const { leases, db: handle } = leaseHarness({}, db, clock);
    try {
      expect(await leases.currentEpoch(KEY)).toBe(3);
      expect(await leases.describe(KEY)).toMatchObject({ holderIdentity: 'publisher-a', state: 'EXPIRED' });
      const next = await leases.acquire({ resources: [KEY], holder: 'publisher-b', priority: 0, ttlMs: 1_000 });
      expect(next.epochs[KEY]).toBe(4);
      expect((await leases.history({ key: KEY })).slice(-2).map((e) => [e.event, e.epoch])).toEqual([
        ['EXPIRE', 3],
        ['ACQUIRE', 4],
      ]);
    } finally {
      handle.close();
    }
  });
});

describe('the wait queue across processes', () => {
  it('hands a released key to the higher-priority waiting process, then to the older lower-priority one', { timeout: 60_000 }, async () => {
    const { db, workers: [holder, low, high] } = await startWorkers(['holder', 'low', 'high']);
    const { leases: watcher, db: handle } = observer(db);
    const queued = async (n: number) => {
      while ((await watcher.waiters(KEY)).length < n) await new Promise((r) => setTimeout(r, 5));
    };
    try {
      const held = await holder.value('acquire', { resources: [KEY], holder: 'holder', priority: 0, ttlMs: 30_000 });
      let lowDone = false;
      const lowReply = low.call('acquire', { resources: [KEY], holder: 'low', priority: 1, ttlMs: 30_000, waitMs: 20_000 }).then((r) => {
        lowDone = true;
        return r;
      });
      await queued(1);
      const highReply = high.call('acquire', { resources: [KEY], holder: 'high', priority: 5, ttlMs: 30_000, waitMs: 20_000 });
      await queued(2);
      expect((await watcher.waiters(KEY)).map((w) => w.holder)).toEqual(['high', 'low']);

      await holder.value('release', { lease_id: held.lease_id, token: held.token });
      const h = await highReply;
      expect(h).toMatchObject({ ok: true, value: { epochs: { [KEY]: 2 } } });
      expect(lowDone).toBe(false);
      await high.value('release', { lease_id: h.ok && h.value.lease_id, token: h.ok && h.value.token });
      expect(await lowReply).toMatchObject({ ok: true, value: { epochs: { [KEY]: 3 } } });
    } finally {
      handle.close();
    }
  });
});
