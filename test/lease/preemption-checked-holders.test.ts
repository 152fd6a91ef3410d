import { describe, expect, it } from 'vitest';
import { leaseHarness, snapshot } from './fixtures/in-process.js';

const KEY = 'deploy:site:www';

describe('preemption takes over only the holders the caller was checked against', () => {
  it('a holder that changed between the check and the takeover is not preempted: RESOURCE_BUSY, nothing changes', async () => {
    const { leases, db } = leaseHarness();
    await leases.acquire({ resources: [KEY], holder: 'someone-else', priority: 20, ttlMs: 10_000 });
    const before = snapshot(db);
    // The service checked a preempts edge over release-controller, but someone-else holds the key now.
    await expect(leases.acquire({ resources: [KEY], holder: 'incident-commander', priority: 100, ttlMs: 10_000, preempt: true, preemptable: ['incident-commander', 'release-controller'] }))
      .rejects.toMatchObject({ code: 'RESOURCE_BUSY' });
    expect(snapshot(db)).toEqual(before);
  });

  it('the checked holder is preempted: the epoch moves on and the old lease is PREEMPTED', async () => {
    const { leases } = leaseHarness();
    const old = await leases.acquire({ resources: [KEY], holder: 'release-controller', priority: 80, ttlMs: 10_000 });
    const taken = await leases.acquire({ resources: [KEY], holder: 'incident-commander', priority: 100, ttlMs: 10_000, preempt: true, preemptable: ['incident-commander', 'release-controller'] });
    expect(taken.epochs[KEY]).toBe(old.epochs[KEY]! + 1);
    await expect(leases.renew(old.lease_id, old.token)).rejects.toMatchObject({ code: 'LEASE_PREEMPTED' });
  });

  it('a free key is taken whatever the list says', async () => {
    const { leases } = leaseHarness();
    const g = await leases.acquire({ resources: [KEY], holder: 'incident-commander', priority: 100, ttlMs: 10_000, preempt: true, preemptable: ['incident-commander'] });
    expect(g.epochs[KEY]).toBe(1);
  });
});

describe('preemption never jumps the wait queue for a key nobody live holds', () => {
  it('a free key reserved for a queued waiter is refused to a preempting newcomer', async () => {
    let sleeping: (() => void)[] = [];
    const { leases } = leaseHarness({ sleep: () => new Promise<void>((r) => sleeping.push(r)) });
    const flush = async () => {
      for (let i = 0; i < 10; i++) await new Promise((r) => setImmediate(r));
    };
    const held = await leases.acquire({ resources: [KEY], holder: 'release-controller', priority: 80, ttlMs: 10_000 });
    const waiting = leases.acquire({ resources: [KEY], holder: 'editor-alice', priority: 60, ttlMs: 10_000, waitMs: 5_000 });
    await flush();
    await leases.release(held.lease_id, held.token);
    // The key is free now but reserved for editor-alice (60), who is queued; a lower-priority "preempting"
    // newcomer may not take it (preemption takes over live holders, it does not skip the queue).
    await expect(leases.acquire({ resources: [KEY], holder: 'seo-agent-7', priority: 20, ttlMs: 10_000, preempt: true, preemptable: ['seo-agent-7'] }))
      .rejects.toMatchObject({ code: 'RESOURCE_BUSY' });
    sleeping.forEach((r) => r());
    sleeping = [];
    await flush();
    await expect(waiting).resolves.toMatchObject({ epochs: { [KEY]: 2 } });
  });
});
