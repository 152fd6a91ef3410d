import type { GraphEvent, RecordedGraphEvent } from '../../graph/model.js';
import { GraphHeadMoved, type GraphEventStore } from '../../graph/event-store.js';
import type { ReadLock } from '../../transactions.js';
import type { SqliteDatabase } from './database.js';

interface Row {
  revision: number;
  at: number;
  actor: string;
  payload: string;
}

export class SqliteGraphEventStore implements GraphEventStore {
  private readonly headStmt;
  private readonly insertStmt;
  private readonly readStmt;
  private readonly readUpToStmt;
  private readonly atStmt;
  /** The head as last read, and the change tag read just before that query. */
  private cachedHead = 0;
  private cachedTag: string | null = null;

  /**
   * `changeTag`: a value that changes whenever any connection commits to the file (the WAL-index
   * header, see WalSync): `head()` queries the log only when it moved. Only for a read connection:
   * the write connection sees its own uncommitted appends.
   */
  constructor(
    private readonly db: SqliteDatabase,
    private readonly changeTag?: () => string | null,
  ) {
    this.headStmt = db.prepare('SELECT COALESCE(MAX(revision), 0) AS head FROM graph_events').pluck();
    this.insertStmt = db.prepare('INSERT INTO graph_events (revision, at, actor, type, payload) VALUES (?, ?, ?, ?, ?)');
    this.readStmt = db.prepare('SELECT revision, at, actor, payload FROM graph_events WHERE revision > ? ORDER BY revision');
    this.readUpToStmt = db.prepare('SELECT revision, at, actor, payload FROM graph_events WHERE revision > ? AND revision <= ? ORDER BY revision');
    this.atStmt = db.prepare('SELECT COALESCE(MAX(revision), 0) FROM graph_events WHERE at <= ?').pluck();
  }

  async append(events: GraphEvent[], actor: string, at: number, expectedHead?: number): Promise<number> {
    const tx = this.db.transaction(() => {
      let head = this.headStmt.get() as number;
      if (expectedHead !== undefined && head !== expectedHead) throw new GraphHeadMoved(expectedHead, head);
      for (const e of events) {
        head += 1;
        this.insertStmt.run(head, at, actor, e.type, JSON.stringify(e));
      }
      return head;
    });
    return tx.immediate();
  }

  async read(after: number, upTo?: number): Promise<RecordedGraphEvent[]> {
    const rows = (upTo === undefined ? this.readStmt.all(after) : this.readUpToStmt.all(after, upTo)) as Row[];
    return rows.map((r) => ({ revision: r.revision, at: r.at, actor: r.actor, event: JSON.parse(r.payload) as GraphEvent }));
  }

  /** `options.lock` needs nothing here: a write transaction keeps every other appender out until it ends. */
  async head(_options?: ReadLock): Promise<number> {
    if (!this.changeTag) return this.headStmt.get() as number;
    // The tag before the query: a commit between the two leaves a newer tag, and the next call asks again.
    const tag = this.changeTag();
    if (tag !== null && tag === this.cachedTag) return this.cachedHead;
    this.cachedHead = this.headStmt.get() as number;
    this.cachedTag = tag;
    return this.cachedHead;
  }

  async revisionAt(time: number): Promise<number> {
    return this.atStmt.get(time) as number;
  }
}
