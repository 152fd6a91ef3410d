import { GraphHeadMoved, type GraphEventStore } from '../../graph/event-store.js';
import type { GraphEvent, RecordedGraphEvent } from '../../graph/model.js';
import type { ReadLock } from '../../transactions.js';
import type { Sql } from './session.js';
import { linkGraphEvents, type GraphChainHead, type GraphEventRow, type GraphLogChain } from '../../audit/graph-chain.js';

/** Where replicas LISTEN for new graph revisions (the payload is the new head). */
export const GRAPH_CHANNEL = 'writ_graph';

/**
 * The transaction-level advisory lock on appending to the graph log: exclusive for an append, shared
 * for a `head({ lock: 'share' })`. Not a row lock on graph_head (FOR SHARE): a share lock on a row lets
 * newcomers in while an UPDATE waits, so under a steady stream of gateway writes an append (a
 * revocation) waited seconds, up to lock_timeout (measured: 8 sessions re-locking every 2 ms held an
 * append back up to 3.5 s; with this lock, whose waiters queue in order, 2 to 14 ms).
 */
export const GRAPH_LOG_LOCK = 0x77726967; // 'wrig'

interface Row {
  revision: number;
  at: number;
  actor: string;
  payload: string;
}

/**
 * The graph event log on PostgreSQL. Appenders of every replica take GRAPH_LOG_LOCK and move one head
 * row (graph_head) with a conditional UPDATE that locks it, so revisions are consecutive and never handed out twice, and an
 * `expectedHead` that is no longer the head (re-checked on the latest row version after waiting for the
 * lock) writes nothing. The append also NOTIFYs `writ_graph` with the new head, delivered at commit.
 */
export class PostgresGraphEventStore implements GraphEventStore, GraphLogChain {
  constructor(private readonly sql: Sql) {}

  async append(events: GraphEvent[], actor: string, at: number, expectedHead?: number): Promise<number> {
    // The lock goes in the same message as the UPDATE, before it.
    const [, [moved]] = await Promise.all([
      this.sql.query('SELECT pg_advisory_xact_lock($1)', [GRAPH_LOG_LOCK]),
      this.sql.query<{ revision: number; hashed: number; hash: string }>(
        'UPDATE graph_head SET revision = revision + $1 WHERE $2::bigint IS NULL OR revision = $2 RETURNING revision, hashed, hash',
        [events.length, expectedHead ?? null],
      ),
    ]);
    if (!moved) {
      const actual = await this.head();
      throw new GraphHeadMoved(expectedHead!, actual);
    }
    const head = moved.revision;
    if (events.length === 0) return head;
    const first = head - events.length;
    // The chain's head is graph_head's (its hash read with the lock, no read of the log), unless a replica
    // from before the chain appended meanwhile (a rolling upgrade): its events are hashed first.
    let prev = moved.hash;
    if (moved.hashed < first) {
      const unhashed = await this.sql.query<GraphEventRow>(
        'SELECT revision, at, actor, type, payload, hash FROM graph_events WHERE revision > $1 AND revision <= $2 ORDER BY revision', [moved.hashed, first]);
      prev = linkGraphEvents(prev, unhashed);
      await this.sql.query(
        'UPDATE graph_events e SET hash = u.hash FROM unnest($1::bigint[], $2::text[]) AS u (revision, hash) WHERE e.revision = u.revision AND e.hash IS NULL',
        [unhashed.map((r) => r.revision), unhashed.map((r) => r.hash)],
      );
    }
    const rows = events.map((e, i) => ({ revision: first + 1 + i, at, actor, type: e.type, payload: JSON.stringify(e), hash: null as string | null }));
    const hash = linkGraphEvents(prev, rows);
    await this.sql.query(
      `WITH ins AS (
         INSERT INTO graph_events (revision, at, actor, type, payload, hash)
         SELECT $1::bigint + u.n, $2, $3, u.type, u.payload, u.hash FROM unnest($4::text[], $5::text[], $7::text[]) WITH ORDINALITY AS u (type, payload, hash, n)),
       chain AS (UPDATE graph_head SET hashed = $1::bigint + $6, hash = $8)
       SELECT pg_notify('${GRAPH_CHANNEL}', ($1::bigint + $6)::text)`,
      [first, at, actor, rows.map((r) => r.type), rows.map((r) => r.payload), events.length, rows.map((r) => r.hash), hash],
    );
    return head;
  }

  async read(after: number, upTo?: number): Promise<RecordedGraphEvent[]> {
    const rows = await this.sql.query<Row>(
      'SELECT revision, at, actor, payload FROM graph_events WHERE revision > $1 AND ($2::bigint IS NULL OR revision <= $2) ORDER BY revision',
      [after, upTo ?? null],
    );
    return rows.map((r) => ({ revision: r.revision, at: r.at, actor: r.actor, event: JSON.parse(r.payload) as GraphEvent }));
  }

  /**
   * `lock: 'share'`: the shared GRAPH_LOG_LOCK, then the head as a statement of its own, whose snapshot
   * (READ COMMITTED: one per statement) is taken once the lock is held, so it sees an append that was
   * in flight; so does any statement sent after it.
   */
  async head(options: ReadLock = {}): Promise<number> {
    if (options.lock === 'share') {
      const [, [locked]] = await Promise.all([
        this.sql.query('SELECT pg_advisory_xact_lock_shared($1)', [GRAPH_LOG_LOCK]),
        this.sql.query<{ revision: number }>('SELECT revision FROM graph_head'),
      ]);
      return locked!.revision;
    }
    const [row] = await this.sql.query<{ revision: number }>('SELECT revision FROM graph_head');
    return row!.revision;
  }

  async chainHead(): Promise<GraphChainHead> {
    const [row] = await this.sql.query<GraphChainHead>('SELECT revision, hashed, hash FROM graph_head');
    return row!;
  }

  async rowsAfter(after: number, limit: number): Promise<GraphEventRow[]> {
    return this.sql.query<GraphEventRow>('SELECT revision, at, actor, type, payload, hash FROM graph_events WHERE revision > $1 ORDER BY revision LIMIT $2', [after, limit]);
  }

  async revisionAt(time: number): Promise<number> {
    const [row] = await this.sql.query<{ revision: number }>('SELECT coalesce(max(revision), 0) AS revision FROM graph_events WHERE at <= $1', [time]);
    return row!.revision;
  }
}
