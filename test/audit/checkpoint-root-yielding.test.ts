import { describe, expect, it } from 'vitest';
import { forEachYielding } from '../../src/audit/checkpoint.js';
import { GENESIS_HASH, headsRoot, headsRootYielding, type CheckpointLeaf } from '../../src/audit/index.js';

/** `n` leaves out of chain order, some chain names outside ASCII (their order is the code units'). */
function leaves(n: number): CheckpointLeaf[] {
  const out: CheckpointLeaf[] = [];
  for (let i = 0; i < n; i++) {
    const chain = `${i % 3 === 0 ? 'wp:post:é' : 'wp:post:'}${(i * 7919) % (n * 13)}`;
    out.push({ chain, pos: 1 + (i % 9), hash: `h${i}`, floor_pos: i % 4, floor_hash: i % 4 === 0 ? GENESIS_HASH : `f${i}` });
  }
  return out;
}

describe('the checkpoint root, computed in steps', () => {
  it('is the root headsRoot gives, for any number of leaves, in order or not', async () => {
    for (const n of [0, 1, 2, 3, 5, 8, 17, 1000]) {
      const l = leaves(n);
      expect(await headsRootYielding(l, 3)).toBe(headsRoot(l));
      expect(await headsRootYielding(l)).toBe(headsRoot(l));
      const sorted = [...l].sort((a, b) => (a.chain < b.chain ? -1 : 1));
      expect(await headsRootYielding(sorted, 3)).toBe(headsRoot(l));
    }
  });

  it('gives the event loop a turn every step: a timer due meanwhile runs before the root is done', async () => {
    const l = leaves(50_000);
    let ticks = 0;
    let ticking = true;
    const tick = () => {
      ticks++;
      if (ticking) setTimeout(tick, 0);
    };
    setTimeout(tick, 0);
    // 50 000 leaf hashes and 49 999 node hashes, a turn every 8 192: a dozen turns at least.
    const root = await headsRootYielding(l, 8_192);
    ticking = false;
    expect(root).toBe(headsRoot(l));
    expect(ticks).toBeGreaterThanOrEqual(6);
    // headsRoot itself gives none (what the checkpoint did before, seconds long with a million chains).
    ticks = 0;
    ticking = true;
    setTimeout(tick, 0);
    headsRoot(l);
    expect(ticks).toBe(0);
    ticking = false;
  });

  it('the per-chain passes visit every item in order with turns between steps, and stop at a throw', async () => {
    const seen: number[] = [];
    let ticks = 0;
    const timer = setInterval(() => ticks++, 0);
    await forEachYielding([...Array(20_000).keys()], (i) => seen.push(i), 1_000);
    clearInterval(timer);
    expect(seen).toEqual([...Array(20_000).keys()]);
    expect(ticks).toBeGreaterThan(0);
    const upTo: number[] = [];
    await expect(forEachYielding([1, 2, 3, 4], (i) => {
      if (i === 3) throw new Error('went back');
      upTo.push(i);
    }, 1)).rejects.toThrow('went back');
    expect(upTo).toEqual([1, 2]);
  });
});
