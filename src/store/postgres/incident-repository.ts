import type { IncidentRecord, IncidentRepository } from '../../lease/repository.js';
import type { ReadLock } from '../../transactions.js';
import type { Sql } from './session.js';

const COLUMNS = 'id, declared_by, reason, decision_id, environment, declared_at, ends_at, resolved_at';

export class PostgresIncidentRepository implements IncidentRepository {
  constructor(private readonly sql: Sql) {}

  async declare(i: Omit<IncidentRecord, 'resolved_at'>): Promise<boolean> {
    const rows = await this.sql.query(
      `INSERT INTO incidents (id, declared_by, reason, decision_id, environment, declared_at, ends_at) VALUES ($1, $2, $3, $4, $5, $6, $7)
       ON CONFLICT (id) DO NOTHING RETURNING 1`,
      [i.id, i.declared_by, i.reason, i.decision_id, i.environment, i.declared_at, i.ends_at],
    );
    return rows.length === 1;
  }

  async get(id: string): Promise<IncidentRecord | undefined> {
    const [row] = await this.sql.query<IncidentRecord>(`SELECT ${COLUMNS} FROM incidents WHERE id = $1`, [id]);
    return row;
  }

  async resolve(id: string, at: number): Promise<void> {
    await this.sql.query('UPDATE incidents SET resolved_at = $1 WHERE id = $2 AND resolved_at IS NULL', [at, id]);
  }

  /**
   * `lock: 'share'`: FOR SHARE, which a resolve's UPDATE conflicts with. A resolve not yet committed is
   * waited for, and the row is then judged again as that resolve left it (gone from the answer).
   */
  async active(now: number, options: ReadLock = {}): Promise<IncidentRecord[]> {
    const lock = options.lock === 'share' ? ' FOR SHARE' : '';
    return this.sql.query<IncidentRecord>(`SELECT ${COLUMNS} FROM incidents WHERE resolved_at IS NULL AND ends_at > $1 ORDER BY declared_at, id${lock}`, [now]);
  }
}
