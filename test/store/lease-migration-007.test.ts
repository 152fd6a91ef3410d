import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { hashLeaseToken, LeaseManager } from '../../src/lease/index.js';
import { openDatabase } from '../../src/store/sqlite/database.js';
import { MIGRATIONS } from '../../src/store/sqlite/migrations/index.js';
import { sqliteStoreOn } from '../../src/store/sqlite/sqlite-store.js';

const dirs: string[] = [];
afterAll(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));

const A = 'seo-agent-7';
const B = 'content-agent-2';
const K1 = 'wp:post:1';
const K2 = 'wp:post:2';
// Tokens as issued before migration 007: 32 random bytes, base64url, lease ids unrelated to them.
const T1 = Buffer.alloc(32, 1).toString('base64url');
const T2 = Buffer.alloc(32, 2).toString('base64url');
const T3 = Buffer.alloc(32, 3).toString('base64url');

/** A file as a deployment that ran migrations 1-6 left it, with the rows the lease manager of that version wrote. */
function fileAtVersion6(now: number): string {
  const dir = mkdtempSync(join(tmpdir(), 'writ-migration-007-'));
  dirs.push(dir);
  const file = join(dir, 'writ.db');
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.exec('CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)');
  for (const m of MIGRATIONS.filter((x) => x.version <= 6)) {
    db.exec(m.sql);
    db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(m.version, m.name, now);
  }
  const key = db.prepare(`INSERT INTO lease_keys (key, epoch, lease_id, holder, token_hash, priority, acquired_at, renewed_at, expires_at,
    duration_ms, transitions, last_holder, prev_lease_id) VALUES (?, ?, ?, ?, ?, 0, ?, ?, ?, 60000, ?, ?, ?)`);
  const lease = db.prepare(`INSERT INTO leases (lease_id, holder, resources, epochs, token_hash, priority, state, created_at, renewed_at,
    expires_at, duration_ms, ended_at) VALUES (?, ?, ?, ?, ?, 0, ?, ?, ?, ?, 60000, ?)`);
  const event = db.prepare('INSERT INTO lease_history (at, event, key, epoch, lease_id, holder, actor) VALUES (?, ?, ?, ?, ?, ?, ?)');
  // lease_old1 (A, both keys, epoch 1 each) was released; lease_old2 (B, K1, epoch 2) is live; lease_old3 (A, K2, epoch 2) is live.
  lease.run('lease_old1', A, JSON.stringify([K1, K2]), JSON.stringify({ [K1]: 1, [K2]: 1 }), hashLeaseToken(T1), 'RELEASED', now - 9000, now - 9000, now + 51_000, now - 8000);
  lease.run('lease_old2', B, JSON.stringify([K1]), JSON.stringify({ [K1]: 2 }), hashLeaseToken(T2), 'ACTIVE', now - 5000, now - 5000, now + 55_000, null);
  lease.run('lease_old3', A, JSON.stringify([K2]), JSON.stringify({ [K2]: 2 }), hashLeaseToken(T3), 'ACTIVE', now - 4000, now - 4000, now + 56_000, null);
  key.run(K1, 2, 'lease_old2', B, hashLeaseToken(T2), now - 5000, now - 5000, now + 55_000, 1, B, 'lease_old1');
  key.run(K2, 2, 'lease_old3', A, hashLeaseToken(T3), now - 4000, now - 4000, now + 56_000, 0, A, 'lease_old1');
  event.run(now - 9000, 'ACQUIRE', K1, 1, 'lease_old1', A, null);
  event.run(now - 9000, 'ACQUIRE', K2, 1, 'lease_old1', A, null);
  event.run(now - 8000, 'RELEASE', K1, 1, 'lease_old1', A, null);
  event.run(now - 8000, 'RELEASE', K2, 1, 'lease_old1', A, null);
  event.run(now - 5000, 'ACQUIRE', K1, 2, 'lease_old2', B, null);
  event.run(now - 4000, 'ACQUIRE', K2, 2, 'lease_old3', A, null);
  db.close();
  return file;
}

describe('migration 007 (lease write path) on a file written by the previous version', () => {
  it('keeps every row, chains the history of each key, and the old tokens keep working', async () => {
    const clock = new ManualClock();
    const file = fileAtVersion6(clock.now());
    const db = openDatabase(file);
    const leases = new LeaseManager(sqliteStoreOn(db), clock);

    const names = db.prepare("SELECT name FROM sqlite_schema WHERE type IN ('index', 'trigger') AND tbl_name LIKE 'lease%' AND name NOT LIKE 'sqlite_%' ORDER BY name").pluck().all();
    // (The lease_epoch_bumps triggers and the epoch floor trigger come with migration 9, lease_keys_held_until with 21.)
    expect(names).toEqual([
      'lease_epoch_bumps_no_delete', 'lease_epoch_bumps_no_update', 'lease_history_chain', 'lease_history_lease', 'lease_keys_epoch_floor',
      'lease_keys_held_until', 'lease_keys_holder', 'lease_waiter_keys_ticket', 'lease_waiters_deadline',
    ]);
    expect(db.prepare("SELECT count(*) FROM sqlite_sequence WHERE name = 'lease_history'").pluck().get()).toBe(0);

    const all = await leases.history();
    expect(all.map((e) => [e.seq, e.event, e.key, e.epoch, e.lease_id])).toEqual([
      [1, 'ACQUIRE', K1, 1, 'lease_old1'],
      [2, 'ACQUIRE', K2, 1, 'lease_old1'],
      [3, 'RELEASE', K1, 1, 'lease_old1'],
      [4, 'RELEASE', K2, 1, 'lease_old1'],
      [5, 'ACQUIRE', K1, 2, 'lease_old2'],
      [6, 'ACQUIRE', K2, 2, 'lease_old3'],
    ]);
    expect(await leases.history({ key: K1 })).toEqual(all.filter((e) => e.key === K1));
    expect(await leases.history({ key: K2 })).toEqual(all.filter((e) => e.key === K2));
    expect(await leases.history({ leaseId: 'lease_old1', key: K2 })).toEqual([all[1], all[3]]);

    // Old tokens: the live one passes the fence, the released one is told it expired, by id they renew and release.
    expect(await leases.validateFence({ key: K1, token: T2, epoch: 2, principal: B })).toMatchObject({ lease_id: 'lease_old2', epoch: 2 });
    expect((await leases.validateFence({ key: K2, token: T1, epoch: 2, principal: A }).catch((e) => e)).code).toBe('LEASE_EXPIRED');
    expect((await leases.validateFence({ key: K1, token: T3, epoch: 2, principal: A }).catch((e) => e)).code).toBe('LEASE_TOKEN_MISMATCH');
    expect(await leases.list({ holder: A })).toMatchObject([{ key: K2, holderIdentity: A, epoch: 2, leaseTransitions: 0 }]);
    await leases.release('lease_old2', T2);
    expect((await leases.validateFence({ key: K1, token: T2, epoch: 2, principal: B }).catch((e) => e)).code).toBe('LEASE_EXPIRED');

    // New acquisitions continue the epochs, the seqs and each key's chain.
    const next = await leases.acquire({ resources: [K1], holder: A, priority: 0, ttlMs: 10_000 });
    expect(next.epochs).toEqual({ [K1]: 3 });
    expect(await leases.validateFence({ key: K1, token: next.token, epoch: 3, principal: A })).toMatchObject({ lease_id: next.lease_id });
    expect((await leases.history({ key: K1 })).map((e) => [e.seq, e.event, e.epoch])).toEqual([
      [1, 'ACQUIRE', 1],
      [3, 'RELEASE', 1],
      [5, 'ACQUIRE', 2],
      [7, 'RELEASE', 2],
      [8, 'ACQUIRE', 3],
    ]);
    expect((await leases.history({ key: K2 })).map((e) => e.seq)).toEqual([2, 4, 6]);
    db.close();
  });

  it('refuses a history row that would break its key\'s chain', () => {
    const clock = new ManualClock();
    const db = openDatabase(fileAtVersion6(clock.now()));
    const insert = db.prepare('INSERT INTO lease_history (at, event, key, epoch, lease_id, holder, actor, prev_seq) VALUES (0, ?, ?, 2, ?, ?, NULL, ?)');
    expect(() => insert.run('RELEASE', K1, 'lease_old2', B, 1)).toThrow(/prev_seq/);
    expect(() => insert.run('RELEASE', 'wp:post:unknown', 'lease_old2', B, null)).toThrow(/lease_keys/);
    // Without prev_seq (as a writer of the previous version inserts), the trigger links the row itself.
    insert.run('RELEASE', K1, 'lease_old2', B, null);
    expect(db.prepare('SELECT prev_seq FROM lease_history WHERE seq = 7').pluck().get()).toBe(5);
    expect(db.prepare('SELECT last_seq FROM lease_keys WHERE key = ?').pluck().get(K1)).toBe(7);
    db.close();
  });
});
