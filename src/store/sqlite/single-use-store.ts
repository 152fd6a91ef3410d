import type { SingleUseStore, SpendRefusal } from '../../decision/single-use.js';
import type { SqliteDatabase } from './database.js';

/**
 * Expired ids are deleted in small bites inside the commits that spend new ones: at most PURGE_BATCH
 * rows, every PURGE_EVERY_MS (sooner while a bite comes back full). Until 2026-12-03 one statement
 * deleted everything expired once a minute, inside one request's commit on the event loop: at 3,200
 * decisions a second that was 175,441 rows in 482 ms, a stall of the whole server every minute. Under
 * the same load the bites took p99 4.4 ms and at most 7.4 ms, and kept up (bench/RESULTS.md, issue 10);
 * at full bites they can delete 100,000 ids a second. Only housekeeping: an expired row is never
 * honoured, and the next spend of its id replaces it anyway (`insert`).
 */
const PURGE_EVERY_MS = 100;
/**
 * Why a spend's clock is not enough: each request fixes its `now` when it starts and spends later, so a
 * purge run meanwhile by a later request (at a later `now`) could delete a row the earlier one still
 * counts as live, and its replay would then find no row and be spent again. So an id counts as expired
 * once it is past by the caller's clock or by the latest clock this store has seen (the later of the
 * two: refusing more is safe), as PostgreSQL's store does with the database's clock; and the purge only
 * deletes ids expired PURGE_GRACE_MS before that, for requests of other processes sharing the file.
 */
const PURGE_GRACE_MS = 10_000;
const PURGE_CATCH_UP_MS = 10;
const PURGE_BATCH = 1_000;

export class SqliteSingleUseStore implements SingleUseStore {
  private readonly insert;
  private readonly purge;
  private readonly live;
  private nextPurge = 0;
  /** The latest `now` any spend of this store was given. */
  private latestNow = Number.NEGATIVE_INFINITY;

  constructor(db: SqliteDatabase) {
    // A conflicting live row makes this a no-op (changes = 0); an expired one is replaced.
    this.insert = db.prepare(`
      INSERT INTO seen_ids (namespace, id, expires_at) VALUES (?, ?, ?)
      ON CONFLICT (namespace, id) DO UPDATE SET expires_at = excluded.expires_at
      WHERE seen_ids.expires_at <= ?`);
    // The oldest expired first, by the expiry index; each deleted by its primary key (a WITHOUT ROWID table).
    this.purge = db.prepare(`
      DELETE FROM seen_ids WHERE (namespace, id) IN (
        SELECT namespace, id FROM seen_ids WHERE expires_at <= ? ORDER BY expires_at LIMIT ${PURGE_BATCH})`);
    this.live = db.prepare('SELECT 1 FROM seen_ids WHERE namespace = ? AND id = ? AND expires_at > ?').pluck();
  }

  async spend(namespace: string, id: string, expiresAt: number, now: number): Promise<boolean> {
    return (await this.spendOrWhy(namespace, id, expiresAt, now)) === null;
  }

  async spendOrRefuse(namespace: string, id: string, expiresAt: number, now: number, refusal: (why: SpendRefusal) => Error): Promise<void> {
    const why = await this.spendOrWhy(namespace, id, expiresAt, now);
    if (why) throw refusal(why);
  }

  /** Spends the id, or says why not (null: spent now). */
  private async spendOrWhy(namespace: string, id: string, expiresAt: number, now: number): Promise<SpendRefusal | null> {
    if (now > this.latestNow) this.latestNow = now;
    // Scheduled on the latest clock too: it never goes back, so neither does the schedule.
    if (this.latestNow >= this.nextPurge) {
      const deleted = this.purge.run(this.latestNow - PURGE_GRACE_MS).changes;
      this.nextPurge = this.latestNow + (deleted === PURGE_BATCH ? PURGE_CATCH_UP_MS : PURGE_EVERY_MS);
    }
    // An expired id cannot be remembered: spending it late would let a second late spend succeed too.
    if (expiresAt <= this.latestNow) return { reason: 'expired', storeNow: this.latestNow };
    return this.insert.run(namespace, id, expiresAt, now).changes === 1 ? null : { reason: 'spent' };
  }

  async isSpent(namespace: string, id: string, now: number): Promise<boolean> {
    return this.live.get(namespace, id, now) !== undefined;
  }

  async wouldRefuse(namespace: string, id: string, expiresAt: number, now: number): Promise<SpendRefusal | null> {
    const storeNow = Math.max(now, this.latestNow);
    if (expiresAt <= storeNow) return { reason: 'expired', storeNow };
    return this.live.get(namespace, id, now) !== undefined ? { reason: 'spent' } : null;
  }
}
