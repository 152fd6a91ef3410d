import { createHash, hash } from 'node:crypto';
import { canonicalJson } from './canonical-json.js';
import type { ChainId } from './hash-chain.js';

/**
 * Signed checkpoints of the receipt log, signed with the decision signing keys (compact JWS, typ
 * CHECKPOINT_TYP). Three payloads share that envelope:
 *
 * - `CheckpointPayload` (version 2; version 3 also signs the graph event log's head, graph-chain.ts): a Merkle root over the heads of ALL chains (one leaf per chain:
 *   its head position and hash, and its archive floor). Taken periodically by every server (the first
 *   to record a number wins) and by `writ audit archive`. An entry altered, removed, moved or reordered
 *   at or below a signed head breaks that chain; a tail cut below a signed head is a missing entry.
 * - `ArchivePayload`: the manifest of an archive file (its chain ranges, by hash), checked offline.
 * - `LegacyCheckpointPayload` (version 1): the cut points of the single global chain before per-key
 *   chains; kept verifiable: the legacy chain's floor comes from the latest one until a version-2
 *   checkpoint carries it over.
 */

/** What a checkpoint over the chain heads signs (its payload, canonical JSON). Times are ms. */
export interface CheckpointPayload {
  /** 3: it also signs the graph event log's head (graph-chain.ts); 2: receipts only (before the graph chain). */
  v: 2 | 3;
  /** The checkpoint's own number: 1, 2, … */
  seq: number;
  at: number;
  /** Leaves (chains) under the root. */
  chains: number;
  /** `headsRoot` of the leaves, sorted by chain. */
  root: string;
  /** Entries this checkpoint archived (0 for a periodic one). */
  archived: number;
  /** Version 3: the graph log's last hashed revision and its hash. */
  graph_revision?: number;
  graph_hash?: string;
}

/** A checkpoint row as the engines read it (graph columns null before version 3). */
export type StoredCheckpointRow = Omit<StoredCheckpoint, 'graph_revision' | 'graph_hash'> & { graph_revision: number | null; graph_hash: string | null };

export function storedCheckpointOf({ graph_revision, graph_hash, ...rest }: StoredCheckpointRow): StoredCheckpoint {
  return graph_hash === null ? rest : { ...rest, graph_revision: graph_revision ?? 0, graph_hash };
}

/** One leaf: a chain's head as of the checkpoint, and its floor (the last archived entry; 0 and the genesis hash when none). */
export interface CheckpointLeaf {
  chain: ChainId;
  pos: number;
  hash: string;
  floor_pos: number;
  floor_hash: string;
}

/** A checkpoint as stored: its payload and the compact JWS over it. Its leaves are stored beside it (only those that changed). */
export interface StoredCheckpoint extends CheckpointPayload {
  jws: string;
}

/** One chain's entries in an archive file: positions from..to, linked from prev_hash to hash. */
export interface ArchiveRange {
  chain: ChainId;
  from: number;
  prev_hash: string;
  to: number;
  hash: string;
}

/** What an archive file's manifest signs. */
export interface ArchivePayload {
  v: 2;
  kind: 'archive';
  at: number;
  /** Entries in the file. */
  count: number;
  /** sha256 hex of the canonical JSON of the file's ranges (in file order). */
  ranges_hash: string;
}

/** Version 1: a cut point of the single global chain (now the legacy chain). */
export interface LegacyCheckpointPayload {
  seq: number;
  archived_through: number;
  hash: string;
  prev_hash: string;
  count: number;
  at: number;
}

export interface StoredLegacyCheckpoint extends LegacyCheckpointPayload {
  jws: string;
}

export type SignedPayload = CheckpointPayload | ArchivePayload | LegacyCheckpointPayload;

/** Signs and checks checkpoints (the KeyRing, wired where the service is opened). */
export interface CheckpointSigner {
  sign(payload: SignedPayload): string;
  /** The payload the JWS signs if its signature verifies with a published key, else the problem in words. */
  verify(jws: string): { payload: SignedPayload } | { problem: string };
}

export const CHECKPOINT_TYP = 'writ-checkpoint+jws';

const int = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
const hex = (v: unknown): v is string => typeof v === 'string' && /^[0-9a-f]{64}$/.test(v);

/** The payload's members in a fixed shape, or undefined when `p` is none of the three. */
export function signedPayloadOf(p: Record<string, unknown>): SignedPayload | undefined {
  if (p.v === 2 && p.kind === 'archive') {
    if (!int(p.at) || !int(p.count) || !hex(p.ranges_hash)) return undefined;
    return { v: 2, kind: 'archive', at: p.at, count: p.count, ranges_hash: p.ranges_hash };
  }
  if (p.v === 2 || p.v === 3) {
    if (!int(p.seq) || !int(p.at) || !int(p.chains) || !hex(p.root) || !int(p.archived)) return undefined;
    if (p.v === 2) return { v: 2, seq: p.seq, at: p.at, chains: p.chains, root: p.root, archived: p.archived };
    if (!int(p.graph_revision) || !hex(p.graph_hash)) return undefined;
    return { v: 3, seq: p.seq, at: p.at, chains: p.chains, root: p.root, archived: p.archived, graph_revision: p.graph_revision, graph_hash: p.graph_hash };
  }
  if (!int(p.seq) || !int(p.archived_through) || !hex(p.hash) || !hex(p.prev_hash) || !int(p.count) || !int(p.at)) return undefined;
  return { seq: p.seq, archived_through: p.archived_through, hash: p.hash, prev_hash: p.prev_hash, count: p.count, at: p.at };
}

/** Whether the stored columns (or header members) say exactly what the JWS signs. */
export function samePayload(stored: object, signed: SignedPayload): boolean {
  const s = signedPayloadOf(stored as Record<string, unknown>);
  return s !== undefined && canonicalJson(s) === canonicalJson(signed);
}

export function isHeadsCheckpoint(p: SignedPayload): p is CheckpointPayload {
  return 'v' in p && (p.v === 2 || p.v === 3) && !('kind' in p);
}

export function isArchivePayload(p: SignedPayload): p is ArchivePayload {
  return 'kind' in p && p.kind === 'archive';
}

export function isLegacyCheckpoint(p: SignedPayload): p is LegacyCheckpointPayload {
  return !('v' in p);
}

/** Chains in code-unit order: the order of the leaves under a root. */
export function compareChains(a: ChainId, b: ChainId): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

const sha256 = (...parts: (Buffer | string)[]) => {
  const h = createHash('sha256');
  for (const p of parts) h.update(p);
  return h.digest();
};

/**
 * Merkle root (RFC 6962 shape: leaf = sha256(0x00 ‖ canonical JSON of [chain, pos, hash, floor_pos,
 * floor_hash]), node = sha256(0x01 ‖ left ‖ right), split at the largest power of two below n) over the
 * leaves sorted by chain; sha256 of nothing for no leaf. Hex.
 */
export function headsRoot(leaves: readonly CheckpointLeaf[]): string {
  return runSteps(rootSteps(leaves, Infinity));
}

/** Hashes done between two turns of the event loop in headsRootYielding (a few milliseconds' work). */
export const ROOT_STEP = 8_192;

/**
 * headsRoot, in steps of `step` hashes with a turn of the event loop (setImmediate) between them: the
 * periodic checkpoint hashes every chain's leaf, seconds of work with a million chains, during which
 * the server would answer nothing. The same root: the same steps (rootSteps), run with turns between them.
 */
export async function headsRootYielding(leaves: readonly CheckpointLeaf[], step = ROOT_STEP): Promise<string> {
  return runStepsYielding(rootSteps(leaves, step));
}

/** A turn of the event loop: what was due meanwhile (timers, I/O) runs first. */
export const eventLoopTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * Calls `each` on every item, with a turn of the event loop every `step` items: what a checkpoint does
 * per chain (a map of every head, a comparison with every signed leaf) is a second's work or more with
 * a million chains.
 */
export async function forEachYielding<T>(items: Iterable<T>, each: (item: T) => void, step = ROOT_STEP): Promise<void> {
  let n = 0;
  for (const item of items) {
    each(item);
    if (++n % step === 0) await eventLoopTurn();
  }
}

/**
 * Work in steps: a generator that yields where the event loop may take a turn (every `step` hashes) and
 * returns the result. headsRoot runs one straight through, headsRootYielding (and heads-tree.ts) with turns.
 */
export type Steps<T> = Generator<void, T, void>;

export function runSteps<T>(steps: Steps<T>): T {
  for (;;) {
    const r = steps.next();
    if (r.done) return r.value;
  }
}

export async function runStepsYielding<T>(steps: Steps<T>): Promise<T> {
  for (;;) {
    const r = steps.next();
    if (r.done) return r.value;
    await eventLoopTurn();
  }
}

/** The root over `leaves` in steps: a turn first (not for none), then one every `step` hashes. */
function* rootSteps(leaves: readonly CheckpointLeaf[], step: number): Steps<string> {
  const sorted = byChain(leaves);
  if (sorted.length === 0) return EMPTY_ROOT;
  if (step !== Infinity) yield;
  const level0 = Buffer.allocUnsafe(sorted.length * HASH_BYTES);
  const count = { hashed: 0 };
  for (let i = 0; i < sorted.length; i++) {
    leafDigest(sorted[i]!).copy(level0, i * HASH_BYTES);
    if (++count.hashed % step === 0) yield;
  }
  const levels = yield* upperLevelSteps(level0, sorted.length, 0, undefined, step, count);
  return rootOf(levels);
}

/** Bytes of one hash: each level of the tree is one Buffer of them, node i at i * HASH_BYTES. */
export const HASH_BYTES = 32;

/** The root of no leaf. */
export const EMPTY_ROOT = sha256().toString('hex');

/**
 * The levels of the tree above `level0` (n leaf hashes), bottom-up pairing with the odd node promoted
 * (the same tree as RFC 6962's recursive split), `[level0, level1, …, [root]]`. Nodes that cover only
 * leaves below `from` are copied from `previous` (the levels of a tree whose first `from` leaves are
 * the same), not hashed again: a tree grown by a leaf rehashes only what lies right of it.
 */
export function* upperLevelSteps(level0: Buffer, n: number, from: number, previous: readonly Buffer[] | undefined, step: number, count = { hashed: 0 }): Steps<Buffer[]> {
  const levels = [level0];
  let below = level0;
  let width = n;
  let kept = previous ? from : 0;
  for (let l = 1; width > 1; l++) {
    const up = Math.ceil(width / 2);
    const level = Buffer.allocUnsafe(up * HASH_BYTES);
    kept = Math.floor(kept / 2);
    if (kept > 0) previous![l]!.copy(level, 0, 0, kept * HASH_BYTES);
    for (let j = kept; j < up; j++) {
      if (2 * j + 1 < width) {
        nodeDigestInto(below, 2 * j, level, j);
        if (++count.hashed % step === 0) yield;
      } else below.copy(level, j * HASH_BYTES, 2 * j * HASH_BYTES, (2 * j + 1) * HASH_BYTES);
    }
    levels.push(level);
    below = level;
    width = up;
  }
  return levels;
}

/** Node `j` of the level above `below` hashed again from its two children (both exist). */
export function nodeDigestInto(below: Buffer, left: number, into: Buffer, j: number): void {
  NODE_INPUT[0] = 1;
  below.copy(NODE_INPUT, 1, left * HASH_BYTES, (left + 2) * HASH_BYTES);
  hash('sha256', NODE_INPUT, 'buffer').copy(into, j * HASH_BYTES);
}

/** The root of the levels upperLevelSteps gave (hex). */
export function rootOf(levels: readonly Buffer[]): string {
  return levels[levels.length - 1]!.toString('hex', 0, HASH_BYTES);
}

/** The leaves in chain order: a copy, sorted unless already in order (as the store lists them). */
function byChain(leaves: readonly CheckpointLeaf[]): CheckpointLeaf[] {
  for (let i = 1; i < leaves.length; i++) {
    if (compareChains(leaves[i - 1]!.chain, leaves[i]!.chain) > 0) return [...leaves].sort((a, b) => compareChains(a.chain, b.chain));
  }
  return [...leaves];
}

const LEAF = Buffer.from([0]);
const NODE_INPUT = Buffer.alloc(1 + 2 * HASH_BYTES);
/** A leaf's hash: sha256(0x00 ‖ canonical JSON of [chain, pos, hash, floor_pos, floor_hash]). */
export const leafDigest = (l: CheckpointLeaf) => sha256(LEAF, canonicalJson([l.chain, l.pos, l.hash, l.floor_pos, l.floor_hash]));

/** What an archive manifest's ranges_hash is for these ranges. */
export function rangesHash(ranges: readonly ArchiveRange[]): string {
  return sha256(canonicalJson(ranges)).toString('hex');
}
