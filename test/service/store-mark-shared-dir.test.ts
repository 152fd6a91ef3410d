import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import type { GraphEvent } from '../../src/graph/model.js';
import { markStore, readStoreMarks } from '../../src/service/index.js';
import { openPostgresStore } from '../../src/store/postgres/index.js';
import { createTestDatabase } from '../store/conformance/engines.js';
import { requireDist } from '../support/server-process.js';

const REPO = join(dirname(fileURLToPath(import.meta.url)), '../..');
const KEEPER = join(dirname(fileURLToPath(import.meta.url)), 'fixtures/mark-keeper.mjs');
const REPLICAS = 4;
const ROUNDS = 150;

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

function keeper(url: string, file: string, key: string, pid: string): Promise<{ code: number | null; out: string; err: string }> {
  const child = spawn(process.execPath, [KEEPER, join(REPO, 'dist'), url, file, String(ROUNDS), key, pid], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  return new Promise((resolve) => child.on('exit', (code) => resolve({ code, out, err })));
}

/**
 * Replicas sharing one data directory (which README says not to do) share its mark file. What they may
 * not do to it: make a database that only moved forward look behind (a false "restored under a running
 * Writ" warning), or leave it torn (the next start refuses a mark that cannot be read).
 */
describe('replicas writing one mark file at once (real processes)', () => {
  for (const pid of ['own', 'pid1'] as const) {
    it(`never find a database that only moved forward behind it, nor a torn file (${pid === 'own' ? 'each its own pid' : 'all pid 1, as in containers'})`, { timeout: 120_000 }, async () => {
      requireDist();
      const db = await createTestDatabase('writ_mark');
      cleanups.push(db.drop);
      const store = await openPostgresStore(db.url, { poolSize: 2 });
      cleanups.push(() => store.close());
      await store.readWrite((tx) => tx.graph.append([{ type: 'principal.upsert' } as unknown as GraphEvent], 'governance', Date.now()));
      const dir = mkdtempSync(join(tmpdir(), 'writ-mark-shared-'));
      cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
      const file = join(dir, 'store-mark.json');

      const results = await Promise.all(Array.from({ length: REPLICAS }, (_, i) => keeper(db.url, file, `k:${i}`, pid)));
      for (const r of results) {
        expect(r.code, r.err).toBe(0);
        expect(JSON.parse(r.out)).toEqual({ behind: 0, errors: [] });
      }
      expect(readdirSync(dir)).toEqual(['store-mark.json']);
      // Written alone, the mark is the database's state.
      expect(await markStore(file, store, db.url)).toBe(true);
      const max = await store.read((tx) => tx.leases.maxEpoch());
      expect(max).toBe(ROUNDS);
      expect(Object.values(readStoreMarks(file).stores).map((m) => m.max_epoch)).toEqual([max]);
    });
  }
});
