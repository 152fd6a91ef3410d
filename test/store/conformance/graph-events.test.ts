import { expect, it } from 'vitest';
import { GraphHeadMoved } from '../../../src/graph/event-store.js';
import type { GraphEvent } from '../../../src/graph/model.js';
import { describeEngines } from './engines.js';

/** Event payloads are opaque to the store: it keeps them and their type, and gives them back. */
const ev = (n: number) => ({ type: 'principal.upsert', principal: { id: `p-${n}`, kind: 'agent' } }) as unknown as GraphEvent;

describeEngines('graph event log', (fresh) => {
  it('appends with consecutive revisions and reads them back in order, between bounds', async () => {
    const { store } = await fresh();
    expect(await store.read((tx) => tx.graph.head())).toBe(0);
    expect(await store.readWrite((tx) => tx.graph.append([ev(1), ev(2)], 'governance', 1_000))).toBe(2);
    expect(await store.readWrite((tx) => tx.graph.append([ev(3)], 'alice', 2_000))).toBe(3);
    const all = await store.read((tx) => tx.graph.read(0));
    expect(all.map((e) => [e.revision, e.actor, e.at])).toEqual([
      [1, 'governance', 1_000],
      [2, 'governance', 1_000],
      [3, 'alice', 2_000],
    ]);
    expect(all[2]!.event).toEqual(ev(3));
    expect((await store.read((tx) => tx.graph.read(1, 2))).map((e) => e.revision)).toEqual([2]);
    expect(await store.read((tx) => tx.graph.read(3))).toEqual([]);
    expect(await store.read((tx) => tx.graph.head())).toBe(3);
  });

  it('refuses an append whose expected head moved, writing nothing', async () => {
    const { store } = await fresh();
    await store.readWrite((tx) => tx.graph.append([ev(1)], 'a', 1_000, 0));
    const err = await store.readWrite((tx) => tx.graph.append([ev(2)], 'b', 1_000, 0)).catch((e) => e);
    expect(err).toBeInstanceOf(GraphHeadMoved);
    expect(err).toMatchObject({ expected: 0, actual: 1 });
    expect(await store.read((tx) => tx.graph.head())).toBe(1);
    expect(await store.readWrite((tx) => tx.graph.append([ev(2)], 'b', 1_000, 1))).toBe(2);
  });

  it('answers the head under a shared lock in a write transaction as without, and its own transaction may still append', async () => {
    const { store, another } = await fresh();
    await store.readWrite((tx) => tx.graph.append([ev(1), ev(2)], 'a', 1_000));
    const [head, since] = await store.readWrite((tx) => Promise.all([tx.graph.head({ lock: 'share' }), tx.graph.read(1)]));
    expect([head, since.map((e) => e.revision)]).toEqual([2, [2]]);
    expect(await store.readWrite(async (tx) => {
      expect(await tx.graph.head({ lock: 'share' })).toBe(2);
      return tx.graph.append([ev(3)], 'a', 2_000, 2);
    })).toBe(3);
    // Ended with its transaction: another appends next.
    expect(await (await another()).readWrite((tx) => tx.graph.append([ev(4)], 'b', 3_000))).toBe(4);
  });

  it('answers the revision at a time', async () => {
    const { store } = await fresh();
    await store.readWrite((tx) => tx.graph.append([ev(1), ev(2)], 'a', 1_000));
    await store.readWrite((tx) => tx.graph.append([ev(3)], 'a', 3_000));
    expect(await store.read((tx) => tx.graph.revisionAt(999))).toBe(0);
    expect(await store.read((tx) => tx.graph.revisionAt(1_000))).toBe(2);
    expect(await store.read((tx) => tx.graph.revisionAt(2_999))).toBe(2);
    expect(await store.read((tx) => tx.graph.revisionAt(10_000))).toBe(3);
  });

  it('concurrent appenders on two connections get consecutive, distinct revisions; each batch stays contiguous', async () => {
    const { store, another } = await fresh();
    const other = await another();
    const batches = Array.from({ length: 30 }, (_, i) => [ev(2 * i), ev(2 * i + 1)]);
    const heads = await Promise.all(batches.map((b, i) => (i % 2 ? other : store).readWrite((tx) => tx.graph.append(b, `writer-${i}`, 1_000))));
    expect([...heads].sort((a, b) => a - b)).toEqual(Array.from({ length: 30 }, (_, i) => 2 * (i + 1)));
    const events = await store.read((tx) => tx.graph.read(0));
    expect(events.map((e) => e.revision)).toEqual(Array.from({ length: 60 }, (_, i) => i + 1));
    for (let i = 0; i < 60; i += 2) expect(events[i]!.actor).toBe(events[i + 1]!.actor);
  });

  it('concurrent optimistic appenders (expectedHead) each win exactly once after catching up', async () => {
    const { store, another } = await fresh();
    const other = await another();
    const writer = async (s: typeof store, n: number) => {
      for (;;) {
        const head = await s.read((tx) => tx.graph.head());
        try {
          return await s.readWrite((tx) => tx.graph.append([ev(n)], `w${n}`, 1_000, head));
        } catch (e) {
          if (!(e instanceof GraphHeadMoved)) throw e;
        }
      }
    };
    const heads = await Promise.all(Array.from({ length: 12 }, (_, n) => writer(n % 2 ? other : store, n)));
    expect([...heads].sort((a, b) => a - b)).toEqual(Array.from({ length: 12 }, (_, i) => i + 1));
    expect(await store.read((tx) => tx.graph.head())).toBe(12);
  });
});
