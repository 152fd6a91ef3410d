import type { SingleUseStore } from '../../decision/single-use.js';
import type { SqliteDatabase } from './database.js';

export class SqliteSingleUseStore implements SingleUseStore {
  private readonly insert;
  private readonly purge;
  private readonly live;
  private lastPurge = 0;

  constructor(db: SqliteDatabase) {
    // A conflicting live row makes this a no-op (changes = 0); an expired one is replaced.
    this.insert = db.prepare(`
      INSERT INTO seen_ids (namespace, id, expires_at) VALUES (?, ?, ?)
      ON CONFLICT (namespace, id) DO UPDATE SET expires_at = excluded.expires_at
      WHERE seen_ids.expires_at <= ?`);
    this.purge = db.prepare('DELETE FROM seen_ids WHERE expires_at <= ?');
    this.live = db.prepare('SELECT 1 FROM seen_ids WHERE namespace = ? AND id = ? AND expires_at > ?').pluck();
  }

  async spend(namespace: string, id: string, expiresAt: number, now: number): Promise<boolean> {
    if (now - this.lastPurge > 60_000) {
      this.purge.run(now);
      this.lastPurge = now;
    }
    // An expired id cannot be remembered: spending it late would let a second late spend succeed too.
    if (expiresAt <= now) return false;
    return this.insert.run(namespace, id, expiresAt, now).changes === 1;
  }

  async spendOrRefuse(namespace: string, id: string, expiresAt: number, now: number, refusal: () => Error): Promise<void> {
    if (!(await this.spend(namespace, id, expiresAt, now))) throw refusal();
  }

  async isSpent(namespace: string, id: string, now: number): Promise<boolean> {
    return this.live.get(namespace, id, now) !== undefined;
  }
}
