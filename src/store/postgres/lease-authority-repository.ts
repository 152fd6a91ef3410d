import type { DecisionClaims } from '../../decision/decision-claims.js';
import type { LeaseAuthorityRepository } from '../../lease/repository.js';
import type { Sql } from './session.js';

export class PostgresLeaseAuthorityRepository implements LeaseAuthorityRepository {
  constructor(private readonly sql: Sql) {}

  async record(leaseId: string, holder: string, decisions: DecisionClaims[], at: number): Promise<void> {
    await this.sql.query('INSERT INTO lease_authority (lease_id, holder, decisions, created_at) VALUES ($1, $2, $3::jsonb, $4)', [
      leaseId,
      holder,
      JSON.stringify(decisions),
      at,
    ]);
  }

  async get(leaseId: string): Promise<{ holder: string; decisions: DecisionClaims[] } | undefined> {
    const [row] = await this.sql.query<{ holder: string; decisions: DecisionClaims[] }>('SELECT holder, decisions FROM lease_authority WHERE lease_id = $1', [leaseId]);
    return row;
  }
}
