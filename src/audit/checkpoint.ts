/**
 * Checkpoints of the receipt chain. Archiving cuts the oldest entries out of the store; a checkpoint
 * records where (the seq and hash of the last archived entry), signed with the decision signing keys,
 * so that the remaining chain verifies from it and an archive file verifies offline against it.
 */

/** What a checkpoint's JWS signs (its payload, canonical JSON). Times are ms. */
export interface CheckpointPayload {
  /** The checkpoint's own number: 1, 2, … */
  seq: number;
  /** The last archived entry: the chain remaining in the store starts at archived_through + 1. */
  archived_through: number;
  /** Hash of entry `archived_through`: prev_hash of the first remaining entry. */
  hash: string;
  /** prev_hash of the first entry of this archive (the previous checkpoint's hash, or the genesis hash). */
  prev_hash: string;
  /** Entries this archive holds (archived_through − the previous checkpoint's archived_through). */
  count: number;
  at: number;
}

/** A checkpoint as stored: its payload and the compact JWS over it. */
export interface StoredCheckpoint extends CheckpointPayload {
  jws: string;
}

/** Signs and checks checkpoints (the KeyRing, wired where the service is opened). */
export interface CheckpointSigner {
  sign(payload: CheckpointPayload): string;
  /** The payload the JWS signs if its signature verifies with a published key, else the problem in words. */
  verify(jws: string): { payload: CheckpointPayload } | { problem: string };
}

export const CHECKPOINT_TYP = 'writ-checkpoint+jws';

/** The payload's members in a fixed shape, or undefined when `p` is not one. */
export function checkpointPayloadOf(p: Record<string, unknown>): CheckpointPayload | undefined {
  const int = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
  const hex = (v: unknown): v is string => typeof v === 'string' && /^[0-9a-f]{64}$/.test(v);
  if (!int(p.seq) || !int(p.archived_through) || !hex(p.hash) || !hex(p.prev_hash) || !int(p.count) || !int(p.at)) return undefined;
  return { seq: p.seq, archived_through: p.archived_through, hash: p.hash, prev_hash: p.prev_hash, count: p.count, at: p.at };
}

/** Whether the stored columns say what the JWS signs. */
export function sameCheckpoint(a: CheckpointPayload, b: CheckpointPayload): boolean {
  return a.seq === b.seq && a.archived_through === b.archived_through && a.hash === b.hash && a.prev_hash === b.prev_hash && a.count === b.count && a.at === b.at;
}
