import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterEach, describe, expect, it } from 'vitest';
import { ReceiptLog } from '../../src/audit/index.js';
import { ManualClock } from '../../src/clock.js';
import type { WritStore } from '../../src/store/contract.js';
import { openPostgresStore } from '../../src/store/postgres/index.js';
import { openSqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { createTestDatabase } from '../../scripts/test-database.js';

/**
 * The graph log stays one hash chain when several OS processes append to it at once (processes sharing
 * the SQLite file, replicas on PostgreSQL), also during a rolling upgrade: two processes of this Writ and
 * one writing as a Writ from before the chain did (no hash, graph_head's revision only). Verify never
 * calls that a break: the old writer's events are unhashed until the next append of this Writ, which
 * hashes them, and after a last one every event is hashed and linked.
 */
const SCRIPT = join(import.meta.dirname, 'fixtures', 'append-graph-events.mjs');
const cleanups: (() => Promise<unknown> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function runWorkers(engine: string, target: string, workers: ('new' | 'old')[], count: number): Promise<void> {
  const children = workers.map((mode, i) => spawn(process.execPath, [SCRIPT, engine, target, String(i + 1), String(count), mode], { cwd: process.cwd(), stdio: ['pipe', 'pipe', 'pipe'] }));
  const done = children.map((child) => new Promise<{ code: number | null; stderr: string }>((resolve) => {
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    child.on('close', (code) => resolve({ code, stderr }));
  }));
  await Promise.all(children.map((child) => new Promise<void>((resolve, reject) => {
    const rl = createInterface({ input: child.stdout });
    rl.on('line', (l) => l === 'ready' && (rl.close(), resolve()));
    child.on('close', () => reject(new Error('a worker exited before it was ready')));
  })));
  for (const child of children) child.stdin.end('go\n');
  for (const d of await Promise.all(done)) expect(d.code, d.stderr).toBe(0);
}

async function check(store: WritStore, total: number): Promise<void> {
  const log = new ReceiptLog({ store, clock: new ManualClock() });
  const during = await log.verifyChain();
  expect(during.ok, during.graph?.problem).toBe(true);
  expect(during.graph!.events + during.graph!.unhashed).toBe(total);
  // The appends interleaved: events of the old writer that an append of this Writ came after (and so hashed first).
  const rows = await store.read((tx) => tx.graph.rowsAfter(0, 10 * total));
  const lastNew = Math.max(...rows.filter((r) => r.actor.startsWith('worker-')).map((r) => r.revision));
  const caughtUp = rows.filter((r) => r.actor.startsWith('old-') && r.revision < lastNew);
  expect(caughtUp.length).toBeGreaterThan(0);
  expect(caughtUp.every((r) => r.hash !== null)).toBe(true);
  await store.readWrite((tx) => tx.graph.append([{ type: 'principal.upsert', principal: { id: 'last', kind: 'agent' } } as never], 'governance', Date.now()));
  const after = await log.verifyChain();
  expect(after.graph).toMatchObject({ ok: true, events: total + 1, revision: total + 1, unhashed: 0 });
}

const COUNT = 60;

describe('graph log appended by several OS processes at once, one of them a Writ from before the chain', () => {
  it('SQLite: processes sharing the file', { timeout: 120_000 }, async () => {
    if (!existsSync(join(process.cwd(), 'dist', 'src', 'audit', 'graph-chain.js'))) throw new Error('run npx tsc -p tsconfig.json first: the workers run dist/');
    const dir = mkdtempSync(join(tmpdir(), 'writ-graph-procs-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const file = join(dir, 'writ.sqlite');
    await (await openSqliteStore(file, { checkpointer: false })).close();
    await runWorkers('sqlite', file, ['new', 'old', 'new'], COUNT);
    const store = await openSqliteStore(file, { checkpointer: false });
    cleanups.push(() => store.close());
    await check(store, 3 * COUNT);
  });

  it('PostgreSQL: replicas', { timeout: 120_000 }, async () => {
    const db = await createTestDatabase('writ_graph_procs');
    cleanups.push(db.drop);
    await (await openPostgresStore(db.url, { poolSize: 1 })).close();
    await runWorkers('postgres', db.url, ['new', 'old', 'new'], COUNT);
    const store = await openPostgresStore(db.url, { poolSize: 2 });
    cleanups.push(() => store.close());
    await check(store, 3 * COUNT);
  });
});
