/**
 * Writ next to its peers, in one run, measured by one load generator (bench/loadgen, Go), rounds
 * alternated (who goes first flips every round), ratios per round:
 *
 *  (a) signed decisions over HTTP (`POST /v1/decisions`, a fresh Ed25519 caller assertion each) vs
 *      `opa run --server` (tools/bin/opa) on the same policies and data, given the exact input
 *      document Writ's policy engine evaluates for that request (captured in-process), 16 and 1
 *      clients; OPA's answer is checked equal to Writ's unsigned result first;
 *  (b) durable lease acquire+release pairs over HTTP vs a PostgreSQL single-row compare-and-set (the
 *      shared local server, synchronous_commit on, a database of its own created and dropped) and vs
 *      a private redis-server (its own port and dir, `--appendonly yes --appendfsync always`,
 *      SET NX PX + a Lua compare-and-delete), 16 and 64 clients, each client on its own key.
 *
 *   npx tsc -p tsconfig.json && node dist/bench/side-by-side.js [--write] [--seconds 5] [--rounds 3] [--only decisions|leases]
 *
 * Files go to bench/tmp (git-ignored). `--write` replaces this benchmark's section of bench/RESULTS.md.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { isDeepStrictEqual } from 'node:util';
import { join } from 'node:path';
import { loadConfig } from '../src/config/index.js';
import { GOVERNANCE_ID } from '../src/graph/model.js';
import type { DecisionInput } from '../src/policy/types.js';
import { applyManifest, decide, openWrit, readManifest } from '../src/service/index.js';
import pg from 'pg';
import { ADMIN_URL, createTestDatabase } from '../scripts/test-database.js';
import { CLI, freePort, onFreePort, REPO, spawnListening } from '../scripts/server-process.js';
import { runLoadgen, runLoadgenAsync, type Load } from './loadgen-run.js';
import { argValue as arg, machineLine, median, ratioSummary, summarize, writeResultsSection } from './results-file.js';
import { pacedSyncProbe } from './disk-probe.js';

const TMP = join(REPO, 'bench', 'tmp');
/**
 * The disk in the same run, for the lease ratios: the peers sync per operation and Writ per group commit,
 * so their ratio moves with how fast this disk syncs (2026-12-07: PostgreSQL at half its rate of the day
 * before on a disk half as fast, Writ less). Before the first lease round and after each: this many
 * write 4 KiB + fdatasync, one every PROBE_EVERY_MS, next to Writ's data directory.
 */
const PROBE_SYNCS = 50;
const PROBE_EVERY_MS = 20;
const SECONDS = Number(arg('seconds', '5'));
const ROUNDS = Number(arg('rounds', '3'));
const ONLY = arg('only', 'all');
const PRINCIPAL = 'seo-agent-7';
const KEY_FILE = join(REPO, 'fixtures/keys/seo-agent-7.jwk');
const REQUEST = { action: 'update_post', resource: 'wp:post:1024', environment: 'production', fields: ['meta_description', 'title'] };
/** The pooled PostgreSQL peer: the clients share this many connections (see the lease peers below). */
const POOLED_PG_CONNECTIONS = 16;
const POOLED_PG = `PostgreSQL CAS on ${POOLED_PG_CONNECTIONS} pooled connections`;
/** The authenticated front's pool (kept open for the whole run), and the most clients a lease round has. */
const FRONT_POOL = 32;
const MAX_LEASE_CLIENTS = 64;

/**
 * Refuses to start the lease part when the shared PostgreSQL cannot hold the front's warm pool and the
 * bare peer's connection per client at once (a "too many clients" mid-run would waste the run).
 */
async function checkConnectionBudget(): Promise<void> {
  const admin = new pg.Client({ connectionString: ADMIN_URL });
  await admin.connect();
  try {
    const { rows } = await admin.query<{ free: number }>("SELECT current_setting('max_connections')::int - count(*)::int AS free FROM pg_stat_activity WHERE backend_type = 'client backend'");
    const needed = FRONT_POOL + MAX_LEASE_CLIENTS + 2;
    if (rows[0]!.free < needed) {
      throw new Error(`the lease comparison needs ${needed} free PostgreSQL connections (the front's ${FRONT_POOL}, the bare peer's ${MAX_LEASE_CLIENTS}, 2 to spare); ${ADMIN_URL} has ${rows[0]!.free}: close other clients first (never raise max_connections on the shared server)`);
    }
  } finally {
    await admin.end();
  }
}


function loadgen(bin: string, args: string[], servers?: () => number[]): Load {
  const before = servers && cpuUs(servers());
  const r = runLoadgen(bin, args);
  if (servers && before !== undefined) {
    // A moment for the backends that end with the load generator's connections to be reaped (their time
    // then counts in the postmaster's cutime, read last).
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 300);
    r.server_cpu_us_per_op = (cpuUs(servers()) - before) / r.ops;
  }
  return r;
}

/**
 * The same load split between several Writ processes at once (one load generator each, `clients / n`
 * clients, keys numbered apart): their pairs and rates summed, the worse of their latencies, and the
 * CPU of all of them per pair.
 */
async function loadgenSplit(bin: string, urls: string[], pids: number[], clients: number, seconds: number, base: number, rest: string[]): Promise<Load> {
  const before = cpuUs(pids);
  const each = clients / urls.length;
  const runs = await Promise.all(urls.map((url, i) => runLoadgenAsync(bin, ['-url', url, '-clients', String(each), '-seconds', String(seconds), '-base', String(base + i * each), ...rest])));
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 300);
  const ops = runs.reduce((n, r) => n + r.ops, 0);
  return {
    ops,
    seconds,
    per_second: runs.reduce((n, r) => n + r.per_second, 0),
    p50_us: Math.max(...runs.map((r) => r.p50_us)),
    p99_us: Math.max(...runs.map((r) => r.p99_us)),
    errors: 0,
    server_cpu_us_per_op: (cpuUs(pids) - before) / ops,
  };
}

const TICK_US = 1e6 / Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim());

/**
 * CPU time (user + system, every thread) the processes `pids` have used, in µs, from /proc/<pid>/stat,
 * plus the time of their children that have exited and been waited for: a PostgreSQL backend that ends
 * with its connection (the load generator's pool closing) leaves its time to the postmaster's cutime.
 */
function cpuUs(pids: number[]): number {
  let ticks = 0;
  for (const pid of pids) {
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    } catch {
      continue; // gone since it was listed
    }
    // Fields after the command (which may hold spaces), counted from 3: utime 14, stime 15, cutime 16, cstime 17.
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    ticks += Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14]);
  }
  return ticks * TICK_US;
}

/**
 * Every process of the local PostgreSQL server (this machine's own, used by nothing else during the run):
 * its postmaster, backends and background workers. A backend reaped between two reads of one sample
 * could be lost or counted twice; the wait before the second sample (above) leaves none ending then.
 */
function postgresPids(): number[] {
  return execFileSync('pgrep', ['-u', 'postgres'], { encoding: 'utf8' }).trim().split('\n').map(Number);
}

async function listeningProcess(name: string, cmd: string, args: string[], port: number): Promise<ChildProcess> {
  const proc = spawn(cmd, args, { cwd: REPO, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  proc.stdout!.on('data', (d: Buffer) => (output += d.toString()));
  proc.stderr!.on('data', (d: Buffer) => (output += d.toString()));
  for (let i = 0; ; i++) {
    if (proc.exitCode !== null) throw new Error(`${name} exited: ${output}`);
    const ok = await fetch(`http://127.0.0.1:${port}/health`).then(() => true, () => false);
    if (ok) return proc;
    if (i > 300) throw new Error(`${name} did not listen: ${output}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The exact input Writ's policy engine evaluates for REQUEST (and its result), from an in-process Writ on the same graph. */
async function capturedInput(): Promise<{ input: DecisionInput; result: unknown }> {
  const dataDir = mkdtempSync(join(TMP, 'capture-'));
  const w = await openWrit(loadConfig({ dataDir, bundleDir: join(REPO, 'build/policy') }));
  try {
    const { manifest, baseDir } = readManifest(join(REPO, 'graph/example.yaml'));
    await applyManifest(w.ctx, GOVERNANCE_ID, manifest, baseDir);
    let captured: { input: DecisionInput; result: unknown } | null = null;
    const engine = w.ctx.policy;
    const original = engine.decide.bind(engine);
    (engine as { decide: typeof engine.decide }).decide = (input) => {
      const result = original(input);
      captured ??= { input: JSON.parse(JSON.stringify(input)) as DecisionInput, result };
      return result;
    };
    const d = await decide(w.ctx, PRINCIPAL, REQUEST);
    if (!d.allow || !captured) throw new Error('expected an allow for the benchmark request');
    return captured;
  } finally {
    await w.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

const fmt = (n: number) => Math.round(n).toLocaleString('en-US');
const ratioCell = (xs: number[]) => ratioSummary(xs).replace(/^(\S+)/, '**$1**');

interface Row {
  measure: string;
  clients: number;
  writ: Load[];
  peers: Record<string, Load[]>;
}

async function main(): Promise<void> {
  mkdirSync(TMP, { recursive: true });
  const work = mkdtempSync(join(TMP, 'side-by-side-'));
  const bin = join(work, 'loadgen');
  execFileSync('/usr/local/go/bin/go', ['build', '-o', bin, '.'], { cwd: join(REPO, 'bench/loadgen'), stdio: 'inherit' });
  const procs: ChildProcess[] = [];
  const cleanups: (() => Promise<void>)[] = [];
  const loads: number[] = [loadavg()[0]!];
  const rows: Row[] = [];
  /** Paced fdatasyncs of the disk between the lease rounds, µs (none when the leases are not run). */
  const syncs: number[] = [];
  let check = '';
  try {
    // Writ: a real `writ serve` on the example graph, data dir on this disk (WAL synced before every answer).
    const writPort = await freePort();
    const writDir = join(work, 'writ');
    const writ = await spawnListening('writ serve', [CLI, 'serve', '--data-dir', writDir, '--port', String(writPort), '--no-upstream', '--graph', 'graph/example.yaml'], {
      ...process.env,
      WRIT_UPSTREAM_URL: 'http://127.0.0.1:9',
    });
    procs.push(writ.proc);
    const writUrl = `http://127.0.0.1:${writPort}`;
    const common = ['-key', KEY_FILE, '-principal', PRINCIPAL];

    if (ONLY !== 'leases') {
      // OPA on the same policies and data the bundle is built from, given the input Writ evaluates.
      const { input, result } = await capturedInput();
      const opaPort = await freePort();
      const opa = await listeningProcess('opa', join(REPO, 'tools/bin/opa'), ['run', '--server', '--addr', `127.0.0.1:${opaPort}`, '--log-level', 'error', '--ignore', '*_test.rego', 'policies'], opaPort);
      procs.push(opa);
      const opaUrl = `http://127.0.0.1:${opaPort}/v1/data/writ/authz/decision`;
      const opaBody = join(work, 'opa-input.json');
      writeFileSync(opaBody, JSON.stringify({ input }));
      const writBody = join(work, 'decision-request.json');
      writeFileSync(writBody, JSON.stringify(REQUEST));
      const opaAnswer = ((await (await fetch(opaUrl, { method: 'POST', body: JSON.stringify({ input }) })).json()) as { result: unknown }).result;
      if (!isDeepStrictEqual(opaAnswer, result)) throw new Error(`OPA's answer differs from Writ's wasm result:\n${JSON.stringify(opaAnswer)}\n${JSON.stringify(result)}`);
      // And from Writ's own answer over HTTP (the unsigned fields of the decision).
      const { createCallerAssertion } = await import('../src/sdk/index.js');
      const { readFileSync } = await import('node:fs');
      const assertion = await createCallerAssertion({ principal: PRINCIPAL, privateJwk: JSON.parse(readFileSync(KEY_FILE, 'utf8')) as never });
      const http = (await (await fetch(`${writUrl}/v1/decisions`, { method: 'POST', headers: { authorization: `Bearer ${assertion}`, 'content-type': 'application/json' }, body: JSON.stringify(REQUEST) })).json()) as Record<string, unknown>;
      const o = opaAnswer as Record<string, unknown>;
      for (const k of ['allow', 'reasons', 'obligations', 'risk']) {
        if (!isDeepStrictEqual(http[k], o[k])) throw new Error(`Writ over HTTP and OPA differ on ${k}: ${JSON.stringify(http[k])} vs ${JSON.stringify(o[k])}`);
      }
      check = `OPA's answer for the captured input equals Writ's wasm result (whole object) and Writ's HTTP answer (allow, reasons, obligations, risk): allow=${String(o.allow)}, ${(o.reasons as unknown[]).length} reasons, obligations ${JSON.stringify(o.obligations)}.`;
      for (const clients of [16, 1]) {
        const row: Row = { measure: 'signed decisions/s over HTTP', clients, writ: [], peers: { OPA: [] } };
        // Over a caller session (the SDK's default): the same OPA runs as the assertion row.
        const sessionRow: Row = { measure: 'signed decisions/s over HTTP, caller session', clients, writ: [], peers: row.peers };
        rows.push(row, sessionRow);
        const writDecide = (seconds: number, session: boolean) => loadgen(bin, ['-mode', 'writ-decide', ...(session ? ['-session'] : []), '-url', writUrl, '-body', writBody, '-clients', String(clients), '-seconds', String(seconds), ...common], () => [writ.proc.pid!]);
        // warm-up
        writDecide(1, false);
        writDecide(1, true);
        loadgen(bin, ['-mode', 'opa', '-url', opaUrl, '-body', opaBody, '-clients', String(clients), '-seconds', '1']);
        for (let r = 0; r < ROUNDS; r++) {
          const runs = [
            () => row.writ.push(writDecide(SECONDS, false)),
            () => sessionRow.writ.push(writDecide(SECONDS, true)),
            () => row.peers.OPA!.push(loadgen(bin, ['-mode', 'opa', '-url', opaUrl, '-body', opaBody, '-clients', String(clients), '-seconds', String(SECONDS)], () => [opa.pid!])),
          ];
          for (const run of r % 2 === 0 ? runs : runs.reverse()) run();
          loads.push(loadavg()[0]!);
          console.log(`decisions ${clients} clients round ${r}: writ ${fmt(row.writ.at(-1)!.per_second)}/s, writ session ${fmt(sessionRow.writ.at(-1)!.per_second)}/s, opa ${fmt(row.peers.OPA!.at(-1)!.per_second)}/s`);
        }
      }
    }

    if (ONLY !== 'decisions') {
      await checkConnectionBudget();
      const pgDb = await createTestDatabase('writ_bench_cas');
      cleanups.push(() => pgDb.drop());
      const redisPort = await freePort();
      const redisDir = join(work, 'redis');
      mkdirSync(redisDir);
      const redis = spawn('redis-server', ['--port', String(redisPort), '--bind', '127.0.0.1', '--dir', redisDir, '--appendonly', 'yes', '--appendfsync', 'always', '--save', '', '--daemonize', 'no'], { stdio: 'ignore' });
      procs.push(redis);
      for (let i = 0; ; i++) {
        try {
          execFileSync('redis-cli', ['-p', String(redisPort), 'ping'], { stdio: 'pipe' });
          break;
        } catch (e) {
          if (i > 100) throw e;
          await new Promise((r) => setTimeout(r, 100));
        }
      }
      // The same CAS behind the least an authenticated HTTP front must do (bench/authed-cas-front.ts), on a database of its own.
      const frontDb = await createTestDatabase('writ_bench_front');
      cleanups.push(() => frontDb.drop());
      const front = await onFreePort((port) => spawnListening('the authenticated CAS front', [join(REPO, 'dist/bench/authed-cas-front.js'), '--port', String(port), '--database', frontDb.url, '--key', KEY_FILE, '--pool', String(FRONT_POOL)], process.env));
      procs.push(front.proc);
      const frontUrl = `http://127.0.0.1:${front.port}`;
      // Each side's server CPU per pair too (CPU time, unlike throughput, does not count waiting for a core):
      // Writ's process, every PostgreSQL process, the private Redis, the front's process and PostgreSQL's.
      const writPid = writ.proc.pid!;
      const redisPid = redis.pid!;
      const frontPid = front.proc.pid!;
      const peers = {
        'PostgreSQL CAS': (clients: number, seconds: number) => loadgen(bin, ['-mode', 'pg-lease', '-dsn', pgDb.url, '-clients', String(clients), '-seconds', String(seconds)], postgresPids),
        // More clients than the pool: PostgreSQL on 2 cores does better with fewer backends than clients
        // (at 64 clients, 16 connections gave 1.3–1.5× the pairs/s of 64 run alone), so it is judged that way too.
        [POOLED_PG]: (clients: number, seconds: number) => loadgen(bin, ['-mode', 'pg-lease', '-dsn', pgDb.url, '-clients', String(clients), '-conns', String(POOLED_PG_CONNECTIONS), '-seconds', String(seconds)], postgresPids),
        'Redis AOF always': (clients: number, seconds: number) => loadgen(bin, ['-mode', 'redis-lease', '-addr', `127.0.0.1:${redisPort}`, '-clients', String(clients), '-seconds', String(seconds)], () => [redisPid]),
        'PostgreSQL CAS behind an authenticated HTTP front': (clients: number, seconds: number) => loadgen(bin, ['-mode', 'writ-lease', '-url', frontUrl, '-clients', String(clients), '-seconds', String(seconds), '-base', '1', ...common], () => [frontPid, ...postgresPids()]),
      };
      const writLease = (clients: number, seconds: number) => loadgen(bin, ['-mode', 'writ-lease', '-url', writUrl, '-clients', String(clients), '-seconds', String(seconds), '-base', '1', ...common], () => [writPid]);
      // The same HTTP pairs signed over a caller session (each client opens one before its measured
      // window, then an HS256 request token per request): keys numbered apart.
      const writLeaseSession = (clients: number, seconds: number) => loadgen(bin, ['-mode', 'writ-lease', '-session', '-url', writUrl, '-clients', String(clients), '-seconds', String(seconds), '-base', '5001', ...common], () => [writPid]);
      // The same pairs on the lease stream (one WebSocket per client, authenticated once when it opens,
      // as each PostgreSQL or Redis connection is): keys numbered apart from the HTTP clients'.
      const writStream = (clients: number, seconds: number) => loadgen(bin, ['-mode', 'writ-lease-stream', '-url', writUrl, '-clients', String(clients), '-seconds', String(seconds), '-base', '1001', ...common], () => [writPid]);
      // And split between two `writ serve` processes on the same SQLite file (the second opened on the
      // first one's data directory), each stream on one of them: Writ on both cores.
      const writ2 = await onFreePort((port) => spawnListening('writ serve (second process on the same file)', [CLI, 'serve', '--data-dir', writDir, '--port', String(port), '--no-upstream', '--graph', 'graph/example.yaml'], { ...process.env, WRIT_UPSTREAM_URL: 'http://127.0.0.1:9' }));
      procs.push(writ2.proc);
      const writUrls = [writUrl, `http://127.0.0.1:${writ2.port}`];
      const writStreamTwo = (clients: number, seconds: number) => loadgenSplit(bin, writUrls, [writPid, writ2.proc.pid!], clients, seconds, 3001, ['-mode', 'writ-lease-stream', ...common]);
      for (const clients of [16, MAX_LEASE_CLIENTS]) {
        // The pooled PostgreSQL peer only where it differs from one connection per client.
        const here = Object.entries(peers).filter(([name]) => name !== POOLED_PG || clients > POOLED_PG_CONNECTIONS);
        const row: Row = { measure: 'durable lease acquire+release pairs/s', clients, writ: [], peers: Object.fromEntries(here.map(([name]) => [name, []])) };
        // The stream is judged against the bare engines (the authenticated front authenticates every request).
        const bare = (...names: string[]) => Object.fromEntries(names.filter((n) => row.peers[n]).map((n) => [n, row.peers[n]!]));
        // Over a caller session: the same peers as the assertion row (their same runs).
        const sessionRow: Row = { measure: 'durable lease acquire+release pairs/s, caller session', clients, writ: [], peers: row.peers };
        const streamRow: Row = { measure: 'durable lease pairs/s on the lease stream', clients, writ: [], peers: bare('PostgreSQL CAS', POOLED_PG, 'Redis AOF always') };
        const streamTwoRow: Row = { measure: 'durable lease pairs/s on the lease stream, 2 processes on one file', clients, writ: [], peers: bare('PostgreSQL CAS', POOLED_PG) };
        rows.push(row, sessionRow, streamRow, streamTwoRow);
        writLease(clients, 1);
        writLeaseSession(clients, 1);
        writStream(clients, 1);
        await writStreamTwo(clients, 1);
        for (const [, p] of here) p(clients, 1);
        if (syncs.length === 0) syncs.push(...(await pacedSyncProbe(work, PROBE_SYNCS, PROBE_EVERY_MS)));
        for (let r = 0; r < ROUNDS; r++) {
          const runs = [
            async () => row.writ.push(writLease(clients, SECONDS)),
            async () => sessionRow.writ.push(writLeaseSession(clients, SECONDS)),
            async () => streamRow.writ.push(writStream(clients, SECONDS)),
            async () => streamTwoRow.writ.push(await writStreamTwo(clients, SECONDS)),
            ...here.map(([name, p]) => async () => row.peers[name]!.push(p(clients, SECONDS))),
          ];
          for (const run of r % 2 === 0 ? runs : runs.reverse()) await run();
          loads.push(loadavg()[0]!);
          syncs.push(...(await pacedSyncProbe(work, PROBE_SYNCS, PROBE_EVERY_MS)));
          console.log(`leases ${clients} clients round ${r}: writ ${fmt(row.writ.at(-1)!.per_second)}/s, writ session ${fmt(sessionRow.writ.at(-1)!.per_second)}/s, writ stream ${fmt(streamRow.writ.at(-1)!.per_second)}/s, two processes ${fmt(streamTwoRow.writ.at(-1)!.per_second)}/s, ${Object.entries(row.peers).map(([n, l]) => `${n} ${fmt(l.at(-1)!.per_second)}/s`).join(', ')}`);
        }
      }
    }
  } finally {
    for (const p of procs) {
      if (p.exitCode === null && p.signalCode === null) {
        p.kill('SIGTERM');
        await new Promise((r) => p.once('exit', r));
      }
    }
    for (const c of cleanups) await c();
    rmSync(work, { recursive: true, force: true });
  }

  const lines: string[] = [];
  const cpuLines: string[] = [];
  const cpu = (runs: Load[]) => fmt(median(runs.map((l) => l.server_cpu_us_per_op!)));
  for (const row of rows) {
    for (const [peer, runs] of Object.entries(row.peers)) {
      const ratios = row.writ.map((w, i) => w.per_second / runs[i]!.per_second);
      lines.push(`| ${row.measure}, ${row.clients} client${row.clients > 1 ? 's' : ''} | ${fmt(median(row.writ.map((l) => l.per_second)))} (p50 ${fmt(median(row.writ.map((l) => l.p50_us)))} µs, p99 ${fmt(median(row.writ.map((l) => l.p99_us)))} µs) | ${peer} ${fmt(median(runs.map((l) => l.per_second)))} (p50 ${fmt(median(runs.map((l) => l.p50_us)))} µs, p99 ${fmt(median(runs.map((l) => l.p99_us)))} µs) | ${ratioCell(ratios)} | ${ratios.map((x) => x.toFixed(2)).join(', ')} |`);
      if (row.writ[0]?.server_cpu_us_per_op === undefined || runs[0]?.server_cpu_us_per_op === undefined) continue;
      const cpuRatios = row.writ.map((w, i) => w.server_cpu_us_per_op! / runs[i]!.server_cpu_us_per_op!);
      cpuLines.push(`| ${row.measure.replace('/s', '')}, ${row.clients} client${row.clients > 1 ? 's' : ''} | ${cpu(row.writ)} | ${peer} ${cpu(runs)} | ${ratioSummary(cpuRatios)} | ${cpuRatios.map((x) => x.toFixed(2)).join(', ')} |`);
    }
  }
  const section = [
    '## Side by side: Writ vs OPA, PostgreSQL and Redis (bench/side-by-side.ts)',
    '',
    '```',
    `npx tsc -p tsconfig.json && node dist/bench/side-by-side.js --write --seconds ${SECONDS} --rounds ${ROUNDS}`,
    '```',
    '',
    machineLine(),
    `1-minute load average during the run: ${loads.map((l) => l.toFixed(1)).join(' → ')} (2 shared cores: the load generator, the server under test and other sessions share them).`,
    ...(syncs.length === 0 ? [] : [(() => {
      const d = summarize(syncs);
      return `The disk in the same run (the lease ratios move with it: the peers sync per operation, Writ once per group commit): write 4 KiB + fdatasync, one every ${PROBE_EVERY_MS} ms, ${PROBE_SYNCS} before the first lease round and after each, beside Writ's data directory: p50 ${Math.round(d.p50).toLocaleString('en-US')} µs, p90 ${Math.round(d.p90).toLocaleString('en-US')} µs, p99 ${Math.round(d.p99).toLocaleString('en-US')} µs (${d.n} syncs).`;
    })()]),
    '',
    `One load generator for every side (bench/loadgen, Go: closed loops, one keep-alive connection per client unless a peer's pool is named, Ed25519 caller assertions signed with the standard library exactly as the SDK makes them), so no side is measured by a slower client. ${SECONDS} s per measurement after a 1 s warm-up, ${ROUNDS} rounds, the order flipped every round; the ratio is Writ/peer within a round, reported as median (range) with each round's value.`,
    '',
    `- Decisions: \`POST /v1/decisions\` (${PRINCIPAL} ${REQUEST.action} ${REQUEST.resource} [${REQUEST.fields.join(', ')}] in production on graph/example.yaml; the caller assertion verified and its jti spent durably, chains resolved, Rego evaluated, the decision signed) vs \`opa run --server\` on policies/ (the same Rego and data.json the bundle is built from) answering \`POST /v1/data/writ/authz/decision\` with the exact input document Writ evaluates for that request (captured from Writ's policy engine in-process). ${check}`,
    '- Leases: Writ `POST /v1/leases` + `DELETE /v1/leases/{id}` (a decision fetched per client every 20 s, outside the pair count; each call a fresh assertion whose jti is spent in the lease\'s own commit; WAL synced before each answer) vs PostgreSQL 15 (the shared local server, synchronous_commit on, a database of its own): `UPDATE … SET holder, epoch = epoch + 1 … WHERE key = $1 AND (holder IS NULL OR expired) RETURNING epoch`, then a conditional `UPDATE` release, each autocommitted (pgx pool, one connection per client; with more clients than ' + POOLED_PG_CONNECTIONS + ' also with the clients sharing ' + POOLED_PG_CONNECTIONS + ' connections, which PostgreSQL on 2 cores serves faster), vs a private `redis-server --appendonly yes --appendfsync always`: `SET key token NX PX 10000`, then a Lua compare-and-delete, vs the same PostgreSQL CAS behind the least an authenticated HTTP lease service must do (bench/authed-cas-front.ts: fastify, the same routes and load-generator mode as Writ, the caller\'s Ed25519 assertion verified by libsodium on its event loop (Writ hands its checks to a libsodium worker thread while busy with other requests in flight; the front did no better that way), its jti spent and the key compare-and-set in one autocommitted statement, on a pool of at most ' + FRONT_POOL + ' connections kept open; no policy, decision, graph, receipts or queue). Each client on its own key.',
    '- Decisions over a caller session: the same requests, each client having opened a caller session before its measured window, each request signed with a fresh single-use HS256 request token (its jti spent as an assertion\'s is); the same OPA runs as the assertion row.',
    '- Caller session: the same HTTP pairs, each client having opened a caller session (`POST /v1/sessions`, one assertion, X25519) before its measured window, each request then signed with a fresh single-use HS256 request token bound to its method and path (its jti spent as an assertion\'s is); the same peers and their same runs as the assertion row.',
    '- Lease stream: the same pairs as `{"op": "acquire"}` and `{"op": "release"}` messages on `GET /v1/leases/stream`, one WebSocket per client opened with one caller assertion (as a PostgreSQL or Redis connection authenticates once), the same decision, checks, lease transaction and WAL sync before each answer; judged against the bare engines only. "2 processes on one file": the same clients split evenly between two `writ serve` processes on the same data directory (one load generator each, run at once; their rates summed, the worse latency, both processes\' CPU).',
    '',
    '| measure | Writ /s | peer /s | ratio Writ/peer: median (range) | per round |',
    '|---|---:|---:|---:|---|',
    ...lines,
    ...(cpuLines.length === 0 ? [] : [
      '',
      'Server CPU time per operation (a decision, or a lease pair): user + system, all threads, from /proc over each measurement; PostgreSQL: all its processes, the backends that ended with their connections included; the front: its process and PostgreSQL\'s. Unlike the rates, CPU time does not count waiting for one of the 2 shared cores or how many cores a side can use; lower is better, so a ratio above 1 means Writ spends more. Ratios are medians of per-round ratios.',
      '',
      '| measure | Writ server CPU µs/op | peer server CPU µs/op | Writ ÷ peer: median (range) | per round |',
      '|---|---:|---:|---:|---|',
      ...cpuLines,
    ]),
  ].join('\n');
  console.log(section);
  if (process.argv.includes('--write')) writeResultsSection('side-by-side', section);
}

void main().catch((e) => {
  console.error(e);
  process.exit(1);
});
