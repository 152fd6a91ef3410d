import type { DecisionClaims } from '../../decision/decision-claims.js';
import type { LeaseAuthorityRepository } from '../../lease/repository.js';
import type { Sql } from './session.js';

export class PostgresLeaseAuthorityRepository implements LeaseAuthorityRepository {
  constructor(private readonly sql: Sql) {}

  /** Deferred where it can be (Sql.defer): nothing reads its answer, and a duplicate id fails the transaction either way. */
  async record(leaseId: string, holder: string, decisions: DecisionClaims[], at: number): Promise<void> {
    const text = 'INSERT INTO lease_authority (lease_id, holder, decisions, created_at) VALUES ($1, $2, $3::jsonb, $4)';
    const values = [leaseId, holder, JSON.stringify(decisions), at];
    if (this.sql.deferring) this.sql.defer(text, values);
    else await this.sql.query(text, values);
  }

  async get(leaseId: string): Promise<{ holder: string; decisions: DecisionClaims[] } | undefined> {
    const [row] = await this.sql.query<{ holder: string; decisions: DecisionClaims[] }>('SELECT holder, decisions FROM lease_authority WHERE lease_id = $1', [leaseId]);
    return row;
  }

  async holderOf(leaseId: string): Promise<string | undefined> {
    const [row] = await this.sql.query<{ holder: string }>('SELECT holder FROM lease_authority WHERE lease_id = $1', [leaseId]);
    return row?.holder;
  }
}
