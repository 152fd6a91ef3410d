import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/clock.js';
import { LeaseManager } from '../../src/lease/index.js';
import { openDatabase } from '../../src/store/sqlite/database.js';
import { sqliteStoreOn } from '../../src/store/sqlite/sqlite-store.js';
import { ensureChildBuild } from '../lease/fixtures/child-build.js';

const here = dirname(fileURLToPath(import.meta.url));
const dirs: string[] = [];
afterAll(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));

beforeAll(() => {
  ensureChildBuild();
}, 180_000);

const PROCESSES = 4;
const CLIENTS = 4;
const ROUNDS = 10;
const KEYS = ['wp:post:1', 'wp:post:2'];

interface Hold {
  key: string;
  epoch: number;
  lease_id: string;
  t1: number;
  t2: number;
}

function run(cfg: Record<string, unknown>): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [join(here, 'fixtures/grouped-contender.mjs'), JSON.stringify(cfg)], { stdio: ['ignore', 'inherit', 'pipe'] });
    let stderr = '';
    child.stderr!.on('data', (d) => (stderr += d));
    child.on('exit', (code) => resolve({ code, stderr }));
  });
}

describe('processes that each batch their lease writes with group commit, on one SQLite file', () => {
  it('never have two holders of a key at once, and issue each key epochs 1..n exactly once', { timeout: 120_000 }, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'writ-group-processes-'));
    dirs.push(dir);
    const db = join(dir, 'writ.db');
    const configs = Array.from({ length: PROCESSES }, (_, i) => ({ db, name: `p${i}`, clients: CLIENTS, rounds: ROUNDS, keys: KEYS, out: join(dir, `p${i}.jsonl`) }));
    const results = await Promise.all(configs.map(run));
    expect(results).toEqual(configs.map(() => ({ code: 0, stderr: '' })));

    const holds = configs.flatMap((c) => (existsSync(c.out) ? readFileSync(c.out, 'utf8').trim().split('\n') : []).map((l) => JSON.parse(l) as Hold));
    expect(holds).toHaveLength(PROCESSES * CLIENTS * ROUNDS);
    const handle = openDatabase(db);
    try {
      const leases = new LeaseManager(sqliteStoreOn(handle), systemClock);
      for (const key of KEYS) {
        const ofKey = holds.filter((h) => h.key === key).sort((a, b) => a.epoch - b.epoch);
        const n = ofKey.length;
        expect(ofKey.map((h) => h.epoch)).toEqual(Array.from({ length: n }, (_, i) => i + 1));
        expect(ofKey.slice(1).filter((h, i) => h.t1 < ofKey[i]!.t2)).toEqual([]);
        const history = await leases.history({ key });
        expect(history.map((e) => `${e.event}:${e.epoch}`)).toEqual(ofKey.flatMap((h) => [`ACQUIRE:${h.epoch}`, `RELEASE:${h.epoch}`]));
        expect(await leases.describe(key)).toMatchObject({ state: 'FREE', epoch: n });
      }
    } finally {
      handle.close();
    }
  });
});
