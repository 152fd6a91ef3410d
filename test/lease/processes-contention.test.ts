import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureChildBuild } from './fixtures/child-build.js';
import { initWitness, readRecords, readWitness, type HoldRecord } from './fixtures/histories.js';
import { observer } from './fixtures/in-process.js';
import { runContenders, tempDir, removeTempDirs } from './fixtures/processes.js';

afterAll(removeTempDirs);

const PROCESSES = 8;
const ROUNDS = 20;
const KEYS = ['wp:post:1', 'wp:post:2'];

beforeAll(() => {
  ensureChildBuild();
}, 180_000);

describe('eight processes contending for two keys on one SQLite file', () => {
  it('never has two holders of a key at once, and issues each key strictly increasing epochs, none twice', { timeout: 120_000 }, async () => {
    const dir = tempDir();
    const db = join(dir, 'writ.db');
    initWitness(dir, KEYS);
    const configs = Array.from({ length: PROCESSES }, (_, i) => ({
      db,
      name: `p${i}`,
      // Two processes share a principal name: exclusivity must not depend on names.
      holder: `agent-${i % 4}`,
      rounds: ROUNDS,
      keySets: KEYS.map((k) => [k]),
      offset: i,
      witnessDir: dir,
      out: join(dir, `p${i}.jsonl`),
    }));
    const results = await runContenders(configs);
    expect(results.map((r) => r.stderr)).toEqual(configs.map(() => ''));
    expect(results.map((r) => r.code)).toEqual(configs.map(() => 0));

    const records = configs.flatMap((c) => readRecords(c.out));
    expect(records).toHaveLength(PROCESSES * ROUNDS);
    const { db: handle, leases } = observer(db);
    try {
      for (const key of KEYS) {
        const holds = records.filter((r) => key in r.epochs).sort((a, b) => a.epochs[key]! - b.epochs[key]!);
        const n = holds.length;
        expect(n).toBe((PROCESSES * ROUNDS) / KEYS.length);
        // Every epoch 1..n issued exactly once.
        expect(holds.map((h) => h.epochs[key])).toEqual(Array.from({ length: n }, (_, i) => i + 1));
        // Holding intervals, in epoch order, never overlap.
        const overlaps = holds.slice(1).filter((h, i) => h.t1 < holds[i]!.t2);
        expect(overlaps).toEqual([]);
        // The read-modify-write inside each hold lost no update.
        expect(readWitness(dir, key)).toBe(n);

        // The store's own history agrees: ACQUIRE e, [RENEW e]*, RELEASE e, ACQUIRE e+1, ...
        const history = await leases.history({ key });
        const leaseOfEpoch = new Map(holds.map((h: HoldRecord) => [h.epochs[key], h.lease_id]));
        let holding: { epoch: number; lease_id: string } | null = null;
        let last = 0;
        for (const e of history) {
          if (e.event === 'ACQUIRE') {
            expect(holding).toBeNull();
            expect(e.epoch).toBe(last + 1);
            expect(e.lease_id).toBe(leaseOfEpoch.get(e.epoch));
            holding = { epoch: e.epoch, lease_id: e.lease_id };
            last = e.epoch;
          } else {
            expect(e.event).toMatch(/^(RENEW|RELEASE)$/);
            expect({ epoch: e.epoch, lease_id: e.lease_id }).toEqual(holding);
            if (e.event === 'RELEASE') holding = null;
          }
        }
        expect(last).toBe(n);
        expect(await leases.describe(key)).toMatchObject({ state: 'FREE', epoch: n });
      }
    } finally {
      handle.close();
    }
  });
});
