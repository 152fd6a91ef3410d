import type { IncidentRecord, IncidentRepository } from '../../lease/repository.js';
import type { ReadLock } from '../../transactions.js';
import type { SqliteDatabase } from './database.js';

const COLUMNS = 'id, declared_by, reason, decision_id, environment, declared_at, ends_at, resolved_at';

export class SqliteIncidentRepository implements IncidentRepository {
  private readonly s;

  constructor(db: SqliteDatabase) {
    this.s = {
      insert: db.prepare('INSERT INTO incidents (id, declared_by, reason, decision_id, environment, declared_at, ends_at) VALUES (@id, @declared_by, @reason, @decision_id, @environment, @declared_at, @ends_at) ON CONFLICT (id) DO NOTHING'),
      get: db.prepare(`SELECT ${COLUMNS} FROM incidents WHERE id = ?`),
      resolve: db.prepare('UPDATE incidents SET resolved_at = ? WHERE id = ? AND resolved_at IS NULL'),
      active: db.prepare(`SELECT ${COLUMNS} FROM incidents WHERE resolved_at IS NULL AND ends_at > ? ORDER BY declared_at, id`),
    };
  }

  async declare(incident: Omit<IncidentRecord, 'resolved_at'>): Promise<boolean> {
    return this.s.insert.run(incident).changes === 1;
  }

  async get(id: string): Promise<IncidentRecord | undefined> {
    return this.s.get.get(id) as IncidentRecord | undefined;
  }

  async resolve(id: string, at: number): Promise<void> {
    this.s.resolve.run(at, id);
  }

  /** `options.lock` needs nothing here: a write transaction keeps every other writer out until it ends. */
  async active(now: number, _options?: ReadLock): Promise<IncidentRecord[]> {
    return this.s.active.all(now) as IncidentRecord[];
  }
}
