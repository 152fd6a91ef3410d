import type { ReplayGuard } from '../types.js';
import type { SqliteDatabase } from './database.js';

export class SqliteReplayGuard implements ReplayGuard {
  private readonly insert;
  private readonly purge;
  private readonly live;
  private lastPurge = 0;
  /** Ids shown to this process, in arrival order, with their expiry (ms). */
  private readonly presented = new Map<string, number>();

  constructor(db: SqliteDatabase) {
    // A conflicting live row makes this a no-op (changes = 0); an expired one is replaced.
    this.insert = db.prepare(`
      INSERT INTO seen_ids (namespace, id, expires_at) VALUES (?, ?, ?)
      ON CONFLICT (namespace, id) DO UPDATE SET expires_at = excluded.expires_at
      WHERE seen_ids.expires_at <= ?`);
    this.purge = db.prepare('DELETE FROM seen_ids WHERE expires_at <= ?');
    this.live = db.prepare('SELECT 1 FROM seen_ids WHERE namespace = ? AND id = ? AND expires_at > ?').pluck();
  }

  remember(namespace: string, id: string, expiresAt: number, now: number): boolean {
    if (now - this.lastPurge > 60_000) {
      this.purge.run(now);
      this.lastPurge = now;
    }
    // An expired id cannot be remembered: spending it late would let a second late spend succeed too.
    if (expiresAt <= now) return false;
    return this.insert.run(namespace, id, expiresAt, now).changes === 1;
  }

  seen(namespace: string, id: string, now: number): boolean {
    return this.live.get(namespace, id, now) !== undefined;
  }

  present(namespace: string, id: string, expiresAt: number, now: number): boolean {
    // Oldest first: entries share one maximum lifetime, so the expired ones are mostly at the front.
    for (const [key, until] of this.presented) {
      if (until > now) break;
      this.presented.delete(key);
    }
    const key = presentedKey(namespace, id);
    const until = this.presented.get(key);
    if (until !== undefined && until > now) return false;
    this.presented.delete(key);
    this.presented.set(key, expiresAt);
    return true;
  }

  forget(namespace: string, id: string): void {
    this.presented.delete(presentedKey(namespace, id));
  }
}

const presentedKey = (namespace: string, id: string) => `${namespace}\u0000${id}`;
