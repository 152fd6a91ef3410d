import type { DecisionClaims } from '../../decision/index.js';
import type { LeaseAuthorityRepository } from '../../lease/repository.js';
import type { SqliteDatabase } from './database.js';

export class SqliteLeaseAuthorityRepository implements LeaseAuthorityRepository {
  private readonly insert;
  private readonly select;
  private readonly selectHolder;

  constructor(db: SqliteDatabase) {
    this.insert = db.prepare('INSERT INTO lease_authority (lease_id, holder, decisions, created_at) VALUES (?, ?, ?, ?)');
    this.select = db.prepare('SELECT holder, decisions FROM lease_authority WHERE lease_id = ?');
    this.selectHolder = db.prepare('SELECT holder FROM lease_authority WHERE lease_id = ?').pluck();
  }

  async record(leaseId: string, holder: string, decisions: DecisionClaims[], at: number): Promise<void> {
    this.insert.run(leaseId, holder, JSON.stringify(decisions), at);
  }

  async get(leaseId: string): Promise<{ holder: string; decisions: DecisionClaims[] } | undefined> {
    const row = this.select.get(leaseId) as { holder: string; decisions: string } | undefined;
    return row ? { holder: row.holder, decisions: JSON.parse(row.decisions) as DecisionClaims[] } : undefined;
  }

  async holderOf(leaseId: string): Promise<string | undefined> {
    return this.selectHolder.get(leaseId) as string | undefined;
  }
}
