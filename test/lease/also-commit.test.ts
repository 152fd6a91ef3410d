import { afterAll, describe, expect, it } from 'vitest';
import { leaseHarness, snapshot } from './fixtures/in-process.js';
import { removeTempDirs } from './fixtures/processes.js';

afterAll(removeTempDirs);

/**
 * `alsoCommit`: writes of the caller that commit in the granting transaction or not at all (the
 * service records the lease's authority and spends the caller's assertion there).
 */
describe('writes committed with an acquisition', () => {
  it('run once, in the granting transaction, with the new lease id; nothing is granted if they throw', async () => {
    const { leases, db } = leaseHarness();
    db.exec('CREATE TABLE side (lease_id TEXT)');
    const side = db.prepare('INSERT INTO side VALUES (?)');
    const grant = await leases.acquire({ resources: ['wp:post:1#title'], holder: 'a', priority: 0, ttlMs: 10_000, alsoCommit: async (_tx, id) => void side.run(id) });
    expect(db.prepare('SELECT lease_id FROM side').pluck().all()).toEqual([grant.lease_id]);

    const before = { leases: snapshot(db), side: db.prepare('SELECT * FROM side').all() };
    await expect(
      leases.acquire({
        resources: ['wp:post:2#title', 'wp:post:3#title'], holder: 'a', priority: 0, ttlMs: 10_000,
        alsoCommit: async (_tx, id) => {
          side.run(id);
          throw new Error('the authority record could not be written');
        },
      }),
    ).rejects.toThrow(/authority record/);
    // No key taken, no epoch moved, no history, and the caller's own write rolled back too.
    expect({ leases: snapshot(db), side: db.prepare('SELECT * FROM side').all() }).toEqual(before);
  });

  it('is not called for a refused acquisition', async () => {
    const { leases } = leaseHarness();
    await leases.acquire({ resources: ['wp:post:1#title'], holder: 'a', priority: 0, ttlMs: 10_000 });
    let called = 0;
    await expect(leases.acquire({ resources: ['wp:post:1#title'], holder: 'b', priority: 0, ttlMs: 10_000, alsoCommit: async () => void called++ })).rejects.toMatchObject({ code: 'RESOURCE_BUSY' });
    expect(called).toBe(0);
  });

  it('rolls back alone inside a group commit: the other acquisitions of the batch are granted', async () => {
    const { db, leases } = leaseHarness();
    const results = await Promise.allSettled([
      leases.acquire({ resources: ['k:1'], holder: 'a', priority: 0, ttlMs: 10_000 }),
      leases.acquire({ resources: ['k:2'], holder: 'a', priority: 0, ttlMs: 10_000, alsoCommit: async () => { throw new Error('no'); } }),
      leases.acquire({ resources: ['k:3'], holder: 'a', priority: 0, ttlMs: 10_000 }),
    ]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect(db.prepare('SELECT key FROM lease_keys WHERE holder IS NOT NULL ORDER BY key').pluck().all()).toEqual(['k:1', 'k:3']);
  });

  it('renew and release take them too: a throwing one leaves the lease as it was', async () => {
    const { leases, db } = leaseHarness();
    const g = await leases.acquire({ resources: ['k:1', 'k:2'], holder: 'a', priority: 0, ttlMs: 10_000 });
    const before = snapshot(db);
    const boom = async () => {
      throw new Error('boom');
    };
    await expect(leases.renew(g.lease_id, g.token, 20_000, { alsoCommit: boom })).rejects.toThrow('boom');
    await expect(leases.release(g.lease_id, g.token, { alsoCommit: boom })).rejects.toThrow('boom');
    expect(snapshot(db)).toEqual(before);
    let released = 0;
    await leases.release(g.lease_id, g.token, { alsoCommit: async () => void released++ });
    expect(released).toBe(1);
    expect((await leases.describe('k:1'))?.state).not.toBe('HELD');
  });
});
