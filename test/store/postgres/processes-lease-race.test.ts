import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { openPostgresStore } from '../../../src/store/postgres/index.js';
import { createTestDatabase } from '../conformance/engines.js';
import { ensureChildBuild } from '../../lease/fixtures/child-build.js';

const here = dirname(fileURLToPath(import.meta.url));
const KEYS = ['k:1', 'k:2', 'k:3'];
const KEYSETS = [['k:1'], ['k:1', 'k:2'], ['k:2', 'k:3'], ['k:1', 'k:2', 'k:3'], ['k:3']];

interface RacerReport {
  name: string;
  granted: number;
  refused: number;
  violations: unknown[];
  epochs: Record<string, number[]>;
  stats: { roundTrips: number; retries: number; commits: number };
}

let build: string;
beforeAll(() => {
  build = ensureChildBuild();
}, 120_000);

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function racer(cfg: Record<string, unknown>): Promise<RacerReport> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [join(here, 'fixtures/lease-racer.mjs'), JSON.stringify({ build, ...cfg })], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    child.on('exit', (code) => (code === 0 ? resolve(JSON.parse(out.trim().split('\n').pop()!)) : reject(new Error(`racer ${String(cfg.name)} exited ${code}: ${err}`))));
  });
}

/** Two replica processes, each with its own pool, until they have 500 grants between them. */
async function race(skews: [number, number]) {
  const db = await createTestDatabase('writ_race');
  cleanups.push(db.drop);
  // Migrate once, and create the probe the racers mark while they hold a key.
  await (await openPostgresStore(db.url)).close();
  const admin = new pg.Client(db.url);
  await admin.connect();
  cleanups.push(() => admin.end());
  await admin.query('CREATE TABLE probe (key text PRIMARY KEY, holder text, epoch bigint NOT NULL)');
  await admin.query("INSERT INTO probe (key, holder, epoch) SELECT k, NULL, 0 FROM unnest($1::text[]) k", [KEYS]);
  const reports = await Promise.all(
    skews.map((skewMs, i) => racer({ url: db.url, name: `replica-${i}`, keysets: KEYSETS, grants: 250, ttlMs: 10_000, skewMs })),
  );
  return { reports, admin };
}

async function checkHistory(reports: RacerReport[], admin: pg.Client) {
  expect(reports.flatMap((r) => r.violations)).toEqual([]);
  expect(reports.reduce((n, r) => n + r.granted, 0)).toBe(500);
  for (const key of KEYS) {
    // Every epoch of the key was granted exactly once, from 1 up to the key's high-water mark.
    const granted = reports.flatMap((r) => r.epochs[key] ?? []).sort((a, b) => a - b);
    const { rows } = await admin.query<{ epoch: string }>('SELECT epoch FROM lease_keys WHERE key = $1', [key]);
    expect(granted).toEqual(Array.from({ length: Number(rows[0]!.epoch) }, (_, i) => i + 1));
    // Each replica saw the key's epochs strictly increase.
    for (const r of reports) {
      const mine = r.epochs[key] ?? [];
      for (let i = 1; i < mine.length; i++) expect(mine[i]).toBeGreaterThan(mine[i - 1]!);
    }
    // The history has the key's acquisitions in epoch order, each released before the next.
    const { rows: events } = await admin.query<{ event: string; epoch: string }>('SELECT event, epoch FROM lease_history WHERE key = $1 ORDER BY seq', [key]);
    const seq = events.map((e) => `${e.event}:${e.epoch}`);
    expect(seq).toEqual(granted.flatMap((e) => [`ACQUIRE:${e}`, `RELEASE:${e}`]));
  }
}

describe('PostgreSQL leases across processes', () => {
  it('two replica processes racing for 500 acquisitions of the same keys: never two holders, epochs strictly increasing', async () => {
    const { reports, admin } = await race([0, 0]);
    await checkHistory(reports, admin);
    expect(reports.every((r) => r.refused > 0)).toBe(true); // they did contend
  }, 120_000);

  it('a replica whose process clock is 30 s ahead (the other 30 s behind) still creates no double holder: the database clock decides', async () => {
    const { reports, admin } = await race([30_000, -30_000]);
    await checkHistory(reports, admin);
  }, 120_000);
});
