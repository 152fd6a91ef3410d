import { expect, it } from 'vitest';
import type { WritStore } from '../../../src/store/contract.js';
import type { LeaseKeyQuery } from '../../../src/lease/repository.js';
import { describeEngines, sleep } from './engines.js';
import { release, take } from './helpers.js';

const keysOf = (store: WritStore, query: LeaseKeyQuery) => store.read((tx) => tx.leases.listKeys(query)).then((p) => p.keys.map((r) => r.key));

/** Every page of `query` (`limit` each), following the last key of each as `after`, until a short page. */
async function allPages(store: WritStore, query: LeaseKeyQuery, limit: number): Promise<string[][]> {
  const pages: string[][] = [];
  let after: string | undefined;
  for (;;) {
    const page = await keysOf(store, { ...query, limit, ...(after !== undefined ? { after } : {}) });
    pages.push(page);
    if (page.length < limit) return pages;
    after = page[page.length - 1];
  }
}

describeEngines('lease keys: pages, resources and the store\'s clock', (fresh) => {
  it('pages the keys in bytewise order after a key, as the unpaged list gives them', async () => {
    const { store } = await fresh();
    // Upper case sorts before lower case bytewise; 'é' (two bytes in UTF-8) after every ASCII key.
    await take(store, ['k:b', 'k:B', 'k:a', 'k:é', 'k:a#title', 'k:a0'], 'holder');
    await release(store, await take(store, ['k:c'], 'other'));
    const all = await keysOf(store, {});
    expect(all).toEqual(['k:B', 'k:a', 'k:a#title', 'k:a0', 'k:b', 'k:c', 'k:é']);
    expect(await allPages(store, {}, 3)).toEqual([all.slice(0, 3), all.slice(3, 6), all.slice(6)]);
    expect((await allPages(store, {}, 1)).flat()).toEqual(all);
    expect(await keysOf(store, { after: 'k:b', limit: 100 })).toEqual(['k:c', 'k:é']);
    // After a key that is not there: the keys after where it would be.
    expect(await keysOf(store, { after: 'k:a00', limit: 2 })).toEqual(['k:b', 'k:c']);
    expect(await keysOf(store, { after: 'k:é' })).toEqual([]);
    expect(await keysOf(store, { limit: 0 })).toEqual([]);
    // By holder, paged too (the recorded holder: the released key has none).
    expect(await allPages(store, { holder: 'holder' }, 4)).toEqual([['k:B', 'k:a', 'k:a#title', 'k:a0'], ['k:b', 'k:é']]);
    expect(await keysOf(store, { holder: 'other' })).toEqual([]);
  });

  it('a resource: its key and its fields\' keys (resource#field), not the keys that only start like it', async () => {
    const { store } = await fresh();
    await take(store, ['wp:post:1', 'wp:post:1#title', 'wp:post:1#body', 'wp:post:10', 'wp:post:1!x', 'wp:post:1$', 'wp:post:2#title'], 'holder');
    expect(await keysOf(store, { resource: 'wp:post:1' })).toEqual(['wp:post:1', 'wp:post:1#body', 'wp:post:1#title']);
    expect(await keysOf(store, { resource: 'wp:post:1', after: 'wp:post:1', limit: 1 })).toEqual(['wp:post:1#body']);
    expect(await keysOf(store, { resource: 'wp:post:1', holder: 'nobody' })).toEqual([]);
    expect(await keysOf(store, { resource: 'wp:post:2' })).toEqual(['wp:post:2#title']);
    expect(await keysOf(store, { resource: 'wp:post' })).toEqual([]);
    // One key, narrowed like the others.
    expect(await keysOf(store, { key: 'wp:post:1#title', resource: 'wp:post:1' })).toEqual(['wp:post:1#title']);
    expect(await keysOf(store, { key: 'wp:post:10', resource: 'wp:post:1' })).toEqual([]);
    expect(await keysOf(store, { key: 'wp:post:1#title', after: 'wp:post:1#title' })).toEqual([]);
    // After, for one key as for a range, is bytewise (UTF-8): U+FF5E is after U+1F600 in UTF-16, before it in UTF-8.
    await take(store, ['k:\u{1F600}', 'k:\uFF5E'], 'holder');
    expect(await keysOf(store, { after: 'k:\uFF5E', limit: 1 })).toEqual(['k:\u{1F600}']);
    expect(await keysOf(store, { key: 'k:\u{1F600}', after: 'k:\uFF5E' })).toEqual(['k:\u{1F600}']);
  });

  it('returns the store\'s clock with the rows where it keeps lease time itself, the one heldKeys judges by', async () => {
    const { store } = await fresh();
    expect(await store.read((tx) => tx.leases.listKeys({}))).toEqual({ keys: [] });
    await take(store, ['k:held'], 'holder', { ttlMs: 60_000 });
    await take(store, ['k:lapsed'], 'holder', { ttlMs: 100 });
    await sleep(200);
    const before = Date.now();
    const page = await store.read((tx) => tx.leases.listKeys({}));
    const held = await store.read((tx) => tx.leases.heldKeys(Date.now()));
    expect(page.keys.map((r) => r.key)).toEqual(['k:held', 'k:lapsed']);
    // PostgreSQL's clock (this machine's, here), else none: the caller's clock is lease time.
    if (page.now !== undefined) expect(Math.abs(page.now - before)).toBeLessThan(5_000);
    const at = page.now ?? before;
    expect(page.keys.filter((r) => r.holder !== null && r.expires_at! > at)).toEqual(held.keys);
  });
});
