import type { GraphEvent, RecordedGraphEvent } from '../../graph/model.js';
import { GraphHeadMoved, type GraphEventStore } from '../../graph/event-store.js';
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

  constructor(private readonly db: SqliteDatabase) {
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

  async head(): Promise<number> {
    return this.headStmt.get() as number;
  }

  async revisionAt(time: number): Promise<number> {
    return this.atStmt.get(time) as number;
  }
}
