import { expect, it } from 'vitest';
import { describeEngines, sleep } from './engines.js';

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
});
