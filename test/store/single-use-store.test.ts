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

  it('deletes expired ids inside spends, at most every 100 ms and 10 s after they expired, so the table holds only live ones', async () => {
    const db = openDatabase(':memory:');
    const store = new SqliteSingleUseStore(db);
    const rows = () => (db.prepare('SELECT id FROM seen_ids ORDER BY id').pluck().all() as string[]);
    expect(await store.spend('assertion', 'old', 100_000, 70_000)).toBe(true); // purges nothing yet, and starts the interval
    expect(await store.spend('assertion', 'live', 500_000, 70_050)).toBe(true);
    expect(await store.spend('decision', 'young', 200_000, 105_000)).toBe(true); // 'old' expired at 100 s: kept 10 s more
    expect(rows()).toEqual(['live', 'old', 'young']);
    expect(await store.spend('decision', 'newer', 700_000, 110_000)).toBe(true); // now purged
    expect(rows()).toEqual(['live', 'newer', 'young']);
    expect(await store.spend('decision', 'late', 700_000, 210_000)).toBe(true); // 'young' expired at 200 s
    expect(rows()).toEqual(['late', 'live', 'newer']);
  });

  it('an id expired by the latest clock the store has seen is refused, also to a request whose own clock is earlier: a purge by a later request cannot open a replay', async () => {
    const db = openDatabase(':memory:');
    const store = new SqliteSingleUseStore(db);
    expect(await store.spend('assertion', 'j', 50_000, 40_000)).toBe(true);
    // A later request spends something at 80 s: j (expired at 50 s) is purged.
    expect(await store.spend('assertion', 'other', 900_000, 80_000)).toBe(true);
    expect(db.prepare("SELECT count(*) FROM seen_ids WHERE id = 'j'").pluck().get()).toBe(0);
    // A request that started at 45 s (j still live by its clock) replays j after that purge.
    expect(await store.spend('assertion', 'j', 50_000, 45_000)).toBe(false);
    await expect(store.spendOrRefuse('assertion', 'j', 50_000, 45_000, () => new Error('replayed'))).rejects.toThrow('replayed');
    expect(await store.spend('assertion', 'fresh', 90_000, 45_000)).toBe(true);
  });

  it('deletes a large backlog of expired ids in bites of 1,000, the oldest first, sooner while bites come back full, never a live one', async () => {
    const db = openDatabase(':memory:');
    const store = new SqliteSingleUseStore(db);
    const insert = db.prepare('INSERT INTO seen_ids (namespace, id, expires_at) VALUES (?, ?, ?)');
    db.transaction(() => {
      for (let i = 0; i < 2_500; i++) insert.run('assertion', `expired-${i}`, 10_000 + i);
      for (let i = 0; i < 300; i++) insert.run('decision', `live-${i}`, 1_000_000 + i);
    })();
    const count = (like: string) => db.prepare('SELECT count(*) FROM seen_ids WHERE id LIKE ?').pluck().get(like) as number;
    const oldestLeft = () => db.prepare("SELECT min(expires_at) FROM seen_ids WHERE id LIKE 'expired-%'").pluck().get() as number | null;
    let now = 500_000;
    let spent = 0;
    /** A spend `ms` after the last one (each a new id, live until 900 s). */
    const spendAfter = async (ms: number) => {
      now += ms;
      expect(await store.spend('assertion', `a${spent++}`, 900_000, now)).toBe(true);
    };
    await spendAfter(0);
    expect(count('expired-%')).toBe(1_500);
    expect(oldestLeft()).toBe(11_000); // the oldest thousand went first
    // A full bite brings the next one 10 ms closer, not 100.
    await spendAfter(9);
    expect(count('expired-%')).toBe(1_500);
    await spendAfter(1);
    expect(count('expired-%')).toBe(500);
    await spendAfter(10);
    expect(count('expired-%')).toBe(0);
    // That bite was not full: the next waits the whole 100 ms.
    insert.run('assertion', 'expired-late', now - 10_001);
    await spendAfter(99);
    expect(count('expired-late')).toBe(1);
    await spendAfter(1);
    expect(count('expired-late')).toBe(0);
    expect(count('live-%')).toBe(300);
    expect(count('a_')).toBe(6);
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
