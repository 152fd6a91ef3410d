import type { SingleUseStore, SpendRefusal } from '../../decision/single-use.js';
import type { Sql } from './session.js';

/**
 * Single-use ids on PostgreSQL, spent once across every replica. An id counts as expired once it is past
 * by the caller's clock or by the database's (the later of the two): refusing more is safe, and the
 * purge (SingleUsePurge) deletes only ids past by the database's clock, so a replica with a fast clock
 * cannot delete an id that a replica with a slow clock would still accept and spend a second time.
 */
export class PostgresSingleUseStore implements SingleUseStore {
  constructor(
    private readonly sql: Sql,
    private readonly purge: SingleUsePurge,
  ) {}

  async spend(namespace: string, id: string, expiresAt: number, now: number): Promise<boolean> {
    return (await this.spendOrWhy(namespace, id, expiresAt, now)) === null;
  }

  /**
   * Spends the id, or says why not (null: spent now). A spend costs what it did (one statement); only a
   * refusal reads the database's clock after it, to tell an id expired by that clock (a replica whose
   * clock is behind the database's) from one spent already. An id still live at the refusal and expired
   * by that read, a moment later, is called expired: it is, by then. (A statement that read the clock
   * once for both cost every spend about 15 µs more in the database: bench/RESULTS.md.)
   */
  private async spendOrWhy(namespace: string, id: string, expiresAt: number, now: number): Promise<SpendRefusal | null> {
    if (expiresAt <= now) return { reason: 'expired', storeNow: now };
    this.purge.due(now);
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
    if (rows.length === 1) return null;
    const [clock] = await this.sql.query<{ db_now: number }>('SELECT writ_now_ms() AS db_now');
    return expiresAt <= clock!.db_now ? { reason: 'expired', storeNow: clock!.db_now } : { reason: 'spent' };
  }

  /**
   * Deferred (Sql.defer: sent with the next statement or the COMMIT), so a refusal must fail: the id's
   * expired row is deleted, then a plain INSERT meets a live row's primary key (unique violation), and
   * an id already past by the database's clock is inserted with a NULL expiry (not-null violation).
   * Either fails the transaction, which the store then runs again without deferring, where `spend`
   * answers and the refusal is thrown.
   */
  async spendOrRefuse(namespace: string, id: string, expiresAt: number, now: number, refusal: (why: SpendRefusal) => Error): Promise<void> {
    if (!this.sql.deferring) {
      const why = await this.spendOrWhy(namespace, id, expiresAt, now);
      if (why) throw refusal(why);
      return;
    }
    if (expiresAt <= now) throw refusal({ reason: 'expired', storeNow: now });
    this.purge.due(now);
    this.sql.defer('DELETE FROM single_use_ids WHERE namespace = $1 AND id = $2 AND expires_at <= greatest($3::bigint, writ_now_ms())', [namespace, storedId(id), now]);
    this.sql.defer(
      'INSERT INTO single_use_ids (namespace, id, expires_at) VALUES ($1, $2, CASE WHEN $3::bigint > greatest($4::bigint, writ_now_ms()) THEN $3::bigint END)',
      [namespace, storedId(id), expiresAt, now],
    );
  }

  async isSpent(namespace: string, id: string, now: number): Promise<boolean> {
    const rows = await this.sql.query(
      'SELECT 1 FROM single_use_ids WHERE namespace = $1 AND id = $2 AND expires_at > greatest($3::bigint, writ_now_ms())',
      [namespace, storedId(id), now],
    );
    return rows.length > 0;
  }

  /** One statement, as `isSpent`: the database's clock comes back with the answer, no round trip of its own. */
  async wouldRefuse(namespace: string, id: string, expiresAt: number, now: number): Promise<SpendRefusal | null> {
    const [row] = await this.sql.query<{ db_now: number | string; spent: boolean }>(
      `SELECT writ_now_ms() AS db_now,
              EXISTS (SELECT 1 FROM single_use_ids WHERE namespace = $1 AND id = $2 AND expires_at > greatest($3::bigint, writ_now_ms())) AS spent`,
      [namespace, storedId(id), now],
    );
    const storeNow = Math.max(now, Number(row!.db_now));
    if (expiresAt <= storeNow) return { reason: 'expired', storeNow };
    return row!.spent ? { reason: 'spent' } : null;
  }
}

/**
 * PostgreSQL text cannot hold NUL, which single-use ids may contain (Writ scopes a caller's jti by
 * principal with a NUL between them): NUL and the escape character are escaped, one to one, so two
 * different ids never share a row.
 */
export const storedId = (id: string): string => id.replace(/\\/g, '\\\\').replace(/\u0000/g, '\\0');

/** A purge runs at most this often per process, started by a spend (an idle replica sends nothing). */
const PURGE_EVERY_MS = 1_000;
/** Rows one purge statement deletes at most; a full bite is followed by the next one at once. */
const PURGE_BATCH = 1_000;
/**
 * Ids are deleted this long after they expired by the database's clock: an id past that clock is never
 * spent again (`spend` refuses it), so only a database clock stepped back by more than this could make
 * a deleted id spendable again.
 */
const PURGE_GRACE_MS = 10_000;

/**
 * One statement, a transaction of its own: the oldest expired ids by the expiry index, skipping rows
 * that another transaction holds (a replica's purge, or a spend replacing an expired id), so replicas
 * purging at once share the work and nobody waits on a purge's row locks for longer than one bite.
 */
const PURGE_SQL = `DELETE FROM single_use_ids WHERE (namespace, id) IN (
  SELECT namespace, id FROM single_use_ids WHERE expires_at <= writ_now_ms() - ${PURGE_GRACE_MS}
  ORDER BY expires_at LIMIT ${PURGE_BATCH} FOR UPDATE SKIP LOCKED)`;

/**
 * Deletes expired single-use ids in the background, on a connection of the store's pool (one bite at a
 * time), never inside a request's transaction. Until 2026-12-03 one DELETE of every expired id rode one request's COMMIT once
 * a minute: that request waited for it, and replicas purging in the same minute waited on each other's
 * row locks. A spend calls `due`; at most every PURGE_EVERY_MS that starts a run of bites of
 * PURGE_BATCH rows, one after the other while they come back full. Only housekeeping: an expired row
 * is never honoured, and the next spend of its id replaces it anyway. A failed bite (the database
 * unreachable) ends the run; the next due spend starts another.
 */
export class SingleUsePurge {
  private last = Number.NEGATIVE_INFINITY;
  private running: Promise<void> | null = null;
  private closed = false;
  /** Bites that succeeded, ids deleted, runs ended by a failed bite (the store's stats; nothing decides on them). */
  readonly counts = { bites: 0, deleted: 0, failures: 0 };

  /** `deleteBite` runs one statement in a transaction of its own and answers the rows it deleted. */
  constructor(private readonly deleteBite: (text: string) => Promise<number>) {}

  /** Told by every spend with its clock; starts a purge when one is due and none is running. */
  due(now: number): void {
    // A clock that went back (now < last) counts as due: pacing must not stop until it catches up.
    if (this.closed || this.running !== null || (now >= this.last && now - this.last < PURGE_EVERY_MS)) return;
    this.last = now;
    this.running = this.run().finally(() => (this.running = null));
  }

  private async run(): Promise<void> {
    try {
      for (;;) {
        const deleted = await this.deleteBite(PURGE_SQL);
        this.counts.bites += 1;
        this.counts.deleted += deleted;
        if (deleted < PURGE_BATCH || this.closed) return;
      }
    } catch {
      this.counts.failures += 1;
    }
  }

  /** The purge running now, if any, to its end (then none starts). */
  async close(): Promise<void> {
    this.closed = true;
    await this.running;
  }

  /** Settles once the purge running now (if any) has ended: for tests and the benchmark. */
  async idle(): Promise<void> {
    await this.running;
  }
}
