import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureChildBuild } from './fixtures/child-build.js';
import { initWitness, readRecords, readWitness } from './fixtures/histories.js';
import { observer } from './fixtures/in-process.js';
import { runContenders, tempDir, removeTempDirs } from './fixtures/processes.js';

afterAll(removeTempDirs);

const K100 = 'wp:post:100';
const K101 = 'wp:post:101';
const ROUNDS = 200;

beforeAll(() => {
  ensureChildBuild();
}, 180_000);

describe('two processes taking the same two keys, named in opposite orders', () => {
  it('both finish every round, and no one ever holds one key without the other', { timeout: 120_000 }, async () => {
    const dir = tempDir();
    const db = join(dir, 'writ.db');
    initWitness(dir, [K100, K101]);
    const common = { db, rounds: ROUNDS, witnessDir: dir, offset: 0 };
    const results = await runContenders([
      { ...common, name: 'forward', holder: 'agent-forward', keySets: [[K100, K101]], out: join(dir, 'forward.jsonl') },
      { ...common, name: 'backward', holder: 'agent-backward', keySets: [[K101, K100]], out: join(dir, 'backward.jsonl') },
    ]);
    expect(results.map((r) => r.stderr)).toEqual(['', '']);
    expect(results.map((r) => r.code)).toEqual([0, 0]);

    const records = [...readRecords(join(dir, 'forward.jsonl')), ...readRecords(join(dir, 'backward.jsonl'))];
    expect(records).toHaveLength(2 * ROUNDS);
    for (const r of records) expect(Object.keys(r.epochs).sort()).toEqual([K100, K101]);
    expect(readWitness(dir, K100)).toBe(2 * ROUNDS);
    expect(readWitness(dir, K101)).toBe(2 * ROUNDS);

    // Replay the history one transaction at a time (a transaction's events are consecutive):
    // after each, both keys have the same holder lease, or are both free.
    const { db: handle, leases } = observer(db);
    const events = await leases.history();
    handle.close();
    const holderOf = new Map<string, string | null>([
      [K100, null],
      [K101, null],
    ]);
    let acquisitions = 0;
    for (let i = 0; i < events.length; ) {
      const group = [events[i]!];
      while (events[i + group.length]?.lease_id === group[0]!.lease_id && events[i + group.length]?.event === group[0]!.event) group.push(events[i + group.length]!);
      i += group.length;
      expect(group.map((e) => e.key).sort()).toEqual([K100, K101]);
      for (const e of group) {
        if (e.event === 'ACQUIRE') holderOf.set(e.key, e.lease_id);
        if (e.event === 'RELEASE') holderOf.set(e.key, null);
      }
      if (group[0]!.event === 'ACQUIRE') acquisitions += 1;
      expect(group[0]!.event).not.toMatch(/EXPIRE|PREEMPT/);
      expect(holderOf.get(K100)).toBe(holderOf.get(K101));
    }
    expect(acquisitions).toBe(2 * ROUNDS);
  });
});
