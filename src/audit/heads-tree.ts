import { GENESIS_HASH } from './hash-chain.js';
import {
  compareChains,
  EMPTY_ROOT,
  HASH_BYTES,
  leafDigest,
  nodeDigestInto,
  ROOT_STEP,
  rootOf,
  runStepsYielding,
  upperLevelSteps,
  type CheckpointLeaf,
  type Steps,
} from './checkpoint.js';

/**
 * A checkpoint's leaves and its Merkle tree (checkpoint.ts `headsRoot`), kept in memory so that the next
 * checkpoint costs in proportion to the chains that moved, not to all chains: a leaf that changed rehashes
 * its path to the root (about 20 hashes with a million chains); new chains rehash the nodes right of
 * the first (the leaves after each move one place; those that moved by a multiple of a node's width are copied:
 * mergedLevelSteps), never the leaves. Compact: per chain its name, two numbers and
 * three hashes' worth of bytes in shared Buffers (the head hash, the leaf hash, the nodes above), and the
 * floor hash only for a chain with an archive floor. ReceiptLog keeps one, for the latest checkpoint it
 * verified or signed.
 */
export class HeadsTree {
  private constructor(
    /** Chains in code-unit order. */
    private chains: string[],
    private pos: Float64Array,
    /** Head hashes, HASH_BYTES each. */
    private heads: Buffer,
    private floorPos: Float64Array,
    /** floor_hash of the chains whose floor is not the genesis. */
    private readonly floorHash: Map<string, string>,
    /** [leaf hashes, …, [root]] */
    private levels: Buffer[],
  ) {}

  /**
   * The tree over `leaves` (any order), with a turn of the event loop every `step` hashes; undefined when
   * a head hash is not 64 lower-case hex digits (kept as bytes, it would not come back the same: the
   * caller then computes roots as before, from the leaves).
   */
  static async build(leaves: readonly CheckpointLeaf[], step = ROOT_STEP): Promise<HeadsTree | undefined> {
    const sorted = [...leaves].sort((a, b) => compareChains(a.chain, b.chain));
    const tree = new HeadsTree([], new Float64Array(0), Buffer.alloc(0), new Float64Array(0), new Map(), []);
    return (await runStepsYielding(tree.merge(sorted, step))) ? tree : undefined;
  }

  private nodesHashed = 0;

  /** Nodes hashed above the leaves by the last build or apply that put in new chains (bench/heads-tree-insert.mjs reports it). */
  get hashedLast(): number {
    return this.nodesHashed;
  }

  get size(): number {
    return this.chains.length;
  }

  root(): string {
    return this.size === 0 ? EMPTY_ROOT : rootOf(this.levels);
  }

  /** The leaf of `chain`, if the tree has one. */
  get(chain: string): CheckpointLeaf | undefined {
    const i = this.indexOf(chain);
    return i < 0 ? undefined : this.leafAt(i);
  }

  /** Every leaf, in chain order. */
  *leaves(): IterableIterator<CheckpointLeaf> {
    for (let i = 0; i < this.size; i++) yield this.leafAt(i);
  }

  /**
   * Puts these leaves in (a chain's new head or floor, or a new chain), with a turn of the event loop every
   * `step` hashes. False (and the tree is unusable: drop it) when a head hash is not 64 lower-case hex digits.
   */
  async apply(changed: readonly CheckpointLeaf[], step = ROOT_STEP): Promise<boolean> {
    const sorted = [...changed].sort((a, b) => compareChains(a.chain, b.chain));
    if (sorted.some((l) => this.indexOf(l.chain) < 0)) return runStepsYielding(this.merge(sorted, step));
    return runStepsYielding(this.update(sorted, step));
  }

  /** Bytes held outside the chain names (which are shared with nothing else: count about 2 bytes per character more, plus ~20 each). */
  bytes(): number {
    return this.pos.byteLength + this.floorPos.byteLength + this.heads.length + this.levels.reduce((n, l) => n + l.length, 0) + this.chains.length * 8;
  }

  private leafAt(i: number): CheckpointLeaf {
    const chain = this.chains[i]!;
    return { chain, pos: this.pos[i]!, hash: this.heads.toString('hex', i * HASH_BYTES, (i + 1) * HASH_BYTES), floor_pos: this.floorPos[i]!, floor_hash: this.floorHash.get(chain) ?? GENESIS_HASH };
  }

  private indexOf(chain: string): number {
    let lo = 0;
    let hi = this.chains.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >>> 1;
      const c = compareChains(this.chains[mid]!, chain);
      if (c === 0) return mid;
      if (c < 0) lo = mid + 1;
      else hi = mid - 1;
    }
    return -1;
  }

  /** Stores leaf `l` at place `i` (its head hash as bytes) and its leaf hash in `level0`; false when its hash is not hex. */
  private put(i: number, l: CheckpointLeaf, level0: Buffer): boolean {
    if (!HEX64.test(l.hash)) return false;
    this.chains[i] = l.chain;
    this.pos[i] = l.pos;
    this.heads.write(l.hash, i * HASH_BYTES, HASH_BYTES, 'hex');
    this.floorPos[i] = l.floor_pos;
    if (l.floor_hash === GENESIS_HASH) this.floorHash.delete(l.chain);
    else this.floorHash.set(l.chain, l.floor_hash);
    leafDigest(l).copy(level0, i * HASH_BYTES);
    return true;
  }

  /** Changed leaves of chains the tree has (sorted): their leaf hashes and their paths to the root. */
  private *update(sorted: readonly CheckpointLeaf[], step: number): Steps<boolean> {
    let dirty: number[] = [];
    let hashed = 0;
    for (const l of sorted) {
      const i = this.indexOf(l.chain);
      if (!this.put(i, l, this.levels[0]!)) return false;
      dirty.push(i);
      if (++hashed % step === 0) yield;
    }
    let width = this.size;
    for (let l = 1; l < this.levels.length; l++) {
      const parents: number[] = [];
      for (const d of dirty) {
        const p = d >> 1;
        if (parents[parents.length - 1] !== p) parents.push(p);
      }
      for (const p of parents) {
        if (2 * p + 1 < width) {
          nodeDigestInto(this.levels[l - 1]!, 2 * p, this.levels[l]!, p);
          if (++hashed % step === 0) yield;
        } else this.levels[l - 1]!.copy(this.levels[l]!, p * HASH_BYTES, 2 * p * HASH_BYTES, (2 * p + 1) * HASH_BYTES);
      }
      dirty = parents;
      width = Math.ceil(width / 2);
    }
    return true;
  }

  /**
   * Merges sorted leaves in (new chains, changed ones) in one pass over the old arrays, then the levels above
   * (mergedLevelSteps): what lies left of the first place that changed is copied, and so is every node right
   * of it that covers no changed place and whose leaves moved by a multiple of its width.
   */
  private *merge(sorted: readonly CheckpointLeaf[], step: number): Steps<boolean> {
    const old = { chains: this.chains, pos: this.pos, heads: this.heads, floorPos: this.floorPos, level0: this.levels[0] ?? Buffer.alloc(0) };
    let added = 0;
    for (const l of sorted) if (this.indexOf(l.chain) < 0) added++;
    const n = old.chains.length + added;
    this.chains = new Array<string>(n);
    this.pos = new Float64Array(n);
    this.heads = Buffer.allocUnsafe(n * HASH_BYTES);
    this.floorPos = new Float64Array(n);
    const level0 = Buffer.allocUnsafe(n * HASH_BYTES);
    // The places put in (new order), and how many new chains lie at or before each.
    const dirty: Place[] = [];
    let i = 0;
    let j = 0;
    let k = 0;
    let hashed = 0;
    let copied = 0;
    while (k < n) {
      if (j < sorted.length && (i >= old.chains.length || compareChains(sorted[j]!.chain, old.chains[i]!) <= 0)) {
        const l = sorted[j++]!;
        if (i < old.chains.length && old.chains[i] === l.chain) i++;
        if (!this.put(k, l, level0)) return false;
        dirty.push({ at: k, shift: k + 1 - i });
        k++;
        if (++hashed % step === 0) yield;
        continue;
      }
      // The old leaves up to the next one put in, copied as one run (at most `step` at a time).
      let end = i + 1;
      const until = j < sorted.length ? sorted[j]!.chain : undefined;
      while (end < old.chains.length && end - i < step && (until === undefined || compareChains(until, old.chains[end]!) > 0)) end++;
      for (let x = i; x < end; x++) this.chains[k + x - i] = old.chains[x]!;
      this.pos.set(old.pos.subarray(i, end), k);
      this.floorPos.set(old.floorPos.subarray(i, end), k);
      old.heads.copy(this.heads, k * HASH_BYTES, i * HASH_BYTES, end * HASH_BYTES);
      old.level0.copy(level0, k * HASH_BYTES, i * HASH_BYTES, end * HASH_BYTES);
      k += end - i;
      copied += end - i;
      i = end;
      if (copied >= step) {
        copied = 0;
        yield;
      }
    }
    const count = { hashed: 0 };
    if (n === 0) this.levels = [];
    else if (this.levels.length === 0) this.levels = yield* upperLevelSteps(level0, n, 0, undefined, step, count);
    else this.levels = yield* mergedLevelSteps(level0, n, dirty, this.levels, step, count);
    this.nodesHashed = count.hashed;
    return true;
  }
}

/** A place of the merged leaves that was put in, and how many of the old leaves' places moved right up to it (new chains at or before it). */
interface Place {
  at: number;
  shift: number;
}

/**
 * The levels above `level0` (n leaves, merged from the tree whose levels are `previous`), as upperLevelSteps
 * gives them, hashing only what changed. A node covers 2^l consecutive leaves; one that covers no place put
 * in (`dirty`) covers old leaves that all moved right by the same `shift` (the new chains before them), and
 * when that shift is a multiple of 2^l those leaves were a whole node of the old tree too, at index
 * j - shift / 2^l, with the same hash: copied. Left of the first place put in the shift is 0 (every level
 * copied); between two places it is the new chains so far, so a node is copied at level 1 after an even
 * number of them, at level 2 after a multiple of four, and so on: about a third of the nodes right of the
 * first new chain, for new chains in random places. The nodes of the right edge that are not whole (an odd
 * one promoted) are always hashed: a few per level.
 */
function* mergedLevelSteps(level0: Buffer, n: number, dirty: readonly Place[], previous: readonly Buffer[], step: number, count: { hashed: number }): Steps<Buffer[]> {
  const levels = [level0];
  let below = level0;
  let width = n;
  for (let l = 1; width > 1; l++) {
    const up = Math.ceil(width / 2);
    const level = Buffer.allocUnsafe(up * HASH_BYTES);
    const span = 2 ** l;
    const old = previous[l];
    let d = 0;
    let j = 0;
    while (j < up) {
      const first = j * span;
      while (d < dirty.length && dirty[d]!.at < first) d++;
      const shift = d > 0 ? dirty[d - 1]!.shift : 0;
      // Whole nodes from j on that end at or before the next place put in (or the last leaf).
      const clean = Math.floor((d < dirty.length ? dirty[d]!.at : n) / span);
      if (old && clean > j && shift % span === 0) {
        const from = j - shift / span;
        old.copy(level, j * HASH_BYTES, from * HASH_BYTES, (from + clean - j) * HASH_BYTES);
        j = clean;
        continue;
      }
      if (2 * j + 1 < width) {
        nodeDigestInto(below, 2 * j, level, j);
        if (++count.hashed % step === 0) yield;
      } else below.copy(level, j * HASH_BYTES, 2 * j * HASH_BYTES, (2 * j + 1) * HASH_BYTES);
      j++;
    }
    levels.push(level);
    below = level;
    width = up;
  }
  return levels;
}

const HEX64 = /^[0-9a-f]{64}$/;
