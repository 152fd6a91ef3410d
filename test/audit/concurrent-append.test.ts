import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { ReceiptLog } from '../../src/audit/index.js';
import { openDatabase } from '../../src/store/sqlite/database.js';
import { sqliteStoreOn } from '../../src/store/sqlite/sqlite-store.js';

const SCRIPT = join(import.meta.dirname, 'fixtures', 'append-receipts.mjs');
const DIST = join(process.cwd(), 'dist', 'src', 'store', 'sqlite', 'receipt-repository.js');
const WORKERS = 4;

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

interface Summary {
  workerId: string;
  created: number;
  replayed: number;
}

/** Starts the workers, releases them together once all are ready, and collects their summaries. */
async function runWorkers(dbFile: string, count: number, mode: 'append' | 'race'): Promise<Summary[]> {
  const children = Array.from({ length: WORKERS }, (_, i) =>
    spawn(process.execPath, [SCRIPT, dbFile, String(i + 1), String(count), mode], { cwd: process.cwd(), stdio: ['pipe', 'pipe', 'pipe'] }),
  );
  const results = children.map(
    (child) =>
      new Promise<{ lines: string[]; code: number | null; stderr: string }>((resolve) => {
        const lines: string[] = [];
        let stderr = '';
        child.stderr.on('data', (d) => (stderr += d));
        createInterface({ input: child.stdout }).on('line', (l) => lines.push(l));
        child.on('close', (code) => resolve({ lines, code, stderr }));
      }),
  );
  await Promise.all(
    children.map(
      (child) =>
        new Promise<void>((resolve, reject) => {
          const rl = createInterface({ input: child.stdout });
          rl.on('line', (l) => l === 'ready' && (rl.close(), resolve()));
          child.on('close', () => reject(new Error('a worker exited before it was ready')));
        }),
    ),
  );
  for (const child of children) child.stdin.end('go\n');
  const done = await Promise.all(results);
  for (const d of done) expect(d.code, d.stderr).toBe(0);
  return done.map((d) => JSON.parse(d.lines[d.lines.length - 1]!) as Summary);
}

function freshFile(): string {
  if (!existsSync(DIST)) {
    throw new Error(`${DIST} is missing: this test runs real processes on the compiled code; run 'npx tsc -p tsconfig.json' first`);
  }
  const dir = mkdtempSync(join(tmpdir(), 'writ-receipts-'));
  dirs.push(dir);
  const file = join(dir, 'writ.sqlite');
  openDatabase(file).close(); // migrate once, before the race
  return file;
}

describe('receipt log shared by several OS processes', () => {
  it('4 processes × 200 concurrent appends on 200 keys give 200 unforked chains of 4 entries, 800 seqs', { timeout: 120_000 }, async () => {
    const file = freshFile();
    const summaries = await runWorkers(file, 200, 'append');
    expect(summaries.map((s) => s.created)).toEqual([200, 200, 200, 200]);

    const db = openDatabase(file);
    try {
      const log = new ReceiptLog({ store: sqliteStoreOn(db), clock: new ManualClock() });
      expect(await log.verifyChain()).toMatchObject({ ok: true, entries: 800, chains: 200 });
      const stats = db
        .prepare(`SELECT COUNT(*) AS n, COUNT(DISTINCT seq) AS seqs, COUNT(DISTINCT chain) AS chains, COUNT(DISTINCT chain || ' ' || pos) AS places,
                         COUNT(DISTINCT chain || ' ' || prev_hash) AS links, MIN(seq) AS lo, MAX(seq) AS hi, MAX(pos) AS longest FROM receipt_entries`)
        .get();
      expect(stats).toEqual({ n: 800, seqs: 800, chains: 200, places: 800, links: 800, lo: 1, hi: 800, longest: 4 });
      const perWorker = db.prepare('SELECT principal, COUNT(*) AS n FROM receipts GROUP BY principal ORDER BY principal').all();
      expect(perWorker).toEqual([1, 2, 3, 4].map((w) => ({ principal: `worker-${w}`, n: 200 })));
      // How often consecutive entries came from different processes (shows the appends really interleaved).
      const switches = db
        .prepare(
          `SELECT COUNT(*) FROM receipt_entries a JOIN receipt_entries b ON b.seq = a.seq + 1
           JOIN receipts ra ON ra.receipt_id = a.receipt_id JOIN receipts rb ON rb.receipt_id = b.receipt_id
           WHERE ra.principal <> rb.principal`,
        )
        .pluck()
        .get();
      console.log(`concurrent-append: ${switches} of 799 consecutive entries switch process`);
    } finally {
      db.close();
    }
  });

  it('4 processes racing the same idempotency keys produce exactly one receipt per key', { timeout: 120_000 }, async () => {
    const file = freshFile();
    const summaries = await runWorkers(file, 100, 'race');
    expect(summaries.reduce((a, s) => a + s.created, 0)).toBe(100);
    expect(summaries.reduce((a, s) => a + s.replayed, 0)).toBe(300);

    const db = openDatabase(file);
    try {
      const log = new ReceiptLog({ store: sqliteStoreOn(db), clock: new ManualClock() });
      expect(await log.verifyChain()).toMatchObject({ ok: true, entries: 100 });
      expect(db.prepare("SELECT COUNT(DISTINCT idempotency_key) FROM receipts WHERE principal = 'racer'").pluck().get()).toBe(100);
    } finally {
      db.close();
    }
  });
});
