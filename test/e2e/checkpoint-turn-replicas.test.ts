import Database from 'better-sqlite3';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { ReceiptLog } from '../../src/audit/index.js';
import { systemClock } from '../../src/clock.js';
import { openPostgresStore } from '../../src/store/postgres/index.js';
import { openSqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { CLI, onFreePort, REPO, requireDist, spawnListening } from '../../scripts/server-process.js';
import { createTestDatabase, sql } from '../store/conformance/engines.js';
import { intent } from '../audit/helpers.js';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const INTERVAL_MS = 1_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const TAKES = 'receipt checkpoints: this replica takes them';

function sqliteRows(file: string, text: string): { seq: number; at: number }[] {
  const db = new Database(file, { readonly: true });
  try {
    return db.prepare(text).all() as { seq: number; at: number }[];
  } finally {
    db.close();
  }
}

describe.each(['postgres', 'sqlite'] as const)('two replicas (real processes) checkpointing every second [%s]', (engine) => {
  it('take one checkpoint per interval between them, and the other takes over when the one taking them is killed', async () => {
    requireDist();
    const dir = mkdtempSync(join(tmpdir(), 'writ-turn-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    // PostgreSQL: a database of its own; SQLite: the data directory's file, which both processes serve.
    const db = engine === 'postgres' ? await createTestDatabase('writ_turn') : undefined;
    if (db) cleanups.push(db.drop);
    const env = { ...process.env, WRIT_DATABASE_URL: db?.url ?? '', WRIT_RECEIPT_CHECKPOINT_INTERVAL_MS: String(INTERVAL_MS) };
    // Both share the data directory's signing keys, as replicas do.
    const start = (i: number) => onFreePort((port) => spawnListening(`replica ${i}`, [CLI, 'serve', '--data-dir', dir, '--port', String(port), '--no-upstream', ...(i === 0 ? ['--graph', 'graph/example.yaml'] : [])], env));
    const replicas = [await start(0), await start(1)];
    cleanups.push(() => replicas.forEach((r) => r.proc.exitCode === null && r.proc.kill('SIGKILL')));

    // Receipts keep being written (as through any replica's gateway): every checkpoint has a chain that moved.
    const store = db ? await openPostgresStore(db.url, { poolSize: 2 }) : await openSqliteStore(join(dir, 'writ.sqlite'));
    cleanups.push(() => store.close());
    const log = new ReceiptLog({ store, clock: systemClock });
    let writing = true;
    let n = 0;
    const writer = (async () => {
      while (writing) {
        await log.recordIntent(intent({ resource_key: `wp:post:${n % 50}`, expected_version: n }));
        n++;
        await sleep(50);
      }
    })();
    cleanups.push(async () => {
      writing = false;
      await writer;
    });
    const checkpoints = async () => (db
      ? await sql<{ seq: string; at: string }>(db.url, 'SELECT seq, at FROM receipt_head_checkpoints ORDER BY seq')
      : sqliteRows(join(dir, 'writ.sqlite'), 'SELECT seq, at FROM receipt_head_checkpoints ORDER BY seq')).map((c) => ({ seq: Number(c.seq), at: Number(c.at) }));
    const verify = async () => {
      const { stdout } = await promisify(execFile)(process.execPath, [CLI, 'audit', 'verify', '--data-dir', dir, '--json'], { cwd: REPO, env });
      return JSON.parse(stdout) as { ok: boolean };
    };

    // Both have looked at least twice: one took the turn, the other saw it taken.
    await sleep(3 * INTERVAL_MS);
    const window = 6_000;
    const before = await checkpoints();
    await sleep(window);
    const during = (await checkpoints()).filter((c) => c.seq > (before[before.length - 1]?.seq ?? 0));
    const holders = replicas.map((r) => r.output().includes(TAKES));
    expect(holders.filter(Boolean)).toHaveLength(1);
    const holder = holders.indexOf(true);
    const other = 1 - holder;
    expect(replicas[other]!.output()).toContain('receipt checkpoints: another replica takes them');
    // One replica, a checkpoint every interval from the end of its last: at most one a second (two replicas
    // checkpointing on their own would take nearly two), and some.
    expect(during.length).toBeGreaterThanOrEqual(2);
    expect(during.length).toBeLessThanOrEqual(window / INTERVAL_MS + 1);
    expect(await verify()).toMatchObject({ ok: true });

    // The one taking them dies: its turn (three intervals) runs out and the other takes them.
    replicas[holder]!.proc.kill('SIGKILL');
    await replicas[holder]!.exited;
    const killedAt = Date.now();
    const lastBefore = (await checkpoints()).at(-1)!.seq;
    for (;;) {
      if (replicas[other]!.output().includes(TAKES)) break;
      if (Date.now() - killedAt > 20_000) throw new Error(`the other replica never took over:\n${replicas[other]!.output()}`);
      await sleep(200);
    }
    await sleep(3 * INTERVAL_MS);
    const after = (await checkpoints()).filter((c) => c.seq > lastBefore);
    expect(after.length).toBeGreaterThanOrEqual(2);
    writing = false;
    await writer;
    expect(await verify()).toMatchObject({ ok: true });
  }, 120_000);
});
