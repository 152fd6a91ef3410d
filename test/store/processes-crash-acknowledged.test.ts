import Database from 'better-sqlite3';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureChildBuild } from '../lease/fixtures/child-build.js';

const here = dirname(fileURLToPath(import.meta.url));
const dirs: string[] = [];
afterAll(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));

beforeAll(() => {
  ensureChildBuild();
}, 180_000);

const RUNS = 6;
const CLIENTS = 8;

/** Starts the writer, lets it acknowledge for a random 150–900 ms once it is ready, kills it with SIGKILL; the ids it printed. */
function runAndKill(db: string, run: number): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [join(here, 'fixtures/ack-writer.mjs'), JSON.stringify({ db, run, clients: CLIENTS })], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    let timer: NodeJS.Timeout | null = null;
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      if (!timer && out.startsWith('ready\n')) timer = setTimeout(() => child.kill('SIGKILL'), 150 + Math.random() * 750);
    });
    child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
    child.on('exit', (code, signal) => {
      if (signal !== 'SIGKILL') return reject(new Error(`writer exited (${code}) before the kill: ${err}`));
      // A line cut by the kill was never acknowledged in full: only whole lines count.
      resolve(out.split('\n').slice(1, -1));
    });
  });
}

describe('a process killed (SIGKILL) at random points while the store acknowledges writes', () => {
  it('loses nothing it acknowledged: every acknowledged single-use id is spent, every acknowledged graph append is in the log', { timeout: 120_000 }, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'writ-crash-acks-'));
    dirs.push(dir);
    const file = join(dir, 'writ.db');
    let total = 0;
    for (let run = 0; run < RUNS; run++) {
      const acked = await runAndKill(file, run);
      expect(acked.length, `run ${run} acknowledged something before the kill`).toBeGreaterThan(0);
      total += acked.length;
      // Reopen (crash recovery of the WAL) as the next process would.
      const db = new Database(file);
      try {
        const spent = new Set(db.prepare("SELECT id FROM seen_ids WHERE namespace = 'jti'").pluck().all() as string[]);
        expect(acked.filter((id) => !spent.has(id))).toEqual([]);
        const appended = new Set(db.prepare('SELECT payload FROM graph_events').pluck().all().map((p) => (JSON.parse(p as string) as { id: string }).id));
        const ackedAppends = acked.filter((id) => Number(id.split('-')[2]) % 7 === 0);
        expect(ackedAppends.filter((id) => !appended.has(id))).toEqual([]);
        const revisions = db.prepare('SELECT revision FROM graph_events ORDER BY revision').pluck().all() as number[];
        expect(revisions).toEqual(revisions.map((_, i) => i + 1));
      } finally {
        db.close();
      }
    }
    expect(total).toBeGreaterThan(RUNS);
  });
});
