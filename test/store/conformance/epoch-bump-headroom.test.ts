import { expect, it } from 'vitest';
import { MAX_BUMPED_EPOCH, type EpochBumpCommand } from '../../../src/lease/repository.js';
import type { WritStore } from '../../../src/store/contract.js';
import { WritError } from '../../../src/errors.js';
import { describeEngines } from './engines.js';
import { epochsOf, renew, take } from './helpers.js';

const bump = (store: WritStore, margin: number) =>
  store.readWrite((tx) => tx.leases.bumpEpochs({ kind: 'BUMP', margin, actor: 'operator:test', reason: 'again', detail: {}, now: Date.now() } satisfies EpochBumpCommand));

const codeOf = (p: Promise<unknown>) => p.then(() => 'RESOLVED', (e: unknown) => (e instanceof WritError ? e.code : String(e)));

describeEngines('epoch bumps never carry an epoch where JavaScript cannot count it exactly', (fresh) => {
  it('a bump that would leave an epoch or the floor past 2^52 is UNPROCESSABLE and changes nothing; one that fits is made, and epochs after it stay exact', async () => {
    const { store } = await fresh();
    // Where some 4 500 bumps of the largest margin (MAX_EPOCH_MARGIN, 10^12) would leave a store.
    const near = MAX_BUMPED_EPOCH - 10;
    await bump(store, near);
    const held = await take(store, ['k:1'], 'agent-a', { ttlMs: 60_000 });
    expect(epochsOf(held)).toEqual({ 'k:1': near + 1 });
    const before = await store.read((tx) => Promise.all([tx.leases.epochBumps(), tx.leases.listKeys({}).then((p) => p.keys)]));
    // One more than fits (the key is at near + 1; near + 1 + 10 > 2^52), and the floor's own bound (near + 11 > 2^52).
    expect(await codeOf(bump(store, 10))).toBe('UNPROCESSABLE');
    expect(await store.read((tx) => Promise.all([tx.leases.epochBumps(), tx.leases.listKeys({}).then((p) => p.keys)]))).toEqual(before);
    // Nothing changed: the holder still holds.
    expect(await renew(store, held)).toMatchObject({ ok: true, epochs: { 'k:1': near + 1 } });
    // What fits is made: the key ends at 2^52 exactly, the floor at 2^52 - 1.
    expect(await bump(store, 9)).toMatchObject({ max_epoch: MAX_BUMPED_EPOCH, floor: MAX_BUMPED_EPOCH - 1 });
    expect(await codeOf(bump(store, 1))).toBe('UNPROCESSABLE');
    const next = epochsOf(await take(store, ['k:1', 'k:fresh'], 'agent-b'));
    expect(next).toEqual({ 'k:1': MAX_BUMPED_EPOCH + 1, 'k:fresh': MAX_BUMPED_EPOCH });
    expect(Number.isSafeInteger(next['k:1'])).toBe(true);
  });
});
