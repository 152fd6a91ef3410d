import { afterAll, describe, expect, it } from 'vitest';
import { codeOf, leaseHarness } from './fixtures/in-process.js';
import { removeTempDirs } from './fixtures/processes.js';

afterAll(removeTempDirs);

const A = 'release-controller';
const B = 'publisher';
const KEY = 'worker:seo-publisher:production';

describe('fencing epochs', () => {
  it('a holder that stops renewing loses the key after its ttl; the next holder gets epoch + 1 and the old one is fenced out', async () => {
    const { leases, clock } = leaseHarness();
    const old = await leases.acquire({ resources: [KEY], holder: A, priority: 0, ttlMs: 5_000 });
    clock.advance(4_999);
    expect(await codeOf(leases.acquire({ resources: [KEY], holder: B, priority: 0, ttlMs: 5_000 }))).toBe('RESOURCE_BUSY');
    expect(await leases.validateFence({ key: KEY, token: old.token, epoch: 1, principal: A })).toMatchObject({ epoch: 1 });
    clock.advance(1);
    expect(await leases.describe(KEY)).toMatchObject({ state: 'EXPIRED', holderIdentity: A });
    // Expired but not yet taken: the old epoch is still the high-water mark, so the fence says why.
    expect(await codeOf(leases.validateFence({ key: KEY, token: old.token, epoch: 1, principal: A }))).toBe('LEASE_EXPIRED');
    const next = await leases.acquire({ resources: [KEY], holder: B, priority: 0, ttlMs: 5_000 });
    expect(next.epochs[KEY]).toBe(2);
    expect(await codeOf(leases.validateFence({ key: KEY, token: old.token, epoch: 1, principal: A }))).toBe('STALE_FENCING_EPOCH');
    expect(await codeOf(leases.validateFence({ key: KEY, token: old.token, epoch: 2, principal: A }))).toBe('LEASE_EXPIRED');
    expect(await codeOf(leases.renew(old.lease_id, old.token))).toBe('LEASE_EXPIRED');
    expect(await codeOf(leases.release(old.lease_id, old.token))).toBe('LEASE_EXPIRED');
    expect((await leases.history({ key: KEY })).map((e) => [e.event, e.epoch, e.holder])).toEqual([
      ['ACQUIRE', 1, A],
      ['EXPIRE', 1, A],
      ['ACQUIRE', 2, B],
    ]);
  });

  it('an epoch above the high-water mark is refused as well as one below it', async () => {
    const { leases } = leaseHarness();
    const g = await leases.acquire({ resources: [KEY], holder: A, priority: 0, ttlMs: 5_000 });
    expect(await codeOf(leases.validateFence({ key: KEY, token: g.token, epoch: 2, principal: A }))).toBe('STALE_FENCING_EPOCH');
    expect(await codeOf(leases.validateFence({ key: KEY, token: g.token, epoch: 0, principal: A }))).toBe('STALE_FENCING_EPOCH');
  });

  it('the fence wants a token, this principal, and the lease id when one is given', async () => {
    const { leases } = leaseHarness();
    const g = await leases.acquire({ resources: [KEY], holder: A, priority: 0, ttlMs: 5_000 });
    expect(await codeOf(leases.validateFence({ key: KEY, token: undefined, epoch: 1, principal: A }))).toBe('LEASE_REQUIRED');
    expect(await codeOf(leases.validateFence({ key: 'wp:post:77', token: g.token, epoch: 0, principal: A }))).toBe('LEASE_REQUIRED');
    expect(await codeOf(leases.validateFence({ key: KEY, token: g.token, epoch: 1, principal: B }))).toBe('LEASE_TOKEN_MISMATCH');
    expect(await codeOf(leases.validateFence({ key: KEY, token: g.token, epoch: 1, principal: A, lease_id: 'lease_other' }))).toBe('LEASE_TOKEN_MISMATCH');
    expect(await codeOf(leases.validateFence({ key: KEY, token: 'guessed', epoch: 1, principal: A }))).toBe('LEASE_TOKEN_MISMATCH');
    expect(await leases.validateFence({ key: KEY, token: g.token, epoch: 1, principal: A, lease_id: g.lease_id })).toEqual({
      key: KEY,
      lease_id: g.lease_id,
      epoch: 1,
      expires_at: g.expires_at,
    });
  });

  it('epochs continue after the database is closed and reopened, also for a key that was free at the restart', async () => {
    let h = leaseHarness();
    for (let i = 0; i < 3; i++) {
      const g = await h.leases.acquire({ resources: [KEY, 'wp:post:5'], holder: A, priority: 0, ttlMs: 5_000 });
      await h.leases.release(g.lease_id, g.token);
    }
    const held = await h.leases.acquire({ resources: [KEY], holder: A, priority: 0, ttlMs: 5_000 });
    expect(held.epochs[KEY]).toBe(4);
    h = h.reopen();
    expect(await h.leases.currentEpoch(KEY)).toBe(4);
    expect(await h.leases.currentEpoch('wp:post:5')).toBe(3);
    // The lease survives the restart too: its holder can still use and release it.
    expect(await h.leases.validateFence({ key: KEY, token: held.token, epoch: 4, principal: A })).toMatchObject({ epoch: 4 });
    await h.leases.release(held.lease_id, held.token);
    const after = await h.leases.acquire({ resources: [KEY, 'wp:post:5'], holder: B, priority: 0, ttlMs: 5_000 });
    expect(after.epochs).toEqual({ [KEY]: 5, 'wp:post:5': 4 });
  });
});

describe('preemption', () => {
  it('takes a held key, moves the epoch on, and fences the old holder out of renew, release and writes', async () => {
    const { leases, clock } = leaseHarness();
    const old = await leases.acquire({ resources: [KEY], holder: A, priority: 10, ttlMs: 60_000 });
    clock.advance(1_000);
    const incident = await leases.acquire({ resources: [KEY], holder: 'incident-commander', priority: 100, ttlMs: 10_000, preempt: true });
    expect(incident.epochs[KEY]).toBe(2);
    expect(incident.preempted).toEqual([{ lease_id: old.lease_id, holder: A, key: KEY, epoch: 1 }]);
    expect(await codeOf(leases.renew(old.lease_id, old.token))).toBe('LEASE_PREEMPTED');
    expect(await codeOf(leases.release(old.lease_id, old.token))).toBe('LEASE_PREEMPTED');
    expect(await codeOf(leases.validateFence({ key: KEY, token: old.token, epoch: 1, principal: A }))).toBe('STALE_FENCING_EPOCH');
    expect(await codeOf(leases.validateFence({ key: KEY, token: old.token, epoch: 2, principal: A }))).toBe('LEASE_PREEMPTED');
    expect(await leases.describe(KEY)).toMatchObject({ holderIdentity: 'incident-commander', preemptedBy: 'incident-commander', leaseTransitions: 1, epoch: 2 });
    // A wrong token still says "not yours", not what happened to the lease.
    expect(await codeOf(leases.renew(old.lease_id, 'guess'))).toBe('LEASE_TOKEN_MISMATCH');
  });

  it('frees the other keys of a preempted multi-key lease, and records each in the history', async () => {
    const { leases } = leaseHarness();
    const old = await leases.acquire({ resources: ['wp:post:1', 'wp:post:2'], holder: A, priority: 10, ttlMs: 60_000 });
    const incident = await leases.acquire({ resources: ['wp:post:2'], holder: 'incident-commander', priority: 100, ttlMs: 10_000, preempt: true });
    expect(incident.preempted.map((p) => p.key).sort()).toEqual(['wp:post:1', 'wp:post:2']);
    expect(await leases.describe('wp:post:1')).toMatchObject({ state: 'FREE', epoch: 1 });
    expect(await codeOf(leases.validateFence({ key: 'wp:post:1', token: old.token, epoch: 1, principal: A }))).toBe('LEASE_PREEMPTED');
    const other = await leases.acquire({ resources: ['wp:post:1'], holder: B, priority: 0, ttlMs: 10_000 });
    expect(other.epochs['wp:post:1']).toBe(2);
    expect((await leases.history({ leaseId: old.lease_id })).map((e) => [e.event, e.key, e.actor])).toEqual([
      ['ACQUIRE', 'wp:post:1', null],
      ['ACQUIRE', 'wp:post:2', null],
      ['PREEMPT', 'wp:post:2', 'incident-commander'],
      ['PREEMPT', 'wp:post:1', 'incident-commander'],
    ]);
  });

  it('preempting a free key is an ordinary acquisition', async () => {
    const { leases } = leaseHarness();
    const g = await leases.acquire({ resources: [KEY], holder: 'incident-commander', priority: 100, ttlMs: 10_000, preempt: true });
    expect(g.preempted).toEqual([]);
    expect(await leases.describe(KEY)).toMatchObject({ preemptedBy: null, epoch: 1 });
  });
});
