import { expect, it } from 'vitest';
import { GENESIS_HASH } from '../../../src/audit/hash-chain.js';
import { GraphLogWalk, graphEventHash } from '../../../src/audit/graph-chain.js';
import type { GraphEvent } from '../../../src/graph/model.js';
import { describeEngines } from './engines.js';

const ev = (n: number) => ({ type: 'principal.upsert', principal: { id: `p-${n}`, kind: 'agent' } }) as unknown as GraphEvent;

/** The graph log is one hash chain on every engine: each row's hash links it to the one before, and the head is kept beside the log. */
describeEngines('graph event log hash chain', (fresh) => {
  it('links every appended event to the one before it, and keeps the chain head with the log head', async () => {
    const { store } = await fresh();
    expect(await store.read((tx) => tx.graph.chainHead())).toEqual({ revision: 0, hashed: 0, hash: GENESIS_HASH });
    await store.readWrite((tx) => tx.graph.append([ev(1), ev(2)], 'governance', 1_000));
    await store.readWrite((tx) => tx.graph.append([ev(3)], 'al\nice', 2_000));
    await store.readWrite((tx) => tx.graph.append([], 'nobody', 3_000));
    const rows = await store.read((tx) => tx.graph.rowsAfter(0, 10));
    let prev = GENESIS_HASH;
    for (const r of rows) {
      expect(r.hash).toBe(graphEventHash(prev, r));
      prev = r.hash!;
    }
    expect(rows.map((r) => [r.revision, r.actor, r.type])).toEqual([[1, 'governance', 'principal.upsert'], [2, 'governance', 'principal.upsert'], [3, 'al\nice', 'principal.upsert']]);
    expect(await store.read((tx) => tx.graph.chainHead())).toEqual({ revision: 3, hashed: 3, hash: prev });
    expect((await store.read((tx) => tx.graph.rowsAfter(1, 1))).map((r) => r.revision)).toEqual([2]);
    const walk = new GraphLogWalk(await store.read((tx) => tx.graph.chainHead()));
    walk.feed(rows);
    expect(walk.finish()).toEqual({ ok: true, events: 3, revision: 3, hash: prev, unhashed: 0 });
  });

  it('chains appends made by several stores (replicas, processes) on the same data into one line', async () => {
    const { store, another } = await fresh();
    const other = await another();
    await Promise.all(Array.from({ length: 12 }, (_, i) => (i % 2 === 0 ? store : other).readWrite((tx) => tx.graph.append([ev(i)], `a${i}`, 1_000 + i))));
    const rows = await store.read((tx) => tx.graph.rowsAfter(0, 100));
    const walk = new GraphLogWalk(await store.read((tx) => tx.graph.chainHead()));
    walk.feed(rows);
    expect(walk.finish()).toMatchObject({ ok: true, events: 12, revision: 12 });
  });
});
