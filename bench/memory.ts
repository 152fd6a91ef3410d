/**
 * RSS of `writ serve` under sustained decision + lease load, then idle: does it plateau, and does it
 * give memory back? The same Go load generator as bench/side-by-side.ts drives it (decisions, lease
 * pairs over HTTP and lease pairs on the lease stream, at once, closed loops); RSS is read from
 * /proc/<pid>/status every `--sample` seconds.
 *
 *   npx tsc -p tsconfig.json && node dist/bench/memory.js [--write] [--minutes 10] [--idle 120] [--clients 8] [--stream-clients 8] [--auth session|assertion]
 *
 * `--auth` (default `session`, the SDK's default): how the decision and HTTP lease clients prove who they
 * are: over a caller session (one `POST /v1/sessions` each, then an HS256 request token per request) or with
 * an Ed25519 caller assertion per request. The lease stream opens with one assertion either way.
 *
 * Target (issue 10): over a 10-minute run the last 5 minutes grow < 5 MB, and most is returned when idle.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { CLI, freePort, REPO, spawnListening } from '../scripts/server-process.js';
import { runLoadgenAsync } from './loadgen-run.js';
import { argValue as arg, machineLine, writeResultsSection } from './results-file.js';

const TMP = join(REPO, 'bench', 'tmp');
const MINUTES = Number(arg('minutes', '10'));
const IDLE_S = Number(arg('idle', '120'));
const CLIENTS = Number(arg('clients', '8'));
/** Clients on the lease stream (each one WebSocket for the whole run); 0 leaves the stream out. */
const STREAM_CLIENTS = Number(arg('stream-clients', String(CLIENTS)));
const SAMPLE_S = Number(arg('sample', '10'));
const AUTH = arg('auth', 'session');
if (AUTH !== 'session' && AUTH !== 'assertion') throw new Error(`--auth is session or assertion, not ${AUTH}`);

const rssMb = (pid: number) => {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : NaN;
};

async function main(): Promise<void> {
  mkdirSync(TMP, { recursive: true });
  const work = mkdtempSync(join(TMP, 'memory-'));
  const bin = join(work, 'loadgen');
  execFileSync('/usr/local/go/bin/go', ['build', '-o', bin, '.'], { cwd: join(REPO, 'bench/loadgen'), stdio: 'inherit' });
  const port = await freePort();
  const writ = await spawnListening('writ serve', [CLI, 'serve', '--data-dir', join(work, 'writ'), '--port', String(port), '--no-upstream', '--graph', 'graph/example.yaml'], {
    ...process.env,
    WRIT_UPSTREAM_URL: 'http://127.0.0.1:9',
  });
  const pid = writ.proc.pid!;
  const url = `http://127.0.0.1:${port}`;
  const samples: { t: number; mb: number; phase: 'load' | 'idle' }[] = [];
  const t0 = Date.now();
  const sample = (phase: 'load' | 'idle') => {
    samples.push({ t: (Date.now() - t0) / 1000, mb: rssMb(pid), phase });
    const s = samples.at(-1)!;
    console.log(`${s.t.toFixed(0)} s ${phase}: RSS ${s.mb.toFixed(1)} MB (load ${loadavg()[0]!.toFixed(1)})`);
  };
  const loadAverages: number[] = [];
  let results: Awaited<ReturnType<typeof runLoadgenAsync>>[];
  try {
    sample('load');
    const startMb = samples[0]!.mb;
    const caller = ['-key', join(REPO, 'fixtures/keys/seo-agent-7.jwk'), '-principal', 'seo-agent-7', '-url', url, '-seconds', String(MINUTES * 60)];
    const common = [...caller, '-clients', String(CLIENTS), ...(AUTH === 'session' ? ['-session'] : [])];
    const body = join(work, 'decision.json');
    (await import('node:fs')).writeFileSync(body, JSON.stringify({ action: 'update_post', resource: 'wp:post:1024', environment: 'production', fields: ['meta_description', 'title'] }));
    const loads: { what: string; run: ReturnType<typeof runLoadgenAsync> }[] = [
      { what: 'decisions', run: runLoadgenAsync(bin, ['-mode', 'writ-decide', '-body', body, ...common]) },
      { what: 'lease pairs over HTTP', run: runLoadgenAsync(bin, ['-mode', 'writ-lease', '-base', '100', ...common]) },
    ];
    if (STREAM_CLIENTS > 0) {
      loads.push({ what: 'lease pairs on the lease stream', run: runLoadgenAsync(bin, ['-mode', 'writ-lease-stream', '-base', '1001', ...caller, '-clients', String(STREAM_CLIENTS)]) });
    }
    const running = Promise.all(loads.map((l) => l.run));
    const timer = setInterval(() => {
      sample('load');
      loadAverages.push(loadavg()[0]!);
    }, SAMPLE_S * 1000);
    results = await running;
    clearInterval(timer);
    sample('load');
    const endLoad = samples.length;
    for (let s = 0; s < IDLE_S; s += SAMPLE_S) {
      await new Promise((r) => setTimeout(r, SAMPLE_S * 1000));
      sample('idle');
    }
    const load = samples.slice(0, endLoad);
    const at = (sec: number) => load.reduce((best, s) => (Math.abs(s.t - sec) < Math.abs(best.t - sec) ? s : best));
    const half = at((MINUTES * 60) / 2);
    const end = load.at(-1)!;
    const peak = Math.max(...load.map((s) => s.mb));
    const idle = samples.at(-1)!;
    const secondHalf = load.filter((s) => s.t >= half.t).map((s) => s.mb);
    // GC makes single samples jump by tens of MB and back: the medians of the second half's first and last minute show the trend.
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;
    const windowMedian = (from: number) => median(load.filter((s) => s.t >= from && s.t <= from + 60).map((s) => s.mb));
    const firstMinute = windowMedian(half.t);
    const lastMinute = windowMedian(end.t - 60);
    const section = [
      '## Memory under sustained load (bench/memory.ts)',
      '',
      '```',
      `npx tsc -p tsconfig.json && node dist/bench/memory.js --write --minutes ${MINUTES} --idle ${IDLE_S} --clients ${CLIENTS} --stream-clients ${STREAM_CLIENTS} --auth ${AUTH}`,
      '```',
      '',
      machineLine(),
      `1-minute load average while loaded: ${Math.min(...loadAverages).toFixed(1)}–${Math.max(...loadAverages).toFixed(1)}.`,
      '',
      `\`writ serve\` (SQLite, graph/example.yaml) under ${MINUTES} min of decisions (${CLIENTS} clients), lease acquire+release pairs over HTTP (${CLIENTS} clients on their own keys; both ${AUTH === 'session' ? 'over a caller session each (an HS256 request token per request)' : 'with an Ed25519 caller assertion per request'})${STREAM_CLIENTS > 0 ? ` and on the lease stream (${STREAM_CLIENTS} clients on their own keys, one WebSocket each for the whole run)` : ''} at once, from bench/loadgen; then ${IDLE_S} s idle. RSS from /proc every ${SAMPLE_S} s. Served: ${results.map((r, i) => `${r.ops.toLocaleString('en-US')} ${loads[i]!.what} (${Math.round(r.per_second)}/s)`).join(', ')}.`,
      '',
      '| point | RSS MB |',
      '|---|---:|',
      `| start (idle, after the graph loaded) | ${startMb.toFixed(1)} |`,
      `| after 1 min of load | ${at(60).mb.toFixed(1)} |`,
      `| half-way (${half.t.toFixed(0)} s) | ${half.mb.toFixed(1)} |`,
      `| end of load (${end.t.toFixed(0)} s) | ${end.mb.toFixed(1)} |`,
      `| peak under load | ${peak.toFixed(1)} |`,
      `| second half: min / max | ${Math.min(...secondHalf).toFixed(1)} / ${Math.max(...secondHalf).toFixed(1)} |`,
      `| after ${IDLE_S} s idle | ${idle.mb.toFixed(1)} |`,
      '',
      `Growth over the second half of the load: ${(end.mb - half.mb).toFixed(1)} MB from sample to sample, ${(lastMinute - firstMinute).toFixed(1)} MB between the medians of its first and last minute (${firstMinute.toFixed(1)} → ${lastMinute.toFixed(1)} MB) (target < 5 MB over the last 5 minutes of a 10-minute run: ${MINUTES >= 10 ? (Math.max(end.mb - half.mb, lastMinute - firstMinute) < 5 ? 'met' : 'MISSED') : 'run shorter than 10 min, not judged'}). Idle returned ${(end.mb - idle.mb).toFixed(1)} MB of the ${(end.mb - startMb).toFixed(1)} MB gained under load (${Math.round((100 * (end.mb - idle.mb)) / Math.max(0.1, end.mb - startMb))}%).`,
      '',
      'Samples (s: MB): ' + samples.map((s) => `${s.t.toFixed(0)}: ${s.mb.toFixed(0)}${s.phase === 'idle' ? ' (idle)' : ''}`).join(', '),
    ].join('\n');
    console.log(section);
    if (process.argv.includes('--write')) writeResultsSection('memory', section);
  } finally {
    writ.proc.kill('SIGTERM');
    await writ.exited;
    rmSync(work, { recursive: true, force: true });
  }
}

void main().catch((e) => {
  console.error(e);
  process.exit(1);
});
