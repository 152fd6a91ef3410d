import type { SingleUseStore } from '../../decision/single-use.js';
import type { Sql } from './session.js';

/** Expired ids are deleted at most this often per process (inside a spend), so the table holds only live ones. */
const PURGE_EVERY_MS = 60_000;

/**
 * Single-use ids on PostgreSQL, spent once across every replica. An id counts as expired once it is past
 * by the caller's clock or by the database's (the later of the two): refusing more is safe, and the
 * purge deletes only ids past by the database's clock, so a replica with a fast clock cannot delete an
 * id that a replica with a slow clock would still accept and spend a second time.
 */
export class PostgresSingleUseStore implements SingleUseStore {
  constructor(
    private readonly sql: Sql,
    private readonly purge: PurgeSchedule,
  ) {}

  async spend(namespace: string, id: string, expiresAt: number, now: number): Promise<boolean> {
    if (expiresAt <= now) return false;
    await this.purgeIfDue(now);
    // A live row makes this a no-op (no row returned); an expired one is replaced; an id already
    // expired is never inserted (spending it late would let a second late spend succeed too).
    const rows = await this.sql.query(
      `INSERT INTO single_use_ids AS s (namespace, id, expires_at)
       SELECT $1, $2, $3 WHERE $3 > greatest($4::bigint, writ_now_ms())
       ON CONFLICT (namespace, id) DO UPDATE SET expires_at = excluded.expires_at
       WHERE s.expires_at <= greatest($4::bigint, writ_now_ms())
       RETURNING 1`,
      [namespace, storedId(id), expiresAt, now],
    );
    return rows.length === 1;
  }

  /**
   * Deferred (Sql.defer: sent with the next statement or the COMMIT), so a refusal must fail: the id's
   * expired row is deleted, then a plain INSERT meets a live row's primary key (unique violation), and
   * an id already past by the database's clock is inserted with a NULL expiry (not-null violation).
   * Either fails the transaction, which the store then runs again without deferring, where `spend`
   * answers and the refusal is thrown.
   */
  async spendOrRefuse(namespace: string, id: string, expiresAt: number, now: number, refusal: () => Error): Promise<void> {
    if (!this.sql.deferring) {
      if (!(await this.spend(namespace, id, expiresAt, now))) throw refusal();
      return;
    }
    if (expiresAt <= now) throw refusal();
    await this.purgeIfDue(now);
    this.sql.defer('DELETE FROM single_use_ids WHERE namespace = $1 AND id = $2 AND expires_at <= greatest($3::bigint, writ_now_ms())', [namespace, storedId(id), now]);
    this.sql.defer(
      'INSERT INTO single_use_ids (namespace, id, expires_at) VALUES ($1, $2, CASE WHEN $3::bigint > greatest($4::bigint, writ_now_ms()) THEN $3::bigint END)',
      [namespace, storedId(id), expiresAt, now],
    );
  }

  /** Deletes expired ids (by the database's clock) when this process's schedule says so; nobody reads the answer. */
  private async purgeIfDue(now: number): Promise<void> {
    if (!this.purge.due(now)) return;
    const purge = 'DELETE FROM single_use_ids WHERE expires_at <= writ_now_ms()';
    if (this.sql.deferring) this.sql.defer(purge);
    else await this.sql.query(purge);
  }

  async isSpent(namespace: string, id: string, now: number): Promise<boolean> {
    const rows = await this.sql.query(
      'SELECT 1 FROM single_use_ids WHERE namespace = $1 AND id = $2 AND expires_at > greatest($3::bigint, writ_now_ms())',
      [namespace, storedId(id), now],
    );
    return rows.length > 0;
  }
}

/**
 * PostgreSQL text cannot hold NUL, which single-use ids may contain (Writ scopes a caller's jti by
 * principal with a NUL between them): NUL and the escape character are escaped, one to one, so two
 * different ids never share a row.
 */
const storedId = (id: string) => id.replace(/\\/g, '\\\\').replace(/\u0000/g, '\\0');

/** When this process last purged (shared by every transaction of one store). */
export class PurgeSchedule {
  private last = Number.NEGATIVE_INFINITY;

  due(now: number): boolean {
    if (now - this.last <= PURGE_EVERY_MS) return false;
    this.last = now;
    return true;
  }
}
