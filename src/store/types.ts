import type { GraphEvent, RecordedGraphEvent } from '../graph/model.js';

/**
 * Storage ports. The domain talks to these interfaces only; `sqlite/` implements them on one SQLite
 * file, and a PostgreSQL backend (several gateway replicas) will implement the same interfaces.
 * Each domain folder that needs more storage defines its own repository interface next to it
 * (e.g. src/lease/repository.ts) and the backend implements it here.
 */

/** The graph's event log: the source of truth from which the in-memory graph is (re)built. */
export interface GraphEventLog {
  /**
   * Appends events atomically with consecutive revisions and returns the last revision.
   * When `expectedHead` is given and the log's head is not that revision, nothing is written and
   * `GraphHeadMoved` is thrown: the caller catches up and validates again (optimistic concurrency
   * between processes sharing the store).
   */
  append(events: GraphEvent[], actor: string, at: number, expectedHead?: number): number;
  /** Events with `after < revision <= upTo`, in revision order. */
  read(after: number, upTo?: number): RecordedGraphEvent[];
  /** Highest revision, 0 when empty. */
  head(): number;
  /** The last revision recorded at or before `time` (0 if none). */
  revisionAt(time: number): number;
}

export class GraphHeadMoved extends Error {
  constructor(readonly expected: number, readonly actual: number) {
    super(`graph head moved from ${expected} to ${actual}`);
    this.name = 'GraphHeadMoved';
  }
}

/** Remembers single-use ids (caller assertion `jti`, used decision ids) until they expire. */
export interface ReplayGuard {
  /**
   * True the first time an id is seen in `namespace`; false for every later call (until it expires),
   * and false for an id already expired at `now` (it could not be remembered, so it is never spent).
   */
  remember(namespace: string, id: string, expiresAt: number, now: number): boolean;
  /** Whether `remember` would refuse this id now (a read: it records nothing). */
  seen(namespace: string, id: string, now: number): boolean;
  /**
   * True the first time this process is shown the id (kept in memory until `expiresAt`), false after:
   * closes the window between verifying a single-use id and spending it durably with the request's
   * effect, for a replay that reaches the same process. Across processes the durable row decides.
   */
  present(namespace: string, id: string, expiresAt: number, now: number): boolean;
  /** Drops the in-memory mark of `present` (once the id was spent, or its spend failed). */
  forget(namespace: string, id: string): void;
}

/** A declared incident (while active, preempts edges may be used). Times in ms. */
export interface IncidentRecord {
  id: string;
  declared_by: string;
  reason: string;
  decision_id: string;
  declared_at: number;
  ends_at: number;
  resolved_at: number | null;
}

export interface IncidentRepository {
  /** False when an incident with that id already exists. */
  declare(incident: Omit<IncidentRecord, 'resolved_at'>): boolean;
  get(id: string): IncidentRecord | undefined;
  resolve(id: string, at: number): void;
  active(now: number): IncidentRecord[];
}

/** The decisions (claims) each lease was taken with, so renewals can re-check their authority. */
export interface LeaseAuthorityRepository {
  record(leaseId: string, holder: string, decisions: unknown[], at: number): void;
  get(leaseId: string): { holder: string; decisions: unknown[] } | undefined;
}
