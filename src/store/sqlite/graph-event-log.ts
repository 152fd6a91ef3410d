import type { GraphEvent, RecordedGraphEvent } from '../../graph/model.js';
import { GraphHeadMoved, type GraphEventStore } from '../../graph/event-store.js';
import type { Statement } from 'better-sqlite3';
import type { ReadLock } from '../../transactions.js';
import { GENESIS_HASH } from '../../audit/hash-chain.js';
import { linkGraphEvents, type GraphChainHead, type GraphEventRow, type GraphLogChain } from '../../audit/graph-chain.js';
import type { SqliteDatabase } from './database.js';
import { WalSync } from './wal-sync.js';

/**
 * Hashes the events after the chain's head that have none (all of them at migration 20; afterwards those
 * a Writ from before it appended meanwhile) and moves the head: inside the caller's write transaction.
 */
export function catchUpGraphChain(db: SqliteDatabase): { revision: number; hash: string } {
  const head = db.prepare('SELECT revision, hash FROM graph_chain_head').get() as { revision: number; hash: string };
  const rows = db.prepare('SELECT revision, at, actor, type, payload, hash FROM graph_events WHERE revision > ? ORDER BY revision').all(head.revision) as GraphEventRow[];
  if (rows.length === 0) return head;
  const hash = linkGraphEvents(head.hash, rows);
  const fill = db.prepare('UPDATE graph_events SET hash = ? WHERE revision = ? AND hash IS NULL');
  for (const r of rows) fill.run(r.hash, r.revision);
  const last = rows[rows.length - 1]!.revision;
  db.prepare('UPDATE graph_chain_head SET revision = ?, hash = ?').run(last, hash);
  return { revision: last, hash };
}

interface Row {
  revision: number;
  at: number;
  actor: string;
  payload: string;
}

export class SqliteGraphEventStore implements GraphEventStore, GraphLogChain {
  private readonly headStmt;
  private readonly readStmt;
  private readonly readUpToStmt;
  private readonly atStmt;
  /** Prepared on first use: the store may be opened on a file from before migration 20. */
  private chainStmts: { head: Statement; insert: Statement; move: Statement; rows: Statement } | undefined;
  /** The head as last read, and the change tag read just before that query. */
  private cachedHead = 0;
  private cachedTag: string | null = null;
  /**
   * On the write connection: an append ran since the last commit the store told of (`committed`); its
   * rows may be uncommitted (or rolled back) while the tag has not moved, so the head is not cached.
   */
  private appended = false;

  /**
   * `changeTag`: a value that changes whenever any connection commits to the file (the WAL-index
   * header, see WalSync): `head()` queries the log only when it moved, or (the write connection, which
   * sees its own uncommitted appends) when this store appended since its last commit.
   */
  constructor(
    private readonly db: SqliteDatabase,
    private readonly changeTag?: () => string | null,
  ) {
    this.headStmt = db.prepare('SELECT COALESCE(MAX(revision), 0) AS head FROM graph_events').pluck();
    this.readStmt = db.prepare('SELECT revision, at, actor, payload FROM graph_events WHERE revision > ? ORDER BY revision');
    this.readUpToStmt = db.prepare('SELECT revision, at, actor, payload FROM graph_events WHERE revision > ? AND revision <= ? ORDER BY revision');
    this.atStmt = db.prepare('SELECT COALESCE(MAX(revision), 0) FROM graph_events WHERE at <= ?').pluck();
  }

  async append(events: GraphEvent[], actor: string, at: number, expectedHead?: number): Promise<number> {
    this.appended = true;
    this.cachedTag = null;
    const tx = this.db.transaction(() => {
      let head = this.headStmt.get() as number;
      if (expectedHead !== undefined && head !== expectedHead) throw new GraphHeadMoved(expectedHead, head);
      if (events.length === 0) return head;
      const s = this.chain;
      let chain = s.head.get() as { revision: number; hash: string };
      // Events a Writ from before the chain appended meanwhile are hashed first (a rolling upgrade).
      if (chain.revision < head) chain = catchUpGraphChain(this.db);
      const rows = events.map((e, i) => ({ revision: head + 1 + i, at, actor, type: e.type, payload: JSON.stringify(e), hash: null as string | null }));
      const hash = linkGraphEvents(chain.hash, rows);
      for (const r of rows) s.insert.run(r.revision, r.at, r.actor, r.type, r.payload, r.hash);
      head += events.length;
      s.move.run(head, hash);
      return head;
    });
    return tx.immediate();
  }

  async read(after: number, upTo?: number): Promise<RecordedGraphEvent[]> {
    // Nothing after the head: known without a query when the cached head still holds (see head()).
    if (this.changeTag && !this.appended && after >= this.cachedHead && this.cachedTag !== null && this.changeTag() === this.cachedTag) return [];
    const rows = (upTo === undefined ? this.readStmt.all(after) : this.readUpToStmt.all(after, upTo)) as Row[];
    return rows.map((r) => ({ revision: r.revision, at: r.at, actor: r.actor, event: JSON.parse(r.payload) as GraphEvent }));
  }

  /** `options.lock` needs nothing here: a write transaction keeps every other appender out until it ends. */
  async head(_options?: ReadLock): Promise<number> {
    if (!this.changeTag) return this.headStmt.get() as number;
    // The tag before the query: a commit between the two leaves a newer tag, and the next call asks again.
    const tag = this.changeTag();
    if (tag !== null && tag === this.cachedTag) return this.cachedHead;
    const head = this.headStmt.get() as number;
    if (this.appended) return head;
    this.cachedHead = head;
    this.cachedTag = tag;
    return head;
  }

  /**
   * A transaction of this process's write connection committed, taking the file from `before` to
   * `after` (WAL-index headers: `before` read under its write lock before it wrote, `after` right after
   * its COMMIT). `graphUnchanged`: it appended no graph event. If no other connection committed in
   * between (WalSync.oneCommitBetween), the head cached at `before` is still the head at `after`: kept,
   * so a request's own commits (a spent id, a lease) cost no head query on the next request. Another
   * process's commit in between, before or after, leaves a tag no cache holds: the next head() asks the log.
   */
  committed(before: string | null, after: string | null, graphUnchanged: boolean): void {
    if (graphUnchanged && before !== null && before === this.cachedTag && WalSync.oneCommitBetween(before, after)) this.cachedTag = after;
  }

  /** On the write connection: whether an append ran since the last call (and forgets it): the commit that just ended holds it. */
  takeAppended(): boolean {
    const appended = this.appended;
    this.appended = false;
    return appended;
  }

  async revisionAt(time: number): Promise<number> {
    return this.atStmt.get(time) as number;
  }

  async chainHead(): Promise<GraphChainHead> {
    const chain = (this.chain.head.get() as { revision: number; hash: string } | undefined) ?? { revision: 0, hash: GENESIS_HASH };
    return { revision: this.headStmt.get() as number, hashed: chain.revision, hash: chain.hash };
  }

  async rowsAfter(after: number, limit: number): Promise<GraphEventRow[]> {
    return this.chain.rows.all(after, limit) as GraphEventRow[];
  }

  private get chain() {
    return (this.chainStmts ??= {
      head: this.db.prepare('SELECT revision, hash FROM graph_chain_head'),
      insert: this.db.prepare('INSERT INTO graph_events (revision, at, actor, type, payload, hash) VALUES (?, ?, ?, ?, ?, ?)'),
      move: this.db.prepare('UPDATE graph_chain_head SET revision = ?, hash = ?'),
      rows: this.db.prepare('SELECT revision, at, actor, type, payload, hash FROM graph_events WHERE revision > ? ORDER BY revision LIMIT ?'),
    });
  }
}
