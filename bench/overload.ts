/**
 * Overload: a real `writ serve` (SQLite, the sample upstream in its own process) with a per-principal
 * rate limit, offered 10× that limit for a while by an open-loop generator (requests leave on a fixed
 * schedule whatever the answers, as many clients would send them), while a probe asks /healthz every
 * 10 ms. Each offered request is a decision (`POST /v1/decisions`) or, when the principal holds an
 * unused allowed decision, the write it allows (`POST /v1/actions`, a fresh post each time). Reports
 * offered vs accepted rates, answers by status, healthz latency under load, and whether every write
 * answered 201 is COMPLETED in the receipt log and applied in the upstream afterwards (lost writes).
 *
 *   npx tsc -p tsconfig.json && node dist/bench/overload.js [--rate 20] [--factor 10] [--seconds 20] [--write]
 *
 * `--rate` is WRIT_RATE_LIMIT_PER_S (per principal, burst 2×); two principals write. `--write` replaces
 * this benchmark's section of bench/RESULTS.md. Exits 1 if a write was lost or healthz p99 ≥ 50 ms.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import type { JWK } from 'jose';
import { REPO, startServerProcess } from '../scripts/server-process.js';
import { createCallerAssertion } from '../src/sdk/assertion.js';
import { machineLine, summarize, writeResultsSection } from './results-file.js';

const { values } = parseArgs({
  options: {
    rate: { type: 'string', default: '20' },
    factor: { type: 'string', default: '10' },
    seconds: { type: 'string', default: '20' },
    'data-dir': { type: 'string' },
    write: { type: 'boolean', default: false },
  },
});
const RATE = Number(values.rate);
const FACTOR = Number(values.factor);
const SECONDS = Number(values.seconds);
const PRINCIPALS = ['seo-agent-7', 'seo-control-plane'];
const MAX_CLIENT_INFLIGHT = 1024;

const key = (p: string) => JSON.parse(readFileSync(join(REPO, 'fixtures/keys', `${p}.jwk`), 'utf8')) as JWK;
const server = await startServerProcess({ separateUpstream: true, ...(values['data-dir'] ? { dataDir: values['data-dir'] } : {}), env: { WRIT_RATE_LIMIT_PER_S: String(RATE) } });
const admin = JSON.parse(readFileSync(join(server.dataDir, 'admin.jwk'), 'utf8')) as JWK;

/** Caller assertions signed before the run, so that the generator's time goes to sending, not signing. */
const presigned = new Map<string, string[]>();
async function presign(principal: string, privateJwk: JWK, n: number): Promise<void> {
  const list: string[] = [];
  for (let i = 0; i < n; i++) list.push(await createCallerAssertion({ principal, privateJwk, ttlSeconds: 240 }));
  presigned.set(principal, list);
}

async function call(principal: string, privateJwk: JWK, method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
  const assertion = presigned.get(principal)?.pop() ?? (await createCallerAssertion({ principal, privateJwk }));
  const res = await fetch(server.url + path, {
    method,
    headers: { authorization: `Bearer ${assertion}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  let json: any = null;
  try {
    json = JSON.parse(text);
  } catch {
    /* not JSON */
  }
  return { status: res.status, body: json, retryAfter: res.headers.get('retry-after') };
}

/**
 * Asks /healthz every 10 ms for `ms`, one request at a time, from a process of its own (the generator's
 * event loop is busy with a thousand answers; its timers would measure the generator, not Writ).
 */
function probeHealthz(ms: number): Promise<number[]> {
  const source = `
    const url = process.argv[1], until = performance.now() + Number(process.argv[2]), samples = [];
    (async () => {
      while (performance.now() < until) {
        const t = performance.now();
        const res = await fetch(url);
        await res.text();
        samples.push((performance.now() - t) * 1000);
        await new Promise((r) => setTimeout(r, 10));
      }
      process.stdout.write(JSON.stringify(samples));
    })();`;
  return new Promise((resolve, reject) => {
    execFile(process.execPath, ['-e', source, `${server.url}/healthz`, String(ms)], { maxBuffer: 1 << 26 }, (e, out) => (e ? reject(e) : resolve(JSON.parse(out) as number[])));
  });
}

/** Writ's own view, from its Prometheus metrics: CPU seconds so far, and the event-loop delay since the last scrape. */
async function writMetrics(): Promise<{ cpuS: number; lagP99Ms: number; lagMaxMs: number }> {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  const value = (name: string) => Number(new RegExp(`^${name} ([0-9.e+-]+)`, 'm').exec(text)?.[1] ?? NaN);
  return { cpuS: value('writ_process_cpu_seconds_total'), lagP99Ms: value('writ_nodejs_eventloop_lag_p99_seconds') * 1000, lagMaxMs: value('writ_nodejs_eventloop_lag_max_seconds') * 1000 };
}

let exit = 0;
let section = '';
try {
  const idle = await probeHealthz(2000);

  const byStatus: Record<string, number> = {};
  const sent = { decisions: 0, writes: 0 };
  let skipped = 0;
  let inflight = 0;
  let retryAfterMissing = 0;
  const acknowledged: { receipt: string; post: string }[] = [];
  const ready = new Map<string, { token: string; post: string }[]>(PRINCIPALS.map((p) => [p, []]));
  const keys = new Map(PRINCIPALS.map((p) => [p, key(p)]));
  let nextPost = 100_000;

  const offer = async (principal: string) => {
    const jwk = keys.get(principal)!;
    const decisions = ready.get(principal)!;
    const decision = decisions.shift();
    let r: Awaited<ReturnType<typeof call>>;
    if (decision) {
      sent.writes++;
      const { token, post } = decision;
      r = await call(principal, jwk, 'POST', '/v1/actions', { action: 'update_post', resource: `wp:post:${post}`, fields: ['meta_description'], payload: { meta_description: `load ${post}` }, expected_version: 0 }, { 'writ-decision': token, 'idempotency-key': `overload-${post}` });
      if (r.status === 201) acknowledged.push({ receipt: r.body.receipt.receipt_id, post });
      // A write refused before its intent (429, 503) leaves the decision unspent: use it again.
      else if (r.status === 429 || r.status === 503) decisions.push(decision);
    } else {
      sent.decisions++;
      // A new post per decision: each write creates a post, so no write waits for another.
      const post = String(nextPost++);
      r = await call(principal, jwk, 'POST', '/v1/decisions', { action: 'update_post', resource: `wp:post:${post}`, environment: 'production', fields: ['meta_description'] });
      if (r.status === 200 && !r.body.allow) throw new Error(`${principal} is not allowed: ${JSON.stringify(r.body.reasons)}`);
      if (r.status === 200) decisions.push({ token: r.body.token, post });
    }
    byStatus[r.status] = (byStatus[r.status] ?? 0) + 1;
    if ((r.status === 429 || r.status === 503) && !r.retryAfter) retryAfterMissing++;
  };

  const perPrincipal = RATE * FACTOR;
  for (const p of PRINCIPALS) await presign(p, keys.get(p)!, Math.ceil(perPrincipal * SECONDS * 1.05));
  const before = await writMetrics();
  const start = performance.now();
  const end = start + SECONDS * 1000;
  const healthz = probeHealthz(SECONDS * 1000);
  const pending = new Set<Promise<void>>();
  const due = new Map(PRINCIPALS.map((p) => [p, 0]));
  const errors: string[] = [];
  while (performance.now() < end) {
    const elapsed = (performance.now() - start) / 1000;
    for (const p of PRINCIPALS) {
      const target = Math.floor(elapsed * perPrincipal);
      for (let n = due.get(p)!; n < target; n++) {
        if (inflight >= MAX_CLIENT_INFLIGHT) {
          skipped++;
          continue;
        }
        inflight++;
        const task = offer(p).catch((e: unknown) => void errors.push(String(e))).finally(() => {
          inflight--;
          pending.delete(task);
        });
        pending.add(task);
      }
      due.set(p, target);
    }
    await new Promise((r) => setTimeout(r, 5));
  }
  const loadSamples = await healthz;
  const during = await writMetrics();
  await Promise.all(pending);
  const wall = (performance.now() - start) / 1000;

  // Afterwards, as governance (not rate limited): every acknowledged write is COMPLETED and in the upstream.
  let pendingLeft = (await call('governance', admin, 'GET', '/v1/receipts?status=PENDING')).body.receipts.length;
  for (let i = 0; i < 40 && pendingLeft > 0; i++) {
    await new Promise((r) => setTimeout(r, 500));
    pendingLeft = (await call('governance', admin, 'GET', '/v1/receipts?status=PENDING')).body.receipts.length;
  }
  let lost = 0;
  for (const a of acknowledged) {
    const receipt = (await call('governance', admin, 'GET', `/v1/receipts/${a.receipt}`)).body.receipt;
    const found = (await (await fetch(`${server.upstreamUrl}/posts/${a.post}/writes/${a.receipt}`)).json()) as { applied: boolean };
    if (receipt?.status !== 'COMPLETED' || !found.applied) lost++;
  }
  const upstreamTotal = ((await (await fetch(`${server.upstreamUrl}/writes`)).json()) as { total: number }).total;
  const verify = (await call('governance', admin, 'GET', '/v1/audit/verify')).body;

  const offered = sent.decisions + sent.writes;
  const accepted = (byStatus[200] ?? 0) + (byStatus[201] ?? 0);
  const h = summarize(loadSamples);
  const i = summarize(idle);
  const ms = (us: number) => (us / 1000).toFixed(1);
  const statuses = Object.entries(byStatus).sort(([a], [b]) => Number(a) - Number(b)).map(([s, n]) => `${s}: ${n}`).join(', ');
  console.log({ during, before, offered, accepted, byStatus, skipped, acknowledged: acknowledged.length, lost, upstreamTotal, pendingLeft, healthzP99ms: h.p99 / 1000, errors: errors.slice(0, 3) });
  if (lost > 0 || h.p99 >= 50_000 || !verify.ok || errors.length > 0) exit = 1;

  section = `## Overload: 10× the rate limit against a real writ serve (bench/overload.ts)

Command: \`npx tsc -p tsconfig.json && node dist/bench/overload.js --rate ${RATE} --factor ${FACTOR} --seconds ${SECONDS} --write\`
(\`writ serve\` as its own process on SQLite, the sample upstream in another; \`WRIT_RATE_LIMIT_PER_S=${RATE}\`, burst ${2 * RATE},
${PRINCIPALS.length} principals (${PRINCIPALS.join(', ')}), so the configured limit is ${RATE * PRINCIPALS.length} requests/s in all. An open-loop
generator offers ${FACTOR}× that, ${perPrincipal} requests/s per principal on a fixed schedule, for ${SECONDS} s: each request is a decision,
or the write an unused allowed decision allows (a new post each time); a write refused with 429/503 keeps its decision for the next try.
Caller assertions are signed before the run.
A probe in a process of its own asks \`/healthz\` every 10 ms meanwhile, one request at a time.)

| figure | value |
|---|---|
| offered | ${offered} requests in ${wall.toFixed(1)} s = **${(offered / wall).toFixed(0)} requests/s** (${sent.decisions} decisions, ${sent.writes} writes; ${skipped} not sent because ${MAX_CLIENT_INFLIGHT} were already in flight) |
| accepted (200/201) | ${accepted} = **${(accepted / wall).toFixed(1)} requests/s** (limit ${RATE * PRINCIPALS.length}/s plus the initial bursts of ${2 * RATE} each) |
| answers by status | ${statuses} |
| 429/503 without Retry-After | ${retryAfterMissing} |
| writes acknowledged (201) | ${acknowledged.length} |
| **lost** (acknowledged but not COMPLETED in the receipt log or not applied in the upstream) | **${lost}** |
| upstream writes in all / PENDING receipts left | ${upstreamTotal} / ${pendingLeft} |
| receipt chain | ${verify.ok ? 'verifies' : 'DOES NOT VERIFY'} (${verify.entries} entries) |
| **healthz under load** | ${h.n} probes: p50 ${ms(h.p50)} ms, p90 ${ms(h.p90)} ms, **p99 ${ms(h.p99)} ms**, max ${ms(h.max)} ms (target p99 < 50 ms: ${h.p99 < 50_000 ? 'met' : 'NOT met'}) |
| Writ's own event loop during the run (its /metrics, prom-client) | delay p99 ${during.lagP99Ms.toFixed(1)} ms, max ${during.lagMaxMs.toFixed(1)} ms; CPU ${(during.cpuS - before.cpuS).toFixed(1)} s in ${SECONDS} s (${(((during.cpuS - before.cpuS) / SECONDS) * 100).toFixed(0)}% of one core) |
| healthz idle, before the run | ${i.n} probes: p50 ${ms(i.p50)} ms, p99 ${ms(i.p99)} ms |

${machineLine()} The generator, the probe, Writ and the upstream share the 2 cores with the other work on this machine (see
the load average), so the probe's latency includes waiting for a core: an upper bound on what Writ adds.`;
  console.log(`\n${section}`);
} finally {
  await server.stop();
}
if (values.write && section) writeResultsSection('overload', section);
process.exit(exit);
