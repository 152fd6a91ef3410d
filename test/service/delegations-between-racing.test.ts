import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import { GOVERNANCE_ID } from '../../src/graph/model.js';
import { hasEdgeEnded } from '../../src/graph/index.js';
import { applyManifest, createDelegation, openWrit, readManifest } from '../../src/service/index.js';
import { createTestDatabase } from '../../scripts/test-database.js';
import { BUNDLE_DIR, EXAMPLE_GRAPH, REPO } from '../support/harness.js';

/**
 * WRIT_MAX_DELEGATIONS_BETWEEN (16 by default) bounds the delegations one principal has given another that
 * have not ended. The count is made in the graph write's plan, on the graph the write is appended on, so
 * replicas writing at once cannot together go past it: OS processes sharing the SQLite file, or replicas on
 * one PostgreSQL database, race for the last places.
 */
const SCRIPT = join(import.meta.dirname, 'fixtures', 'delegation-racer.mjs');
const scope = { actions: ['update_post'], resources: ['wp:post:*'], environments: ['production'], fields: ['body'], risk_max: 1 };
const cleanups: (() => Promise<unknown> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

interface Report { workerId: string; created: string[]; refused: string[] }

async function runWorkers(target: string, dir: string, workers: number, count: number): Promise<Report[]> {
  const children = Array.from({ length: workers }, (_, i) =>
    spawn(process.execPath, [SCRIPT, target, join(dir, `replica-${i}`), BUNDLE_DIR, join(REPO, 'policies'), String(i), String(count)], { cwd: REPO, stdio: ['pipe', 'pipe', 'pipe'] }));
  const done = children.map((child) => new Promise<{ code: number | null; stderr: string; last: string }>((resolve) => {
    let stderr = '';
    let last = '';
    child.stderr.on('data', (d) => (stderr += d));
    createInterface({ input: child.stdout }).on('line', (l) => (last = l));
    child.on('close', (code) => resolve({ code, stderr, last }));
  }));
  await Promise.all(children.map((child) => new Promise<void>((resolve, reject) => {
    const rl = createInterface({ input: child.stdout });
    rl.on('line', (l) => l === 'ready' && (rl.close(), resolve()));
    child.on('close', () => reject(new Error('a worker exited before it was ready')));
  })));
  for (const child of children) child.stdin.end('go\n');
  return (await Promise.all(done)).map((d) => {
    expect(d.code, d.stderr).toBe(0);
    return JSON.parse(d.last) as Report;
  });
}

async function race(where: { dbFile: string } | { databaseUrl: string }, target: string, dir: string): Promise<void> {
  const config = loadConfig({ dataDir: join(dir, 'setup'), bundleDir: BUNDLE_DIR, policiesDir: join(REPO, 'policies'), ...where }, {});
  const setup = await openWrit(config);
  const { manifest, baseDir } = readManifest(EXAMPLE_GRAPH);
  await applyManifest(setup.ctx, GOVERNANCE_ID, manifest, baseDir);
  // 13 of the 16 places taken; 3 workers try 3 more each, at once.
  for (let i = 0; i < 13; i++) await createDelegation(setup.ctx, 'editor-alice', { id: `before-${i}`, from: 'editor-alice', to: 'content-agent-3', reason: 'taken', scope });
  await setup.close();

  const reports = await runWorkers(target, dir, 3, 3);
  const created = reports.flatMap((r) => r.created);
  const refused = reports.flatMap((r) => r.refused);
  expect(created).toHaveLength(3);
  expect(refused).toEqual(Array(6).fill('TOO_MANY_DELEGATIONS'));

  const after = await openWrit(loadConfig({ dataDir: join(dir, 'after'), bundleDir: BUNDLE_DIR, policiesDir: join(REPO, 'policies'), ...where }, {}));
  cleanups.push(() => after.close());
  const graph = await after.ctx.graph.current();
  const given: string[] = [];
  graph.forEachIncoming('content-agent-3', (e) => {
    if (e.kind === 'delegate' && e.from === 'editor-alice' && !hasEdgeEnded(e, after.ctx.clock.now())) given.push(e.id);
  });
  expect(given.sort()).toEqual([...Array.from({ length: 13 }, (_, i) => `before-${i}`), ...created].sort());
}

describe('delegations between two principals, written by several processes at once', () => {
  it('SQLite: processes sharing the file take exactly the places left', { timeout: 120_000 }, async () => {
    if (!existsSync(join(REPO, 'dist', 'src', 'service', 'index.js'))) throw new Error('run npx tsc -p tsconfig.json first: the workers run dist/');
    const dir = mkdtempSync(join(tmpdir(), 'writ-delegations-race-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const file = join(dir, 'writ.sqlite');
    await race({ dbFile: file }, file, dir);
  });

  it('PostgreSQL: replicas take exactly the places left', { timeout: 120_000 }, async () => {
    const db = await createTestDatabase('writ_delegations_race');
    cleanups.push(db.drop);
    const dir = mkdtempSync(join(tmpdir(), 'writ-delegations-race-pg-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    await race({ databaseUrl: db.url }, db.url, dir);
  });
});
