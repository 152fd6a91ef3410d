/**
 * What hashing the graph's event log costs an append: the same appends through this build's store and
 * through another build's (`--before DIR`, e.g. /work/main/dist: a build from before the graph chain), in
 * alternating rounds on fresh stores, on SQLite (its default durability: one synced commit per append)
 * and PostgreSQL (a database of its own per round, on the local server). Each round: 200 appends of one
 * edge-shaped event each (µs per append), then one append of 500 events (µs per event: the hashing's
 * share, with one commit for all; also the CPU time of this process for it, which a shared machine's waits
 * for a core do not inflate). Also the hash alone (graphEventHash, CPU µs per event).
 *
 *   npx tsc -p tsconfig.json && node dist/bench/graph-append.js --before /work/main/dist [--rounds 5]
 *
 * Files go to bench/tmp (git-ignored) and are removed at the end.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { loadavg } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { graphEventHash } from '../src/audit/graph-chain.js';
import { createTestDatabase } from '../scripts/test-database.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const { values } = parseArgs({ options: { before: { type: 'string' }, rounds: { type: 'string', default: '5' } } });
if (!values.before) throw new Error('--before DIR (the dist/ of a build to compare with) is required');
const ROUNDS = Number(values.rounds);
const SINGLE = 200;
const BATCH = 500;

interface Store {
  readWrite<T>(f: (tx: { graph: { append(events: unknown[], actor: string, at: number): Promise<number> } }) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}
interface Build {
  name: string;
  sqlite(file: string): Promise<Store>;
  postgres(url: string): Promise<Store>;
}

async function build(name: string, dist: string): Promise<Build> {
  const s = (await import(pathToFileURL(join(dist, 'src/store/sqlite/sqlite-store.js')).href)) as { openSqliteStore(file: string, o?: object): Promise<Store> };
  const p = (await import(pathToFileURL(join(dist, 'src/store/postgres/index.js')).href)) as { openPostgresStore(url: string, o?: object): Promise<Store> };
  return { name, sqlite: (f) => s.openSqliteStore(f, { checkpointer: false }), postgres: (u) => p.openPostgresStore(u, { poolSize: 2 }) };
}

const edge = (i: number) => ({
  type: 'edge.created',
  edge: {
    id: `d-bench-${i}`, kind: 'delegate', from: 'orchestrator', to: `agent-${i % 50}`, created_by: 'orchestrator', reason: 'weekly publishing run', created_at: 1_800_000_000_000 + i,
    scope: { actions: ['update_post'], resources: ['wp:post:*'], environments: ['production'], fields: ['title', 'meta_description'], constraints: { risk_max: 2 } }, max_depth: 1,
  },
});

async function measure(store: Store): Promise<{ perAppend: number; perEvent: number; cpuPerEvent: number }> {
  await store.readWrite((tx) => tx.graph.append([edge(0)], 'governance', Date.now()));
  let t = performance.now();
  for (let i = 1; i <= SINGLE; i++) await store.readWrite((tx) => tx.graph.append([edge(i)], 'governance', Date.now()));
  const perAppend = ((performance.now() - t) * 1000) / SINGLE;
  const batch = Array.from({ length: BATCH }, (_, i) => edge(SINGLE + 1 + i));
  t = performance.now();
  const cpu = process.cpuUsage();
  await store.readWrite((tx) => tx.graph.append(batch, 'governance', Date.now()));
  const used = process.cpuUsage(cpu);
  const perEvent = ((performance.now() - t) * 1000) / BATCH;
  await store.close();
  return { perAppend, perEvent, cpuPerEvent: (used.user + used.system) / BATCH };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const fmt = (xs: number[]) => `${median(xs).toFixed(1)} (${Math.min(...xs).toFixed(1)}–${Math.max(...xs).toFixed(1)})`;

mkdirSync(join(ROOT, 'bench', 'tmp'), { recursive: true });
const dir = mkdtempSync(join(ROOT, 'bench', 'tmp', 'graph-append-'));
const builds = [await build('before', resolve(values.before)), await build('after', join(ROOT, 'dist'))];
const results = new Map<string, { perAppend: number[]; perEvent: number[]; cpuPerEvent: number[] }>();
const record = (key: string, r: { perAppend: number; perEvent: number; cpuPerEvent: number }) => {
  const e = results.get(key) ?? results.set(key, { perAppend: [], perEvent: [], cpuPerEvent: [] }).get(key)!;
  e.perAppend.push(r.perAppend);
  e.perEvent.push(r.perEvent);
  e.cpuPerEvent.push(r.cpuPerEvent);
};
const load = [loadavg()[0]!];
try {
  for (let round = 0; round < ROUNDS; round++) {
    for (const b of round % 2 === 0 ? builds : [...builds].reverse()) {
      record(`sqlite ${b.name}`, await measure(await b.sqlite(join(dir, `${b.name}-${round}.sqlite`))));
      const db = await createTestDatabase('writ_bench_graph');
      try {
        record(`postgres ${b.name}`, await measure(await b.postgres(db.url)));
      } finally {
        await db.drop();
      }
    }
  }
  load.push(loadavg()[0]!);
  const hashN = 100_000;
  const row = { revision: 1, at: Date.now(), actor: 'governance', type: 'edge.created', payload: JSON.stringify(edge(1)) };
  let prev = '0'.repeat(64);
  const cpu = process.cpuUsage();
  for (let i = 0; i < hashN; i++) prev = graphEventHash(prev, row);
  const used = process.cpuUsage(cpu);
  const hashUs = (used.user + used.system) / hashN;
  console.log(`${ROUNDS} rounds, alternating; median (min–max) over rounds; 1-minute load average ${load.map((l) => l.toFixed(1)).join(' → ')}`);
  console.log('| engine, build | µs per append (1 event, own commit) | µs per event (one append of 500) | Writ process CPU µs per event (same) |');
  console.log('|---|---:|---:|---:|');
  for (const [key, r] of results) console.log(`| ${key} | ${fmt(r.perAppend)} | ${fmt(r.perEvent)} | ${fmt(r.cpuPerEvent)} |`);
  console.log(`graphEventHash alone: ${hashUs.toFixed(2)} µs of CPU per event (${row.payload.length}-byte payload, ${hashN} calls)`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
