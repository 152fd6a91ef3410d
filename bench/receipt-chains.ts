/**
 * Gateway writes/s on PostgreSQL with N concurrent agents on distinct keys: the receipt log as one
 * global hash chain (every intent and settlement locks the one head row) against one chain per
 * coordination key (each append locks only its key's head), same run, rounds alternated.
 *
 *   npx tsc -p tsconfig.json && node dist/bench/receipt-chains.js --before DIR [--write]
 *
 * DIR is a compiled build of the code before per-key chains (its dist/src/cli/main.js, with a
 * package.json and the build/ and policies/ it needs beside it); e.g. built from the commit before
 * into bench/tmp/before. First the receipt log alone (ReceiptLog on a PostgreSQL store, in this process,
 * the before build's modules imported from DIR): CLIENTS loops each recording an intent and its
 * completion on a key of its own, each its own transaction. Then the gateway over HTTP. The variants run on a PostgreSQL server of the bench's own
 * (scripts/private-postgres.ts: eight replicas' pools do not fit in the shared server's connection
 * limit beside the other users), one database each; CHAINS_CLIENTS (default 32), CHAINS_SECONDS (6),
 * CHAINS_ROUNDS (3).
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import type { JWK } from 'jose';
import pg from 'pg';
import { startPrivatePostgres } from '../scripts/private-postgres.js';
import { CLI, REPO, startSampleUpstream } from '../scripts/server-process.js';
import { WritClient } from '../src/sdk/index.js';
import { ReceiptLog } from '../src/audit/index.js';
import { systemClock } from '../src/clock.js';
import { openPostgresStore } from '../src/store/postgres/index.js';
import { machineLine, median, ratioSummary, summarize, writeResultsSection } from './results-file.js';
import { startReplicas, type Replicas } from './replicas.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const TMP = join(ROOT, 'bench', 'tmp');
const SECONDS = Number(process.env['CHAINS_SECONDS'] ?? 6);
const ROUNDS = Number(process.env['CHAINS_ROUNDS'] ?? 3);
const CLIENTS = Number(process.env['CHAINS_CLIENTS'] ?? 32);
const { values } = parseArgs({ options: { before: { type: 'string' }, write: { type: 'boolean', default: false } } });

type Variant = Replicas;

function variant(name: string, cli: string, replicas: number, databaseUrl: string, upstreamUrl: string): Promise<Variant> {
  // No periodic checkpoint during the measurement (the after build would take one a minute): appends only.
  return startReplicas(name, { cli, count: replicas, tmp: TMP, env: { ...process.env, WRIT_UPSTREAM_URL: upstreamUrl, WRIT_DATABASE_URL: databaseUrl, WRIT_RECEIPT_CHECKPOINT_INTERVAL_MS: '0' } });
}

/** `CLIENTS` agents, each writing its own post (decide + an optimistic write through the gateway), requests spread over the replicas. */
async function writes(v: Variant, jwk: JWK, seconds: number, base: number): Promise<{ perSecond: number; p50: number; p99: number }> {
  const lat: number[] = [];
  let next = 0;
  const until = performance.now() + seconds * 1000;
  const start = performance.now();
  await Promise.all(Array.from({ length: CLIENTS }, async (_, c) => {
    const w = new WritClient({ baseUrl: v.urls[next++ % v.urls.length]!, principal: 'seo-agent-7', privateJwk: jwk });
    const resource = `wp:post:${base + c}`;
    let version = 0;
    for (let i = 0; performance.now() < until; i++) {
      const t = performance.now();
      const d = await w.decide({ action: 'update_post', resource, environment: 'production', fields: ['meta_description'] });
      const receipt = await w.act({ decision: d, action: 'update_post', resource, fields: ['meta_description'], payload: { meta_description: `m ${i}` }, expected_version: version });
      version = receipt.final_version ?? version;
      lat.push((performance.now() - t) * 1000);
    }
  }));
  const s = summarize(lat);
  return { perSecond: lat.length / ((performance.now() - start) / 1000), p50: s.p50, p99: s.p99 };
}

type Log = Pick<ReceiptLog, 'recordIntent' | 'complete'>;
type Opened = { log: Log; close(): Promise<void> };

/** A ReceiptLog on a PostgreSQL store, of this build or of the one in `dir`, with a pool of one connection per loop. */
async function openLog(url: string, dir?: string): Promise<Opened> {
  const load = async <T>(path: string, here: T): Promise<T> => (dir ? ((await import(pathToFileURL(join(dir, 'dist/src', path)).href)) as T) : here);
  const pgMod = await load('store/postgres/index.js', { openPostgresStore });
  const audit = await load('audit/index.js', { ReceiptLog });
  const clock = await load('clock.js', { systemClock });
  const store = await pgMod.openPostgresStore(url, { poolSize: CLIENTS });
  return { log: new audit.ReceiptLog({ store, clock: clock.systemClock }), close: () => store.close() };
}

/** CLIENTS loops, each an intent and its completion (two transactions, two entries) on its own key, for `seconds`. */
async function appends(log: Log, seconds: number, base: number): Promise<{ perSecond: number; p50: number; p99: number }> {
  const lat: number[] = [];
  const until = performance.now() + seconds * 1000;
  const start = performance.now();
  await Promise.all(Array.from({ length: CLIENTS }, async (_, c) => {
    const resource_key = `wp:post:${base + c}`;
    for (let i = 0; performance.now() < until; i++) {
      const t = performance.now();
      const r = await log.recordIntent({ principal: 'seo-agent-7', action: 'update_post', resource_key, fields: ['title'], request_hash: `h-${base}-${c}-${i}` });
      await log.complete(r.receipt_id, { status: 'COMPLETED', final_version: i + 1, upstream_status: 200 });
      lat.push((performance.now() - t) * 1000);
    }
  }));
  const s = summarize(lat);
  return { perSecond: lat.length / ((performance.now() - start) / 1000), p50: s.p50, p99: s.p99 };
}

const fmt = (n: number) => Math.round(n).toLocaleString('en-US');

async function main(): Promise<void> {
  if (!values.before) throw new Error('--before DIR: a compiled build of the code before per-key chains');
  const beforeCli = join(resolve(values.before), 'dist/src/cli/main.js');
  mkdirSync(TMP, { recursive: true });
  const jwk = JSON.parse(readFileSync(join(REPO, 'fixtures/keys/seo-agent-7.jwk'), 'utf8')) as JWK;
  const upDir = mkdtempSync(join(TMP, 'chains-up-'));
  const upstream = await startSampleUpstream(upDir);
  const upstreamUrl = upstream.url;
  const server = await startPrivatePostgres();
  const admin = new pg.Client({ connectionString: server.url });
  await admin.connect();
  const dbs = [1, 2, 3, 4, 5, 6].map((i) => ({ url: server.url.replace(/\/postgres$/, `/chains_${i}`) }));
  for (let i = 1; i <= 6; i++) await admin.query(`CREATE DATABASE chains_${i}`);
  await admin.end();
  // 1. The receipt log alone.
  const logs = [
    { name: 'one global chain', opened: await openLog(dbs[4]!.url, resolve(values.before)) },
    { name: 'per-key chains', opened: await openLog(dbs[5]!.url) },
  ];
  const alone = new Map<string, { rate: number[]; p50: number[]; p99: number[] }>();
  let key = 1_000_000;
  try {
    for (const l of logs) await appends(l.opened.log, 1, (key += 1_000));
    for (let r = 0; r < ROUNDS; r++) {
      for (const l of r % 2 === 0 ? logs : [...logs].reverse()) {
        const a = await appends(l.opened.log, SECONDS, (key += 1_000));
        const row = alone.get(l.name) ?? { rate: [], p50: [], p99: [] };
        row.rate.push(a.perSecond);
        row.p50.push(a.p50);
        row.p99.push(a.p99);
        alone.set(l.name, row);
        console.log(`round ${r + 1} receipt log alone, ${l.name}: ${fmt(a.perSecond)} receipts/s (p50 ${fmt(a.p50)} µs, p99 ${fmt(a.p99)} µs)`);
      }
    }
  } finally {
    for (const l of logs) await l.opened.close();
  }
  const variants = [
    await variant('one global chain, 1 replica', beforeCli, 1, dbs[0]!.url, upstreamUrl),
    await variant('per-key chains, 1 replica', CLI, 1, dbs[1]!.url, upstreamUrl),
    await variant('one global chain, 3 replicas', beforeCli, 3, dbs[2]!.url, upstreamUrl),
    await variant('per-key chains, 3 replicas', CLI, 3, dbs[3]!.url, upstreamUrl),
  ];
  const results = new Map<string, { rate: number[]; p50: number[]; p99: number[] }>();
  try {
    // Every measurement on posts of its own: the upstream is shared, and versions start at 0.
    let base = 10_000;
    for (const v of variants) await writes(v, jwk, 1, (base += 1_000)); // warm-up
    for (let r = 0; r < ROUNDS; r++) {
      for (const v of r % 2 === 0 ? variants : [...variants].reverse()) {
        const w = await writes(v, jwk, SECONDS, (base += 1_000));
        const row = results.get(v.name) ?? { rate: [], p50: [], p99: [] };
        row.rate.push(w.perSecond);
        row.p50.push(w.p50);
        row.p99.push(w.p99);
        results.set(v.name, row);
        console.log(`round ${r + 1} ${v.name}: ${fmt(w.perSecond)} writes/s (p50 ${fmt(w.p50)} µs, p99 ${fmt(w.p99)} µs)`);
      }
    }
  } finally {
    for (const v of variants) await v.stop();
    upstream.proc.kill('SIGTERM');
    await upstream.exited;
    rmSync(upDir, { recursive: true, force: true });
    server.stop();
  }
  const ratio = (a: number[], b: number[]) => ratioSummary(a.map((x, i) => x / b[i]!));
  const row = (v: Variant, against?: Variant) => {
    const r = results.get(v.name)!;
    return `| ${v.name} | ${fmt(median(r.rate))} | ${fmt(median(r.p50))} | ${fmt(median(r.p99))} | ${against ? ratio(r.rate, results.get(against.name)!.rate) : '—'} |`;
  };
  const section = [
    `## Receipts: one global chain against per-key chains, on PostgreSQL, ${CLIENTS} agents (bench/receipt-chains.ts)`,
    '',
    '```',
    '# the build before: dist/ of commit 06bc361 (as scripts/setup.sh compiles it) copied to bench/tmp/before/dist,',
    '# beside a copy of package.json and links to build/, policies/ and graph/',
    `npx tsc -p tsconfig.json && CHAINS_CLIENTS=${CLIENTS} node dist/bench/receipt-chains.js --before bench/tmp/before --write`,
    '```',
    '',
    machineLine(),
    '',
    `\`writ serve\` on a PostgreSQL 15 server of the bench's own (initdb defaults: fsync and synchronous_commit on; max_connections 200), a database per variant, one sample upstream for all; the build before per-key chains (every receipt append locks the one chain head row) and this one (each append locks its key's head row), 1 and 3 replicas. ${CLIENTS} SDK agents, each on its own post (distinct coordination keys), each op = decide + an optimistic write through the gateway (an intent transaction and a settlement transaction, each appending one receipt entry); ${SECONDS} s per measurement, ${ROUNDS} rounds with the order alternated; medians of the rounds, and the ratio to the global chain in the same round (median, range). No periodic checkpoint ran during the measurement.`,
    '',
    'The receipt log alone (ReceiptLog on PostgreSQL in the bench process, a pool of one connection per loop; each op = an intent and its completion, two transactions):',
    '',
    '| receipt log | receipts/s | p50 µs | p99 µs | ÷ global chain |',
    '|---|---:|---:|---:|---:|',
    ...logs.map((l, i) => {
      const r = alone.get(l.name)!;
      return `| ${l.name} | ${fmt(median(r.rate))} | ${fmt(median(r.p50))} | ${fmt(median(r.p99))} | ${i === 0 ? '—' : ratio(r.rate, alone.get(logs[0]!.name)!.rate)} |`;
    }),
    '',
    'Through the gateway over HTTP (decide + write):',
    '',
    '| variant | writes/s | p50 µs | p99 µs | ÷ global chain |',
    '|---|---:|---:|---:|---:|',
    row(variants[0]!),
    row(variants[1]!, variants[0]),
    row(variants[2]!),
    row(variants[3]!, variants[2]),
    '',
    'Reading these figures: the ratio in the same round is the figure, not the rates (the load generator, the replicas and',
    'PostgreSQL share 2 cores, and other sessions were running). The receipt log alone shows the lock itself: with one global',
    'chain every intent and settlement of every connection waits for the one head row, held through its commit (an fsync), so',
    'the commits go one at a time; with per-key chains they overlap and PostgreSQL flushes them together. Through the gateway',
    'the rest of a write (decision, caller assertion, the upstream call, the other statements of the intent transaction) is',
    'the same in both builds and dilutes the difference.',
  ].join('\n');
  console.log(section);
  if (values.write) writeResultsSection(`receipt-chains-${CLIENTS}`, section);
}

void main();
