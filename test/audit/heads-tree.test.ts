import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { HeadsTree } from '../../src/audit/heads-tree.js';
import { GENESIS_HASH, headsRoot, type CheckpointLeaf } from '../../src/audit/index.js';

const h = (s: string) => createHash('sha256').update(s).digest('hex');
const leaf = (chain: string, pos: number, floor = 0): CheckpointLeaf => ({ chain, pos, hash: h(`${chain}#${pos}`), floor_pos: floor, floor_hash: floor === 0 ? GENESIS_HASH : h(`${chain}@${floor}`) });

const round = (rnd: () => number) => Math.floor(rnd() * 1e9).toString(36);

/** A deterministic pseudo-random sequence (the same cases every run). */
function random(seed: number) {
  let x = seed;
  return () => ((x = (x * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31);
}

describe('the checkpoint tree kept in memory (HeadsTree)', () => {
  it('gives headsRoot of its leaves after any mix of moved chains, raised floors and new chains, and gives the leaves back', async () => {
    const rnd = random(7);
    for (const start of [0, 1, 2, 3, 7, 100, 1000]) {
      const all = new Map<string, CheckpointLeaf>();
      for (let i = 0; i < start; i++) {
        const c = `k:${i % 3 === 0 ? 'é' : ''}${Math.floor(rnd() * 1e6)}`;
        all.set(c, leaf(c, 1 + (i % 5)));
      }
      const tree = (await HeadsTree.build([...all.values()], 3))!;
      expect(tree.root()).toBe(headsRoot([...all.values()]));
      for (let round = 0; round < 6; round++) {
        const changed: CheckpointLeaf[] = [];
        const chains = [...all.keys()];
        // Some chains move on (or get an archive floor), and in some rounds new chains come in anywhere in the order.
        for (let k = 0; k < Math.min(chains.length, 1 + Math.floor(rnd() * 5)); k++) {
          const c = chains[Math.floor(rnd() * chains.length)]!;
          const was = all.get(c)!;
          if (changed.some((l) => l.chain === c)) continue;
          const next = rnd() < 0.3 ? { ...was, floor_pos: was.pos, floor_hash: h(`f${c}${round}`) } : leaf(c, was.pos + 1, was.floor_pos);
          changed.push(next);
        }
        if (round % 2 === 1) for (let k = 0; k < 3; k++) {
          const c = `k:${Math.floor(rnd() * 1e6)}n${round}`;
          changed.push(leaf(c, 1));
        }
        for (const l of changed) all.set(l.chain, l);
        expect(await tree.apply(changed, 2)).toBe(true);
        expect(tree.size).toBe(all.size);
        expect(tree.root()).toBe(headsRoot([...all.values()]));
      }
      expect([...tree.leaves()]).toEqual([...all.values()].sort((a, b) => (a.chain < b.chain ? -1 : a.chain > b.chain ? 1 : 0)));
      for (const l of all.values()) expect(tree.get(l.chain)).toEqual(l);
      expect(tree.get('not a chain')).toBeUndefined();
    }
  });

  it('gives headsRoot after batches of new chains of every size (the nodes copied from the old tree at a shift), mixed with moved chains', async () => {
    const rnd = random(11);
    for (const start of [1, 2, 5, 16, 33, 200, 1025]) {
      const all = new Map<string, CheckpointLeaf>();
      for (let i = 0; i < start; i++) {
        const c = `c:${String(Math.floor(rnd() * 1e6)).padStart(6, '0')}`;
        all.set(c, leaf(c, 1));
      }
      const tree = (await HeadsTree.build([...all.values()], 5))!;
      // Batches of 1..40 new chains (shifts of every residue modulo 2, 4, 8, 16, 32), some at the very start and end of the order.
      for (const added of [1, 2, 3, 4, 8, 16, 32, 7, 40]) {
        const changed: CheckpointLeaf[] = [];
        for (let k = 0; k < added; k++) {
          const at = rnd();
          const c = at < 0.1 ? `a${round(rnd)}` : at > 0.9 ? `z${round(rnd)}` : `c:${String(Math.floor(rnd() * 1e6)).padStart(6, '0')}~${added}.${k}`;
          if (!all.has(c) && !changed.some((l) => l.chain === c)) changed.push(leaf(c, 1));
        }
        const chains = [...all.keys()];
        if (rnd() < 0.5) {
          const c = chains[Math.floor(rnd() * chains.length)]!;
          changed.push(leaf(c, all.get(c)!.pos + 1));
        }
        for (const l of changed) all.set(l.chain, l);
        expect(await tree.apply(changed, 4)).toBe(true);
        expect(tree.root()).toBe(headsRoot([...all.values()]));
      }
      expect([...tree.leaves()].map((l) => l.chain)).toEqual([...all.keys()].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)));
    }
  });

  it('puts 100 new chains into 100 000 with the root headsRoot gives, hashing about two thirds of the nodes right of the first new one', async () => {
    const rnd = random(5);
    const leaves: CheckpointLeaf[] = [];
    for (let i = 0; i < 100_000; i++) leaves.push(leaf(`k:${String(i).padStart(6, '0')}`, 1 + (i % 5)));
    const tree = (await HeadsTree.build(leaves))!;
    const added: CheckpointLeaf[] = [];
    for (let k = 0; k < 100; k++) added.push(leaf(`k:${String(Math.floor(rnd() * 100_000)).padStart(6, '0')}~${k}`, 1));
    expect(await tree.apply(added)).toBe(true);
    leaves.push(...added);
    expect(tree.root()).toBe(headsRoot(leaves));
    // Every node right of the first new chain changes place; those whose leaves moved by a multiple of their
    // width are copied (about a third of them), not hashed again.
    const first = [...tree.leaves()].findIndex((l) => added.some((a) => a.chain === l.chain));
    const right = tree.size - first;
    expect(tree.hashedLast).toBeLessThan(0.75 * right);
    expect(tree.hashedLast).toBeGreaterThan(0.5 * right);
  });

  it('is not built over a head hash it could not give back the same (not 64 lower-case hex digits)', async () => {
    expect(await HeadsTree.build([{ ...leaf('a', 1), hash: 'ABC' }])).toBeUndefined();
    const tree = (await HeadsTree.build([leaf('a', 1)]))!;
    expect(await tree.apply([{ ...leaf('a', 2), hash: 'A'.repeat(64) }])).toBe(false);
  });
});
