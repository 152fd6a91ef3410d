import { describe, expect, it } from 'vitest';
import { PresentedIds } from '../../src/decision/index.js';
import { openDatabase } from '../../src/store/sqlite/database.js';
import { SqliteSingleUseStore } from '../../src/store/sqlite/single-use-store.js';

describe('single-use ids on SQLite', () => {
  it('are spent durably once; isSpent() reads without recording', async () => {
    const ids = new SqliteSingleUseStore(openDatabase(':memory:'));
    expect(await ids.isSpent('assertion', 'a', 1_000)).toBe(false);
    expect(await ids.spend('assertion', 'a', 2_000, 1_000)).toBe(true);
    expect(await ids.isSpent('assertion', 'a', 1_500)).toBe(true);
    expect(await ids.spend('assertion', 'a', 2_000, 1_500)).toBe(false);
    expect(await ids.isSpent('assertion', 'a', 2_000)).toBe(false); // expired
    expect(await ids.spend('decision', 'a', 2_000, 1_500)).toBe(true); // namespaces are separate
  });

  it('refuses to spend an id already expired, so two late spends cannot both succeed', async () => {
    const ids = new SqliteSingleUseStore(openDatabase(':memory:'));
    expect(await ids.spend('decision', 'd', 1_000, 1_000)).toBe(false);
    expect(await ids.spend('decision', 'd', 1_000, 1_001)).toBe(false);
    expect(await ids.isSpent('decision', 'd', 999)).toBe(false);
  });

  it('deletes expired ids (at most once a minute, inside a spend), so the table holds only live ones', async () => {
    const db = openDatabase(':memory:');
    const store = new SqliteSingleUseStore(db);
    const rows = () => (db.prepare('SELECT id FROM seen_ids ORDER BY id').pluck().all() as string[]);
    expect(await store.spend('assertion', 'old', 100_000, 70_000)).toBe(true); // purges nothing yet, and starts the minute
    expect(await store.spend('assertion', 'live', 500_000, 80_000)).toBe(true);
    expect(await store.spend('decision', 'young', 200_000, 129_000)).toBe(true); // within the minute: nothing purged
    expect(rows()).toEqual(['live', 'old', 'young']);
    expect(await store.spend('decision', 'new', 700_000, 131_000)).toBe(true); // a minute on: 'old' (expired at 100 s) goes
    expect(rows()).toEqual(['live', 'new', 'young']);
  });
});

describe('ids presented to this process', () => {
  it('are refused a second time until they expire; namespaces are separate; forget() drops the mark', () => {
    const presented = new PresentedIds();
    expect(presented.present('assertion', 'b', 2_000, 1_000)).toBe(true);
    expect(presented.present('assertion', 'b', 2_000, 1_999)).toBe(false);
    expect(presented.present('decision', 'b', 2_000, 1_999)).toBe(true);
    // Expired entries are dropped (oldest first), and the id may be presented again.
    expect(presented.present('assertion', 'c', 5_000, 2_500)).toBe(true);
    expect(presented.present('assertion', 'b', 6_000, 2_500)).toBe(true);
    expect(presented.present('assertion', 'c', 5_000, 4_999)).toBe(false);
    presented.forget('assertion', 'c');
    expect(presented.present('assertion', 'c', 5_000, 4_999)).toBe(true);
  });
});
