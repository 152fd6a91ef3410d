import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ManualClock, systemClock, type Clock } from '../../src/clock.js';
import { LeaseManager, type LeaseGrant } from '../../src/lease/index.js';
import { openDatabase } from '../../src/store/sqlite/database.js';
import { sqliteStoreOn } from '../../src/store/sqlite/sqlite-store.js';

const dirs: string[] = [];
afterAll(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));

function grouped(clock: Clock = new ManualClock()) {
  const dir = mkdtempSync(join(tmpdir(), 'writ-lease-group-'));
  dirs.push(dir);
  const db = openDatabase(join(dir, 'writ.db'));
  const store = sqliteStoreOn(db);
  return { db, group: store, leases: new LeaseManager(store, clock, { pollMinMs: 1, pollMaxMs: 3 }) };
}

const settle = <T>(p: Promise<T>) =>
  p.then(
    (value) => ({ ok: true as const, value }),
    (e: { code?: string }) => ({ ok: false as const, code: e.code }),
  );

describe('leases through group commit', () => {
  it('grants a key to exactly one of many acquisitions in the same batch, and refuses the others as busy', async () => {
    const { leases, group } = grouped();
    const outcomes = await Promise.all(
      Array.from({ length: 8 }, (_, i) => settle(leases.acquire({ resources: ['wp:post:1'], holder: `agent-${i}`, priority: 0, ttlMs: 10_000 }))),
    );
    expect(outcomes.filter((o) => o.ok)).toHaveLength(1);
    expect(outcomes.filter((o) => !o.ok).map((o) => o.code)).toEqual(Array(7).fill('RESOURCE_BUSY'));
    // Serial semantics in arrival order: the first caller won, with epoch 1.
    expect(outcomes[0]).toMatchObject({ ok: true, value: { epochs: { 'wp:post:1': 1 } } });
    expect(group.stats.commits).toBe(1);
    expect(await leases.describe('wp:post:1')).toMatchObject({ holderIdentity: 'agent-0', epoch: 1 });
  });

  it('takes and releases distinct keys of concurrent callers in shared commits, epochs as if one after another', async () => {
    const { leases, group } = grouped();
    const keys = Array.from({ length: 16 }, (_, i) => `wp:post:${i}`);
    for (let round = 1; round <= 3; round++) {
      const grants = await Promise.all(keys.map((k) => leases.acquire({ resources: [k], holder: 'agent', priority: 0, ttlMs: 10_000 })));
      expect(grants.map((g) => Object.values(g.epochs)[0])).toEqual(keys.map(() => round));
      await Promise.all(grants.map((g) => leases.release(g.lease_id, g.token)));
    }
    expect(group.stats).toMatchObject({ commits: 6, committedOperations: 96 });
    const history = await leases.history({ key: 'wp:post:3' });
    expect(history.map((e) => `${e.event}:${e.epoch}`)).toEqual(['ACQUIRE:1', 'RELEASE:1', 'ACQUIRE:2', 'RELEASE:2', 'ACQUIRE:3', 'RELEASE:3']);
  });

  it('answers each refused renew or release in a batch with its own code, beside a successful one', async () => {
    const { leases } = grouped();
    const a = await leases.acquire({ resources: ['wp:post:1'], holder: 'a', priority: 0, ttlMs: 10_000 });
    const b = await leases.acquire({ resources: ['wp:post:2'], holder: 'b', priority: 0, ttlMs: 10_000 });
    const outcomes = await Promise.all([
      settle(leases.renew(a.lease_id, 'not-the-token')),
      settle(leases.release(b.lease_id, b.token)),
      settle(leases.release('no-such-lease', 'x')),
      settle(leases.renew(a.lease_id, a.token)),
    ]);
    expect(outcomes.map((o) => (o.ok ? 'ok' : o.code))).toEqual(['LEASE_TOKEN_MISMATCH', 'ok', 'LEASE_NOT_FOUND', 'ok']);
    expect(await leases.describe('wp:post:2')).toMatchObject({ state: 'FREE', epoch: 1 });
  });

  it('serves waiters on one key one at a time: epochs 1..n, each once, holds never overlapping', async () => {
    const { leases } = grouped(systemClock);
    const holds: { epoch: number; t1: number; t2: number }[] = [];
    let inside = 0;
    let maxInside = 0;
    const client = async (name: string) => {
      for (let round = 0; round < 5; round++) {
        const g: LeaseGrant = await leases.acquire({ resources: ['wp:post:9'], holder: name, priority: 0, ttlMs: 10_000, waitMs: 20_000 });
        inside += 1;
        maxInside = Math.max(maxInside, inside);
        const t1 = performance.now();
        await new Promise((r) => setImmediate(r));
        const t2 = performance.now();
        inside -= 1;
        holds.push({ epoch: g.epochs['wp:post:9']!, t1, t2 });
        await leases.release(g.lease_id, g.token);
      }
    };
    await Promise.all(Array.from({ length: 6 }, (_, i) => client(`agent-${i}`)));
    expect(maxInside).toBe(1);
    expect(holds.map((h) => h.epoch).sort((x, y) => x - y)).toEqual(Array.from({ length: 30 }, (_, i) => i + 1));
    const events = await leases.history({ key: 'wp:post:9' });
    expect(events.map((e) => e.event)).toEqual(Array.from({ length: 30 }, () => ['ACQUIRE', 'RELEASE']).flat());
    expect(await leases.waiters('wp:post:9')).toEqual([]);
  });
});
