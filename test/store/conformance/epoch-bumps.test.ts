import { expect, it } from 'vitest';
import type { EpochBumpCommand } from '../../../src/lease/repository.js';
import type { WritStore } from '../../../src/store/contract.js';
import { describeEngines } from './engines.js';
import { epochsOf, release, renew, take } from './helpers.js';

const bump = (store: WritStore, margin: number, over: Partial<EpochBumpCommand> = {}) =>
  store.readWrite((tx) => tx.leases.bumpEpochs({ kind: 'BUMP', margin, actor: 'operator:test', reason: 'recovered to an earlier point', detail: { note: 'x' }, now: Date.now(), ...over }));

describeEngines('epoch bumps: no epoch is issued twice after a store goes back in time', (fresh) => {
  it('raises every key by the margin, and keys never leased before start above the floor', async () => {
    const { store } = await fresh();
    const a = await take(store, ['k:1'], 'agent-a');
    await release(store, a);
    await release(store, await take(store, ['k:1'], 'agent-a'));
    await release(store, await take(store, ['k:2'], 'agent-a'));
    const b = await bump(store, 1000);
    expect(b).toMatchObject({ seq: 1, kind: 'BUMP', margin: 1000, floor: 1000, keys: 2, leases_ended: 0, max_epoch: 1002, actor: 'operator:test', detail: { note: 'x' } });
    expect(epochsOf(await take(store, ['k:1'], 'agent-b'))).toEqual({ 'k:1': 1003 });
    expect(epochsOf(await take(store, ['k:2'], 'agent-b'))).toEqual({ 'k:2': 1002 });
    // Never leased before the bump: above the floor, not 1.
    expect(epochsOf(await take(store, ['k:new', 'k:new2'], 'agent-b'))).toEqual({ 'k:new': 1001, 'k:new2': 1001 });
    // Floors add up: a second bump adds to every epoch and to the floor.
    const again = await bump(store, 50, { kind: 'RESTORE' });
    expect(again).toMatchObject({ seq: 2, kind: 'RESTORE', margin: 50, floor: 1050, keys: 4 });
    expect(epochsOf(await take(store, ['k:third'], 'agent-c'))).toEqual({ 'k:third': 1051 });
    expect((await store.read((tx) => tx.leases.epochBumps())).map((x) => [x.seq, x.kind, x.margin, x.floor])).toEqual([
      [1, 'BUMP', 1000, 1000],
      [2, 'RESTORE', 50, 1050],
    ]);
  });

  it('ends every live lease: its holder can neither renew nor release, and its keys are free at once', async () => {
    const { store } = await fresh();
    const held = await take(store, ['k:1', 'k:2'], 'agent-a', { ttlMs: 60_000 });
    const b = await bump(store, 10);
    expect(b).toMatchObject({ keys: 2, leases_ended: 1, max_epoch: 11 });
    expect(await renew(store, held)).toEqual({ ok: false, reason: 'EXPIRED' });
    expect(await release(store, held)).toEqual({ ok: false, reason: 'EXPIRED' });
    const rows = await store.read((tx) => tx.leases.listKeys({}).then((p) => p.keys));
    expect(rows.map((r) => [r.key, r.epoch, r.holder, r.token_hash])).toEqual([
      ['k:1', 11, null, null],
      ['k:2', 11, null, null],
    ]);
    const fence = await store.read((tx) => tx.leases.fenceState('k:1', held.tokenHash, held.leaseId));
    expect(fence.lease?.state).toBe('EXPIRED');
    expect(epochsOf(await take(store, ['k:1'], 'agent-b'))).toEqual({ 'k:1': 12 });
    const history = await store.read((tx) => tx.leases.history({ leaseId: held.leaseId }));
    expect(history.filter((e) => e.event === 'EXPIRE').map((e) => [e.key, e.epoch, e.actor])).toEqual([
      ['k:1', 1, 'operator:test'],
      ['k:2', 1, 'operator:test'],
    ]);
  });

  it('margin 0 records the event and changes nothing else (a backup trusted as the latest state)', async () => {
    const { store } = await fresh();
    const held = await take(store, ['k:1'], 'agent-a', { ttlMs: 60_000 });
    const b = await bump(store, 0, { kind: 'RESTORE' });
    expect(b).toMatchObject({ kind: 'RESTORE', margin: 0, floor: 0, keys: 0, leases_ended: 0, max_epoch: 1 });
    expect(await renew(store, held)).toMatchObject({ ok: true, epochs: { 'k:1': 1 } });
    expect(epochsOf(await take(store, ['k:other'], 'agent-b'))).toEqual({ 'k:other': 1 });
  });

  it('maxEpoch is the highest epoch of any key, held or not: 0 on a new store, kept by a release, raised by a bump', async () => {
    const { store } = await fresh();
    const max = () => store.read((tx) => tx.leases.maxEpoch());
    expect(await max()).toBe(0);
    await release(store, await take(store, ['k:1'], 'agent-a'));
    await release(store, await take(store, ['k:1'], 'agent-a'));
    await release(store, await take(store, ['k:1', 'k:2'], 'agent-a'));
    expect(await max()).toBe(3);
    // A refused acquisition changes nothing, and a live lease counts as a released one does.
    const held = await take(store, ['k:2'], 'agent-b', { ttlMs: 60_000 });
    expect(await max()).toBe(3);
    expect((await store.readWrite((tx) => tx.leases.acquire({ ...held.cmd, leaseId: 'other', tokenHash: 'h-other', holder: 'agent-c' }))).granted).toBe(false);
    expect(await max()).toBe(3);
    expect((await bump(store, 1000)).max_epoch).toBe(1003);
    expect(await max()).toBe(1003);
    // Epochs past 2^32 (a bump by a large margin) come back exact, as numbers.
    await bump(store, 2 ** 40);
    expect(await max()).toBe(2 ** 40 + 1003);
    expect(await max()).toBe(Math.max(...(await store.read((tx) => tx.leases.listKeys({}).then((p) => p.keys))).map((k) => k.epoch)));
  });
});
