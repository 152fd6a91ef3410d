import { describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/store/sqlite/database.js';
import { SqliteReplayGuard } from '../../src/store/sqlite/replay-guard.js';

describe('the replay guard', () => {
  it('remembers durably; seen() reads without recording; present() is per process and forgets at expiry', () => {
    const guard = new SqliteReplayGuard(openDatabase(':memory:'));
    expect(guard.seen('assertion', 'a', 1_000)).toBe(false);
    expect(guard.remember('assertion', 'a', 2_000, 1_000)).toBe(true);
    expect(guard.seen('assertion', 'a', 1_500)).toBe(true);
    expect(guard.remember('assertion', 'a', 2_000, 1_500)).toBe(false);
    expect(guard.seen('assertion', 'a', 2_000)).toBe(false); // expired

    expect(guard.present('assertion', 'b', 2_000, 1_000)).toBe(true);
    expect(guard.present('assertion', 'b', 2_000, 1_999)).toBe(false);
    expect(guard.present('decision', 'b', 2_000, 1_999)).toBe(true); // namespaces are separate
    expect(guard.seen('assertion', 'b', 1_999)).toBe(false); // present() writes nothing durable
    // Expired entries are dropped (oldest first), and the id may be presented again.
    expect(guard.present('assertion', 'c', 5_000, 2_500)).toBe(true);
    expect(guard.present('assertion', 'b', 6_000, 2_500)).toBe(true);
    expect(guard.present('assertion', 'c', 5_000, 4_999)).toBe(false);
  });

  it('refuses to remember an id already expired, so two late spends cannot both succeed', () => {
    const guard = new SqliteReplayGuard(openDatabase(':memory:'));
    expect(guard.remember('decision', 'd', 1_000, 1_000)).toBe(false);
    expect(guard.remember('decision', 'd', 1_000, 1_001)).toBe(false);
    expect(guard.seen('decision', 'd', 999)).toBe(false);
  });

  it('deletes expired ids (at most once a minute, inside a remember), so the table holds only live ones', () => {
    const db = openDatabase(':memory:');
    const guard = new SqliteReplayGuard(db);
    const ids = () => (db.prepare('SELECT id FROM seen_ids ORDER BY id').pluck().all() as string[]);
    expect(guard.remember('assertion', 'old', 100_000, 70_000)).toBe(true); // purges nothing yet, and starts the minute
    expect(guard.remember('assertion', 'live', 500_000, 80_000)).toBe(true);
    expect(guard.remember('decision', 'young', 200_000, 129_000)).toBe(true); // within the minute: nothing purged
    expect(ids()).toEqual(['live', 'old', 'young']);
    expect(guard.remember('decision', 'new', 700_000, 131_000)).toBe(true); // a minute on: 'old' (expired at 100 s) goes
    expect(ids()).toEqual(['live', 'new', 'young']);
  });

  it('forget() drops the in-memory mark', () => {
    const guard = new SqliteReplayGuard(openDatabase(':memory:'));
    expect(guard.present('assertion', 'a', 2_000, 1_000)).toBe(true);
    guard.forget('assertion', 'a');
    expect(guard.present('assertion', 'a', 2_000, 1_001)).toBe(true);
  });
});
