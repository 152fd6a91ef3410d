import { GENESIS_HASH, LEGACY_CHAIN, ChainVerifier, type ChainBreak, type ChainHead, type ChainId } from './hash-chain.js';
import type { CheckpointLeaf } from './checkpoint.js';
import type { StoredEntry } from './receipt.js';
import { entryBody } from './fold.js';

/**
 * Walks the whole log in (chain, pos) order, one ChainVerifier per chain, and checks each chain
 * against what vouches for its extent: it starts from its floor in the signed checkpoint (entries at or
 * below it were archived), must pass through the head the checkpoint signed with the same hash (a chain
 * rewritten below it, or cut short of it, is found), and must reach the head the engine keeps (read
 * before the walk: a later read sees at least as much). A chain the checkpoint or the engine knows that
 * has no entry left above its floor is reported as cut. An intent or rejection must be in the chain of
 * the resource key its body names (except in the legacy chain).
 */
export class LogWalk {
  private current: ChainVerifier | undefined;
  private readonly seen = new Set<ChainId>();
  /** Entries checked and found sound. */
  entries = 0;
  /** Each chain as verified: its head and floor (what a new checkpoint over the same log would sign). */
  readonly verified: CheckpointLeaf[] = [];

  constructor(
    private readonly signed: ReadonlyMap<ChainId, CheckpointLeaf>,
    private readonly heads: ReadonlyMap<ChainId, ChainHead>,
  ) {}

  /** Entries found sound so far, in the chain being walked too. */
  get sound(): number {
    return this.entries + (this.current?.count ?? 0);
  }

  /** Feeds the next entries; returns the break, or the entries checked (those above their chain's floor). */
  feed(chunk: readonly StoredEntry[]): { bad: ChainBreak } | { checked: StoredEntry[] } {
    const checked: StoredEntry[] = [];
    for (const e of chunk) {
      if (!this.current || e.chain !== this.current.chain) {
        const bad = this.close();
        if (bad) return { bad };
        if (this.seen.has(e.chain)) return { bad: { chain: e.chain, pos: e.pos, seq: e.seq, problem: `chain ${JSON.stringify(e.chain)} was read twice (the store returned entries out of order)` } };
        const floor = this.signed.get(e.chain);
        this.current = new ChainVerifier(e.chain, floor?.floor_pos ?? 0, floor?.floor_hash ?? GENESIS_HASH);
        this.seen.add(e.chain);
      }
      const v = this.current;
      // The checkpoint that raised a floor deleted the entries at or below it in the same transaction,
      // and the floors were read before the walk: an entry there was put back (a backdated forgery).
      if (e.pos <= v.startPos) {
        return { bad: v.bad(e.pos, `chain ${JSON.stringify(e.chain)}: entry ${e.pos} is at or below the chain's archive floor ${v.startPos} (archived entries are deleted with the checkpoint that archives them: this one was put back)`, e.seq) };
      }
      const bad = v.feed([e]);
      if (bad) return { bad };
      // A body that hashes right but is not what Writ writes was rewritten and re-hashed (with the links after it).
      const body = entryBody(e);
      if (body === null) return { bad: v.bad(e.pos, `chain ${JSON.stringify(e.chain)}: entry ${e.pos} (receipt ${e.receipt_id}) has a body that is not the JSON object Writ writes (it was rewritten and re-hashed)`, e.seq) };
      if (e.chain !== LEGACY_CHAIN && (e.kind === 'intent' || e.kind === 'rejected')) {
        const resource = body.resource_key;
        if (resource !== e.chain) return { bad: v.bad(e.pos, `chain ${JSON.stringify(e.chain)}: entry ${e.pos} opens a receipt of ${JSON.stringify(resource)} (it was moved from that key's chain)`, e.seq) };
      }
      const leaf = this.signed.get(e.chain);
      if (leaf && e.pos === leaf.pos && e.hash !== leaf.hash) {
        return { bad: v.bad(e.pos, `chain ${JSON.stringify(e.chain)}: entry ${e.pos} is not the head the checkpoint signed (the chain was rewritten)`, e.seq) };
      }
      checked.push(e);
    }
    return { checked };
  }

  /** Once every entry was fed: the last chain's end, and the chains that have no entry at all. */
  finish(): ChainBreak | undefined {
    const bad = this.close();
    if (bad) return bad;
    for (const chain of new Set([...this.signed.keys(), ...this.heads.keys()])) {
      if (this.seen.has(chain)) continue;
      const floor = this.signed.get(chain);
      const v = new ChainVerifier(chain, floor?.floor_pos ?? 0, floor?.floor_hash ?? GENESIS_HASH);
      const cut = this.cut(v);
      if (cut) return cut;
      this.verified.push(this.leafOf(v));
    }
    return undefined;
  }

  private close(): ChainBreak | undefined {
    const v = this.current;
    if (!v) return undefined;
    this.current = undefined;
    const cut = this.cut(v);
    if (cut) return cut;
    this.entries += v.count;
    this.verified.push(this.leafOf(v));
    return undefined;
  }

  private cut(v: ChainVerifier): ChainBreak | undefined {
    const signed = this.signed.get(v.chain)?.pos ?? 0;
    const kept = this.heads.get(v.chain)?.pos ?? 0;
    const required = Math.max(signed, kept);
    if (v.verified >= required) return undefined;
    const by = signed >= kept ? 'the signed checkpoint' : 'the chain\'s head row';
    return v.bad(v.verified + 1, `chain ${JSON.stringify(v.chain)}: entries ${v.verified + 1}..${required} are missing (${by} says the chain reaches ${required}: its tail was cut)`);
  }

  private leafOf(v: ChainVerifier): CheckpointLeaf {
    const floor = this.signed.get(v.chain);
    return { chain: v.chain, pos: v.verified, hash: v.headHash, floor_pos: floor?.floor_pos ?? 0, floor_hash: floor?.floor_hash ?? GENESIS_HASH };
  }
}
