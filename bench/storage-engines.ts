/**
 * The two engines side by side, over HTTP, in one run with rounds alternated: lease acquire+release
 * pairs/s and gateway writes/s against `writ serve` on SQLite (1 process), on PostgreSQL (1 replica)
 * and on PostgreSQL (3 replicas, requests spread round-robin), the same SDK load and concurrency for
 * each.
 *
 *   npx tsc -p tsconfig.json && node dist/bench/storage-engines.js [--write] [--base-cli PATH]
 *
 * `--base-cli PATH`: also runs another build's `dist/src/cli/main.js` (e.g. a worktree of an earlier
 * commit) on PostgreSQL, one replica, in the same rounds: a before/after of an engine change.
 *
 * PostgreSQL: the shared server on 127.0.0.1:5432 (WRIT_TEST_DATABASE_URL to change), a fresh
 * database per variant, dropped at the end. Files go to bench/tmp (git-ignored).
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { JWK } from 'jose';
import { createTestDatabase } from '../scripts/test-database.js';
import { CLI, REPO, startSampleUpstream } from '../scripts/server-process.js';
import { WritClient, type Decision } from '../src/sdk/index.js';
import { argValue, machineLine, median, ratioSummary, summarize, writeResultsSection } from './results-file.js';
import { startReplicas, type Replicas } from './replicas.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const TMP = join(ROOT, 'bench', 'tmp');
const SECONDS = Number(process.env['ENGINES_SECONDS'] ?? 6);
const ROUNDS = Number(process.env['ENGINES_ROUNDS'] ?? 3);
const CLIENTS = Number(process.env['ENGINES_CLIENTS'] ?? 16);
const PRINCIPAL = 'seo-agent-7';

type Variant = Replicas;

function variant(name: string, replicas: number, databaseUrl: string | null, upstreamUrl: string, cli = CLI): Promise<Variant> {
  return startReplicas(name, { cli, count: replicas, tmp: TMP, env: { ...process.env, WRIT_UPSTREAM_URL: upstreamUrl, ...(databaseUrl ? { WRIT_DATABASE_URL: databaseUrl } : {}) } });
}

/** `clients` loops, each on its own keys, each request to the next replica: lease pairs, or optimistic writes. */
async function load(v: Variant, jwk: JWK, kind: 'leases' | 'writes' | 'decisions', seconds: number, base: number): Promise<{ ops: number; perSecond: number; p50: number; p99: number }> {
  const lat: number[] = [];
  let next = 0;
  const client = () => new WritClient({ baseUrl: v.urls[next++ % v.urls.length]!, principal: PRINCIPAL, privateJwk: jwk });
  const until = performance.now() + seconds * 1000;
  const start = performance.now();
  let ops = 0;
  await Promise.all(Array.from({ length: CLIENTS }, async (_, c) => {
    const writ = [client(), client(), client()];
    const post = base + c;
    let decision: Decision | null = null;
    let version = 0;
    for (let i = 0; performance.now() < until; i++) {
      const w = writ[i % writ.length]!;
      const t = performance.now();
      if (kind === 'decisions') {
        const d = await w.decide({ action: 'update_post', resource: `wp:post:${post}`, environment: 'production', fields: ['title'] });
        if (!d.allow) throw new Error(d.reasons.join('; '));
      } else if (kind === 'leases') {
        if (!decision || i % 200 === 0) decision = await w.decide({ action: 'update_post', resource: `wp:post:${post}`, environment: 'production', fields: ['title'] });
        const lease = await w.acquireLease([decision], { ttlMs: 10_000 });
        await w.releaseLease(lease);
      } else {
        const d = await w.decide({ action: 'update_post', resource: `wp:post:${post}`, environment: 'production', fields: ['meta_description'] });
        const receipt = await w.act({ decision: d, action: 'update_post', resource: `wp:post:${post}`, fields: ['meta_description'], payload: { meta_description: `m ${i}` }, expected_version: version });
        version = receipt.final_version ?? version;
      }
      lat.push((performance.now() - t) * 1000);
      ops += 1;
    }
  }));
  const s = summarize(lat);
  return { ops, perSecond: ops / ((performance.now() - start) / 1000), p50: s.p50, p99: s.p99 };
}

const fmt = (n: number) => Math.round(n).toLocaleString('en-US');

async function main(): Promise<void> {
  mkdirSync(TMP, { recursive: true });
  const jwk = JSON.parse(readFileSync(join(REPO, 'fixtures/keys/seo-agent-7.jwk'), 'utf8')) as JWK;
  const upDir = mkdtempSync(join(TMP, 'engines-up-'));
  const upstream = await startSampleUpstream(upDir);
  const upstreamUrl = upstream.url;
  const db1 = await createTestDatabase('writ_bench_one');
  const db3 = await createTestDatabase('writ_bench_three');
  const baseCli = argValue('base-cli', '') || undefined;
  const dbBase = baseCli ? await createTestDatabase('writ_bench_base') : null;
  const variants = [
    await variant('SQLite, 1 process', 1, null, upstreamUrl),
    await variant('PostgreSQL, 1 replica', 1, db1.url, upstreamUrl),
    await variant('PostgreSQL, 3 replicas', 3, db3.url, upstreamUrl),
    ...(baseCli && dbBase ? [await variant('PostgreSQL, 1 replica, base build', 1, dbBase.url, upstreamUrl, baseCli)] : []),
  ];
  const results = new Map<string, { leases: number[]; writes: number[]; leaseP99: number[]; writeP99: number[]; decisions: number[]; decisionP50: number[]; decisionP99: number[] }>();
  try {
    for (const v of variants) await load(v, jwk, 'leases', 1, 1_000); // warm-up
    let base = 10_000;
    for (let r = 0; r < ROUNDS; r++) {
      for (const v of r % 2 === 0 ? variants : [...variants].reverse()) {
        const l = await load(v, jwk, 'leases', SECONDS, (base += 100));
        const w = await load(v, jwk, 'writes', SECONDS, (base += 100));
        const d = await load(v, jwk, 'decisions', SECONDS, (base += 100));
        const row = results.get(v.name) ?? { leases: [], writes: [], leaseP99: [], writeP99: [], decisions: [], decisionP50: [], decisionP99: [] };
        row.decisions.push(d.perSecond);
        row.decisionP50.push(d.p50);
        row.decisionP99.push(d.p99);
        row.leases.push(l.perSecond);
        row.writes.push(w.perSecond);
        row.leaseP99.push(l.p99);
        row.writeP99.push(w.p99);
        results.set(v.name, row);
        console.log(`round ${r + 1} ${v.name}: ${fmt(l.perSecond)} lease pairs/s (p99 ${fmt(l.p99)} µs), ${fmt(w.perSecond)} writes/s (p99 ${fmt(w.p99)} µs), ${fmt(d.perSecond)} decisions/s (p50 ${fmt(d.p50)} µs)`);
      }
    }
  } finally {
    for (const v of variants) await v.stop();
    upstream.proc.kill('SIGTERM');
    await upstream.exited;
    rmSync(upDir, { recursive: true, force: true });
    await db1.drop();
    await db3.drop();
    await dbBase?.drop();
  }
  const sqlite = results.get(variants[0]!.name)!;
  const ratio = (a: number[], b: number[]) => ratioSummary(a.map((x, i) => x / b[i]!));
  const rows = variants.map((v) => {
    const r = results.get(v.name)!;
    return `| ${v.name} | ${fmt(median(r.leases))} | ${fmt(median(r.leaseP99))} | ${ratio(r.leases, sqlite.leases)} | ${fmt(median(r.writes))} | ${fmt(median(r.writeP99))} | ${ratio(r.writes, sqlite.writes)} | ${fmt(median(r.decisions))} | ${fmt(median(r.decisionP50))} / ${fmt(median(r.decisionP99))} | ${ratio(r.decisions, sqlite.decisions)} |`;
  });
  const section = [
    '## Storage engines side by side over HTTP (bench/storage-engines.ts)',
    '',
    '```',
    'npx tsc -p tsconfig.json && node dist/bench/storage-engines.js --write',
    '```',
    '',
    machineLine(),
    '',
    `\`writ serve\` on SQLite (one process), on PostgreSQL (one replica) and on PostgreSQL (three replicas, each client's requests spread round-robin over them), the shared PostgreSQL 15 on 127.0.0.1 (synchronous_commit on), one sample upstream process for all. ${CLIENTS} SDK clients on distinct posts, ${SECONDS} s per measurement, ${ROUNDS} rounds with the variants' order alternated; medians of the rounds, and each variant's ratio to SQLite in the same round (median, range). Lease pair = acquireLease + releaseLease on \`wp:post:N#title\` (a decision refetched every 200 pairs); write = decide + an optimistic write of \`meta_description\` through the gateway; decision = \`POST /v1/decisions\` alone (the caller's assertion spent in the store, the rest from the in-memory graph).`,
    '',
    '| variant | lease pairs/s | p99 µs/pair | ÷ SQLite | writes/s | p99 µs/write | ÷ SQLite | decisions/s | p50 / p99 µs | ÷ SQLite |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
    ...rows,
    '',
    'Round trips to PostgreSQL per HTTP request, counted by the engine and pinned by test/store/postgres/request-round-trips.test.ts',
    '(transactions alone: test/store/postgres/engine.test.ts): a decision 1 (before: 4), a lease acquisition 2 (6), a renewal or a',
    'release 2 (7), so a lease pair 4 (13), and an optimistic gateway write 3 (12): its intent 2 and its settlement 1. BEGIN travels',
    'with the first statement; statements nobody reads (spending the caller\'s assertion or the decision, recording the lease\'s',
    'authority) travel with the next statement or the COMMIT (`BEGIN; …; COMMIT` is one message for a decision); statements asked for',
    'together share a message; a read\'s COMMIT is not waited for; the caller\'s assertion is no longer read from the store before it',
    'is spent; a receipt append is one statement (the database hashes the entry, migration 005), and the settlement is its own',
    'implicit transaction answering with the receipt\'s intent too (README, "Round trips on PostgreSQL").',
    ...(baseCli ? ['', `Base build: \`${baseCli}\` (a gateway write 7 round trips there: intent 3, settlement 4).`] : []),
    '',
    'Reading these figures: the load generator is the Node SDK in one process (16 clients signing an Ed25519 caller assertion',
    'per request) on the same 2 cores as the servers and PostgreSQL, so absolute rates are this machine\'s and the ratios are the',
    'figure. PostgreSQL here is the shared server (synchronous_commit on: one fsync per commit, no group commit across',
    'connections), so a lease pair costs two separate commits there against SQLite\'s shared group commits. Three replicas are',
    'slower than one here because all three share the same two cores with the load generator and the database; what replicas',
    'buy is more cores and machines, which this box cannot show. Decisions read only the in-memory graph on both engines (on',
    'PostgreSQL it is fed by NOTIFY); what the engine adds to a decision is the spend of the caller\'s assertion.',
  ].join('\n');
  console.log(section);
  if (process.argv.includes('--write')) writeResultsSection('storage-engines', section);
}

void main();
