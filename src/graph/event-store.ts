import type { ReadLock } from '../transactions.js';
import type { GraphEvent, RecordedGraphEvent } from './model.js';

/**
 * Storage port of the authority graph: the event log from which every replica's in-memory graph is
 * (re)built. Implemented by each engine (src/store/sqlite, src/store/postgres) inside a transaction
 * of the datastore contract (src/store/contract.ts).
 */
export interface GraphEventStore {
  /**
   * Appends events with consecutive revisions and returns the last revision. When `expectedHead` is
   * given and the log's head is not that revision, nothing is written and `GraphHeadMoved` is thrown:
   * the caller catches up and validates again (optimistic concurrency between replicas).
   */
  append(events: GraphEvent[], actor: string, at: number, expectedHead?: number): Promise<number>;
  /** Events with `after < revision <= upTo`, in revision order. */
  read(after: number, upTo?: number): Promise<RecordedGraphEvent[]>;
  /**
   * Highest revision, 0 when empty. With `lock: 'share'` (see ReadLock) no append commits until the
   * calling transaction ends, and an append in flight is waited for: the answer, and every `read` made
   * after it in the transaction (also one sent together with it, after it), include every append that
   * will ever commit before this transaction does. A check of authority that must still hold at the
   * commit (the gateway's intent, a takeover, a renewal) reads the events since its graph's revision so.
   */
  head(options?: ReadLock): Promise<number>;
  /** The last revision recorded at or before `time` (0 if none). */
  revisionAt(time: number): Promise<number>;
}

export class GraphHeadMoved extends Error {
  constructor(readonly expected: number, readonly actual: number) {
    super(`graph head moved from ${expected} to ${actual}`);
    this.name = 'GraphHeadMoved';
  }
}
