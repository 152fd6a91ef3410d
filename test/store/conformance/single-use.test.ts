import { expect, it } from 'vitest';
import type { SpendRefusal } from '../../../src/decision/index.js';
import { describeEngines, sleep } from './engines.js';
import { acquireCommand, leaseView, take } from './helpers.js';

class Replayed extends Error {}
const replayed = () => new Replayed('replayed');

describeEngines('single-use ids', (fresh) => {
  it('spends an id once until it expires; isSpent reads without recording; namespaces are separate', async () => {
    const { store } = await fresh();
    const now = Date.now();
    expect(await store.read((tx) => tx.singleUse.isSpent('assertion', 'a', now))).toBe(false);
    expect(await store.readWrite((tx) => tx.singleUse.spend('assertion', 'a', now + 60_000, now))).toBe(true);
    expect(await store.read((tx) => tx.singleUse.isSpent('assertion', 'a', Date.now()))).toBe(true);
    expect(await store.readWrite((tx) => tx.singleUse.spend('assertion', 'a', now + 60_000, Date.now()))).toBe(false);
    expect(await store.read((tx) => tx.singleUse.isSpent('decision', 'a', Date.now()))).toBe(false);
    expect(await store.readWrite((tx) => tx.singleUse.spend('decision', 'a', now + 60_000, Date.now()))).toBe(true);
  });

  it('wouldRefuse says what a spend would: spent (live), expired by the caller\'s clock or the store\'s, or null; it records nothing', async () => {
    const { store } = await fresh();
    const now = Date.now();
    const why = (id: string, expiresAt: number, at: number) => store.read((tx) => tx.singleUse.wouldRefuse('console-session', id, expiresAt, at));
    expect(await why('s', now + 60_000, now)).toBeNull();
    expect(await why('s', now + 60_000, now)).toBeNull();
    expect(await store.readWrite((tx) => tx.singleUse.spend('console-session', 's', now + 60_000, now))).toBe(true);
    expect(await why('s', now + 60_000, now)).toEqual({ reason: 'spent' });
    expect(await why('other', now + 60_000, now)).toBeNull();
    expect(await why('other', now - 1, now)).toEqual({ reason: 'expired', storeNow: expect.any(Number) });
    // A caller whose clock is two minutes behind the store's: an id it finds live, expired by the store's
    // clock, is expired, with the store's time (PostgreSQL: the database's; SQLite: the latest clock the
    // writer's spends were given, here `now`, so asked in a write transaction; SQLite has one clock).
    const behind = await store.readWrite((tx) => tx.singleUse.wouldRefuse('console-session', 's', now - 1_000, now - 120_000));
    expect(behind).toMatchObject({ reason: 'expired' });
    expect((behind as { storeNow: number }).storeNow).toBeGreaterThanOrEqual(now);
  });

  it('keeps any id apart, NUL and backslashes included (Writ scopes a jti by principal with a NUL)', async () => {
    const { store } = await fresh();
    const now = Date.now();
    const ids = ['alice\u0000j1', 'alice\\0j1', 'alice\\\u0000j1', 'alice0j1', 'alice\u0000\u0000'];
    for (const id of ids) expect(await store.readWrite((tx) => tx.singleUse.spend('assertion', id, now + 60_000, now)), id).toBe(true);
    for (const id of ids) expect(await store.read((tx) => tx.singleUse.isSpent('assertion', id, now)), id).toBe(true);
    for (const id of ids) expect(await store.readWrite((tx) => tx.singleUse.spend('assertion', id, now + 60_000, now)), id).toBe(false);
    expect(await store.read((tx) => tx.singleUse.isSpent('assertion', 'alice\u0000j2', now))).toBe(false);
  });

  it('refuses an id already expired, so two late spends cannot both succeed', async () => {
    const { store } = await fresh();
    const now = Date.now();
    expect(await store.readWrite((tx) => tx.singleUse.spend('decision', 'd', now - 1, now))).toBe(false);
    expect(await store.readWrite((tx) => tx.singleUse.spend('decision', 'd', now - 1, now))).toBe(false);
    expect(await store.read((tx) => tx.singleUse.isSpent('decision', 'd', now))).toBe(false);
  });

  it('forgets an id once it has expired: it can be spent again', async () => {
    const { store } = await fresh();
    const now = Date.now();
    expect(await store.readWrite((tx) => tx.singleUse.spend('assertion', 'x', now + 150, now))).toBe(true);
    await sleep(250);
    expect(await store.read((tx) => tx.singleUse.isSpent('assertion', 'x', Date.now()))).toBe(false);
    const later = Date.now();
    expect(await store.readWrite((tx) => tx.singleUse.spend('assertion', 'x', later + 60_000, later))).toBe(true);
  });

  it('concurrent spends of the same ids from two connections: exactly one wins each', async () => {
    const { store, another } = await fresh();
    const other = await another();
    const ids = Array.from({ length: 40 }, (_, i) => `jti-${i}`);
    const spend = (s: typeof store, id: string) => s.readWrite((tx) => tx.singleUse.spend('assertion', id, Date.now() + 60_000, Date.now()));
    const results = await Promise.all(ids.map((id) => Promise.all([spend(store, id), spend(other, id), spend(store, id), spend(other, id)])));
    for (const r of results) expect(r.filter(Boolean)).toHaveLength(1);
  });

  it('a spend rolled back with its transaction is not spent', async () => {
    const { store } = await fresh();
    const now = Date.now();
    await expect(
      store.readWrite(async (tx) => {
        expect(await tx.singleUse.spend('decision', 'r', now + 60_000, now)).toBe(true);
        throw new Error('the write failed');
      }),
    ).rejects.toThrow('the write failed');
    expect(await store.readWrite((tx) => tx.singleUse.spend('decision', 'r', now + 60_000, Date.now()))).toBe(true);
  });

  it('spendOrRefuse: spends once; a spent or expired id fails the transaction with the given refusal, whenever the engine learns it', async () => {
    const { store } = await fresh();
    const now = Date.now();
    await store.readWrite((tx) => tx.singleUse.spendOrRefuse('assertion', 'once', now + 60_000, now, replayed));
    expect(await store.read((tx) => tx.singleUse.isSpent('assertion', 'once', Date.now()))).toBe(true);
    await expect(store.readWrite((tx) => tx.singleUse.spendOrRefuse('assertion', 'once', now + 60_000, Date.now(), replayed))).rejects.toBeInstanceOf(Replayed);
    await expect(store.readWrite((tx) => tx.singleUse.spendOrRefuse('decision', 'late', now - 1, now, replayed))).rejects.toBeInstanceOf(Replayed);
    expect(await store.read((tx) => tx.singleUse.isSpent('decision', 'late', now))).toBe(false);
    // Several in one transaction, an expired row replaced, other namespaces apart.
    await store.readWrite(async (tx) => {
      await tx.singleUse.spendOrRefuse('assertion', 'a1', now + 60_000, now, replayed);
      await tx.singleUse.spendOrRefuse('decision', 'once', now + 60_000, now, replayed);
    });
    expect(await store.readWrite((tx) => tx.singleUse.spend('decision', 'once', now + 60_000, Date.now()))).toBe(false);
  });

  it('spendOrRefuse says why: spent (a live id), or expired by the store\'s clock, with that clock (a caller whose clock is behind it)', async () => {
    const { store } = await fresh();
    const why = async (id: string, expiresAt: number, now: number): Promise<SpendRefusal> => {
      let said: SpendRefusal | undefined;
      await expect(store.readWrite((tx) => tx.singleUse.spendOrRefuse('assertion', id, expiresAt, now, (w) => {
        said = w;
        return replayed();
      }))).rejects.toBeInstanceOf(Replayed);
      return said!;
    };
    const now = Date.now();
    await store.readWrite((tx) => tx.singleUse.spendOrRefuse('assertion', 'live', now + 60_000, now, replayed));
    expect(await why('live', now + 60_000, Date.now())).toEqual({ reason: 'spent' });
    // Past by the caller's own clock: expired, by a store clock at least that.
    const old = await why('old', now - 1, now);
    expect(old.reason).toBe('expired');
    expect((old as { storeNow: number }).storeNow).toBeGreaterThanOrEqual(now);
    // Live by a clock two minutes behind, expired by the store's (PostgreSQL: the database's; SQLite: the
    // latest clock its spends were given, here `now`): never spent, and the refusal names the store's time.
    const behind = now - 120_000;
    const refusedAt = await why('behind', behind + 60_000, behind);
    expect(refusedAt.reason).toBe('expired');
    expect((refusedAt as { storeNow: number }).storeNow).toBeGreaterThanOrEqual(now - 1_000);
    expect(await store.read((tx) => tx.singleUse.isSpent('assertion', 'behind', behind))).toBe(false);
  });

  it('a replayed id in a transaction with other writes: nothing of it lands (the lease, its authority, the other spend)', async () => {
    const { store } = await fresh();
    const now = Date.now();
    await store.readWrite((tx) => tx.singleUse.spendOrRefuse('assertion', 'jti-spent', now + 60_000, now, replayed));
    const before = await leaseView(store, ['k:replay']);
    const cmd = acquireCommand(['k:replay'], 'agent');
    await expect(
      store.readWrite(async (tx) => {
        await tx.singleUse.spendOrRefuse('decision', 'dec-fresh', now + 60_000, now, replayed);
        const o = await tx.leases.acquire(cmd);
        expect(o.granted).toBe(true);
        await tx.leaseAuthority.record(cmd.leaseId, 'agent', [], now);
        await tx.singleUse.spendOrRefuse('assertion', 'jti-spent', now + 60_000, now, replayed);
        return o;
      }),
    ).rejects.toBeInstanceOf(Replayed);
    expect(await leaseView(store, ['k:replay'])).toEqual(before);
    expect(await store.read((tx) => tx.leaseAuthority.get(cmd.leaseId))).toBeUndefined();
    expect(await store.read((tx) => tx.singleUse.isSpent('decision', 'dec-fresh', Date.now()))).toBe(false);
    // The key is free: the next acquisition takes it at epoch 1.
    expect((await take(store, ['k:replay'], 'agent')).outcome).toMatchObject({ granted: true, epochs: { 'k:replay': 1 } });
  });

  it('a refused acquisition with spends and its authority record queued before it: nothing of them lands', async () => {
    const { store } = await fresh();
    const now = Date.now();
    const held = await take(store, ['k:busy'], 'holder');
    expect(held.outcome.granted).toBe(true);
    const cmd = acquireCommand(['k:busy'], 'agent');
    await expect(
      store.readWrite(async (tx) => {
        await tx.singleUse.spendOrRefuse('assertion', 'jti-queued', now + 60_000, now, replayed);
        await tx.leaseAuthority.record(cmd.leaseId, 'agent', [], now);
        const o = await tx.leases.acquire(cmd);
        if (!o.granted) throw new Error(`busy: ${o.key} held by ${o.holder}`);
        return o;
      }),
    ).rejects.toThrow('busy: k:busy held by holder');
    expect(await store.read((tx) => tx.singleUse.isSpent('assertion', 'jti-queued', Date.now()))).toBe(false);
    expect(await store.read((tx) => tx.leaseAuthority.get(cmd.leaseId))).toBeUndefined();
    expect((await store.read((tx) => tx.leases.listKeys({ key: 'k:busy' }).then((p) => p.keys)))[0]).toMatchObject({ holder: 'holder', epoch: 1 });
  });

  it('spendOrRefuse of the same id racing from two connections: exactly one transaction commits', async () => {
    const { store, another } = await fresh();
    const other = await another();
    const ids = Array.from({ length: 20 }, (_, i) => `race-${i}`);
    const spend = (s: typeof store, id: string) =>
      s.readWrite((tx) => tx.singleUse.spendOrRefuse('assertion', id, Date.now() + 60_000, Date.now(), replayed)).then(() => true, (e: unknown) => {
        if (!(e instanceof Replayed)) throw e;
        return false;
      });
    const results = await Promise.all(ids.map((id) => Promise.all([spend(store, id), spend(other, id), spend(store, id), spend(other, id)])));
    for (const r of results) expect(r.filter(Boolean)).toHaveLength(1);
  });
});
