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
  /** Highest revision, 0 when empty. */
  head(): Promise<number>;
  /** The last revision recorded at or before `time` (0 if none). */
  revisionAt(time: number): Promise<number>;
}

export class GraphHeadMoved extends Error {
  constructor(readonly expected: number, readonly actual: number) {
    super(`graph head moved from ${expected} to ${actual}`);
    this.name = 'GraphHeadMoved';
  }
}
