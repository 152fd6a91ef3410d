/**
 * Gateway overhead: a write through `POST /v1/actions` vs the same write straight to the sample
 * upstream (`PUT /posts/:id` with If-Match), open-loop at a fixed rate against a real `writ serve`
 * process (WAL, synchronous=FULL). Latency runs from each request's SCHEDULED send time, so a slow
 * answer cannot hide the requests queued behind it (no coordinated omission).
 *
 * Then, in this process, the gateway's steps one by one on the real code (the sequence of
 * src/gateway/perform-action.ts) with Writ's SQLite at synchronous=FULL and at NORMAL, and the disk's
 * fdatasync latency, so the added latency can be split into CPU, commits and the upstream hop.
 *
 *   npx tsc -p tsconfig.json && node dist/bench/gateway.js [--write]
 *
 * Files go to bench/tmp (git-ignored). `--write` replaces this benchmark's section of bench/RESULTS.md.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import type { JWK } from 'jose';
import { requestHash } from '../src/audit/index.js';
import { loadConfig } from '../src/config/index.js';
import { checkDecisionBinding, spendAssertion, verifyCallerAssertion, verifyDecision } from '../src/decision/index.js';
import { checkAuthorityStillValid, coordinationKeys } from '../src/gateway/index.js';
import { GOVERNANCE_ID } from '../src/graph/model.js';
import { createCallerAssertion, WritClient, type Decision, type Lease } from '../src/sdk/index.js';
import { applyManifest, decide, openWrit, performAction, readManifest, type WritContext } from '../src/service/index.js';
import { openSqliteStore } from '../src/store/sqlite/sqlite-store.js';
import { PlainHttpClient } from '../src/upstream/http-request.js';
import { parseServerTiming, type ServerTiming } from '../src/wire/server-timing.js';
import { spawnListening, startServerProcess } from '../scripts/server-process.js';
import { syncProbe } from './disk-probe.js';
import { machineLine, summarize, writeResultsSection } from './results-file.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const TMP = join(ROOT, 'bench', 'tmp');
const RATE = Number(process.env['GATEWAY_RATE'] ?? 50);
const ROUND_SECONDS = Number(process.env['GATEWAY_ROUND_SECONDS'] ?? 5);
const ROUNDS = Number(process.env['GATEWAY_ROUNDS'] ?? 8);
const POSTS = 50;
const PRINCIPAL = 'seo-agent-7';
const IN_PROCESS_WRITES = Number(process.env['GATEWAY_STEP_WRITES'] ?? 300);

type Mode = 'direct' | 'proxy' | 'optimistic' | 'exclusive';
const MODES: Mode[] = ['direct', 'proxy', 'optimistic', 'exclusive'];
const unchecked = (m: Mode) => m === 'direct' || m === 'proxy';
const BASE: Record<Mode | 'steps', number> = { direct: 10_001, proxy: 15_001, optimistic: 20_001, exclusive: 30_001, steps: 40_001 };

/** Latency of one small autocommit INSERT into a WAL SQLite file on this disk, at a given synchronous level. */
function commitLatencies(synchronous: 'FULL' | 'NORMAL', n: number): number[] {
  const file = join(TMP, `gateway-commit-${synchronous}.db`);
  for (const f of [file, `${file}-wal`, `${file}-shm`]) rmSync(f, { force: true });
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.pragma(`synchronous = ${synchronous}`);
  db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)');
  const insert = db.prepare('INSERT INTO t (v) VALUES (?)');
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    insert.run(`row ${i} ${'x'.repeat(200)}`);
    out.push((performance.now() - t) * 1000);
  }
  db.close();
  for (const f of [file, `${file}-wal`, `${file}-shm`]) rmSync(f, { force: true });
  return out;
}

const sleepUntil = (t: number) => new Promise<void>((resolve) => setTimeout(resolve, Math.max(0, t - performance.now())));

interface Sample {
  /** From scheduled send to answer, µs. */
  latency: number;
  /** From scheduled to actual send (timer and event-loop lag in this process), µs. */
  lag: number;
  ok: boolean;
}

/** Fires `send(i)` at RATE per second for `seconds`, never waiting for answers. */
async function openLoop(seconds: number, send: (i: number) => Promise<boolean>): Promise<Sample[]> {
  const n = Math.round(RATE * seconds);
  const interval = 1000 / RATE;
  const start = performance.now() + 20;
  const pending: Promise<Sample>[] = [];
  for (let i = 0; i < n; i++) {
    const scheduled = start + i * interval;
    await sleepUntil(scheduled);
    const sent = performance.now();
    pending.push(
      send(i).then(
        (ok) => ({ latency: (performance.now() - scheduled) * 1000, lag: (sent - scheduled) * 1000, ok }),
        () => ({ latency: (performance.now() - scheduled) * 1000, lag: (sent - scheduled) * 1000, ok: false }),
      ),
    );
  }
  return Promise.all(pending);
}

async function httpPhase(server: { url: string; upstreamUrl: string; proxyUrl: string }, jwk: JWK): Promise<{ samples: Record<Mode, Sample[]>; errors: string[]; timings: Record<'optimistic' | 'exclusive', ServerTiming[]> }> {
  const writ = new WritClient({ baseUrl: server.url, principal: PRINCIPAL, privateJwk: jwk });
  // The timed requests of both variants go through the same client: node:http with keep-alive (the
  // gateway's own upstream client), whose tail is far shorter than global fetch's on these machines.
  const toUpstream = new PlainHttpClient(server.upstreamUrl);
  const toWrit = new PlainHttpClient(server.url);
  const toProxy = new PlainHttpClient(server.proxyUrl);
  const rev = new Map<number, number>();
  const errors: string[] = [];
  const noteError = (what: string) => {
    if (errors.length < 10) errors.push(what);
  };
  // Seed every post once (If-Match "0" creates it).
  for (const mode of MODES) {
    for (let p = 0; p < POSTS; p++) {
      const id = BASE[mode] + p;
      const res = await fetch(`${server.upstreamUrl}/posts/${id}`, { method: 'PUT', headers: { 'content-type': 'application/json', 'if-match': '"0"' }, body: JSON.stringify({ fields: { title: `t ${id}`, meta_description: `m ${id}` } }) });
      rev.set(id, ((await res.json()) as { revision: number }).revision);
    }
  }
  const decideMany = async (ids: number[], field: string): Promise<Decision[]> => {
    const out: Decision[] = new Array(ids.length);
    let next = 0;
    await Promise.all(Array.from({ length: 4 }, async () => {
      while (next < ids.length) {
        const k = next++;
        const d = await writ.decide({ action: 'update_post', resource: `wp:post:${ids[k]}`, environment: 'production', fields: [field] });
        if (!d.allow || !d.token) throw new Error(`expected allow: ${d.reasons.join('; ')}`);
        out[k] = d;
      }
    }));
    return out;
  };
  const assertions = (n: number) => Promise.all(Array.from({ length: n }, () => createCallerAssertion({ principal: PRINCIPAL, privateJwk: jwk, ttlSeconds: 120 })));

  // One lease held over the exclusive posts' title keys for the whole phase.
  const exclusiveIds = Array.from({ length: POSTS }, (_, p) => BASE.exclusive + p);
  const lease: Lease = await writ.acquireLease(await decideMany(exclusiveIds, 'title'), { ttlMs: 120_000 });

  const perRound = Math.round(RATE * ROUND_SECONDS);
  const samples: Record<Mode, Sample[]> = { direct: [], proxy: [], optimistic: [], exclusive: [] };
  const timings: Record<'optimistic' | 'exclusive', ServerTiming[]> = { optimistic: [], exclusive: [] };
  /** Where the timed rounds keep each write's Server-Timing (none during the warm-up). */
  let timingSink: ServerTiming[] | null = null;
  const write = (mode: Mode, i: number, decisions: Decision[], auth: string[]) => async (): Promise<boolean> => {
    const id = BASE[mode] + (i % POSTS);
    const expected = rev.get(id)!;
    const field = mode === 'exclusive' ? 'title' : 'meta_description';
    const value = `${mode} ${i} ${performance.now()}`;
    if (unchecked(mode)) {
      const client = mode === 'direct' ? toUpstream : toProxy;
      const res = await client.request(`${mode === 'direct' ? server.upstreamUrl : server.proxyUrl}/posts/${id}`, { method: 'PUT', headers: { 'content-type': 'application/json', 'if-match': `"${expected}"` }, body: JSON.stringify({ fields: { [field]: value } }), timeoutMs: 10_000 });
      const body = res.body as { revision?: number; code?: string };
      if (res.status !== 200) return noteError(`${mode} ${res.status} ${body.code}`), false;
      rev.set(id, Math.max(rev.get(id)!, body.revision!));
      return true;
    }
    const headers: Record<string, string> = {
      authorization: `Bearer ${auth[i]}`,
      'content-type': 'application/json',
      'writ-decision': decisions[i]!.token!,
      'idempotency-key': crypto.randomUUID(),
    };
    if (mode === 'exclusive') {
      const key = `wp:post:${id}#title`;
      Object.assign(headers, { 'writ-lease-token': lease.token, 'writ-lease-id': lease.lease_id, 'writ-fencing-epoch': `${key}=${lease.epochs[key]}` });
    }
    const res = await toWrit.request(`${server.url}/v1/actions`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ action: 'update_post', resource: `wp:post:${id}`, fields: [field], payload: { [field]: value }, expected_version: expected }),
      timeoutMs: 10_000,
    });
    const body = res.body as { receipt?: { final_version: number; status: string }; code?: string; detail?: string };
    if (res.status !== 201 || body.receipt?.status !== 'COMPLETED') return noteError(`${mode} ${res.status} ${body.code ?? body.receipt?.status} ${body.detail ?? ''}`), false;
    rev.set(id, Math.max(rev.get(id)!, body.receipt.final_version));
    timingSink?.push(parseServerTiming(String(res.headers['server-timing'] ?? '')));
    return true;
  };

  // Warm-up (JIT, connection pools, SQLite pages), not counted.
  for (const mode of MODES) {
    const n = RATE;
    const ids = Array.from({ length: n }, (_, i) => BASE[mode] + (i % POSTS));
    const decisions = unchecked(mode) ? [] : await decideMany(ids, mode === 'exclusive' ? 'title' : 'meta_description');
    const auth = unchecked(mode) ? [] : await assertions(n);
    await openLoop(1, (i) => write(mode, i, decisions, auth)());
  }
  // Rounds interleave the three modes so that drift in the machine's load hits them alike.
  for (let r = 0; r < ROUNDS; r++) {
    for (const mode of MODES) {
      // Pools made before the timed part: decisions (single-use, live 30 s) and caller assertions (single-use jti).
      const ids = Array.from({ length: perRound }, (_, i) => BASE[mode] + (i % POSTS));
      const decisions = unchecked(mode) ? [] : await decideMany(ids, mode === 'exclusive' ? 'title' : 'meta_description');
      const auth = unchecked(mode) ? [] : await assertions(perRound);
      if (mode === 'exclusive') await writ.renewLease(lease, 120_000);
      timingSink = unchecked(mode) ? null : timings[mode as 'optimistic' | 'exclusive'];
      samples[mode].push(...(await openLoop(ROUND_SECONDS, (i) => write(mode, i, decisions, auth)())));
      timingSink = null;
    }
  }
  await writ.releaseLease(lease);
  return { samples, errors, timings };
}

type StepName = 'authenticate caller (verify; jti spent with the intent)' | 'verify decision + binding + authority' | 'fence check (exclusive)' | 'jti + decision mark + receipt intent (one commit)' | 'upstream hop (HTTP PUT, upstream commits)' | 'receipt completion (commit)';

/** The gateway's steps one by one, in perform-action.ts's order, in this process against the server's upstream. */
async function stepPhase(upstreamUrl: string, jwk: JWK, synchronous: 'FULL' | 'NORMAL'): Promise<{ steps: Map<StepName, number[]>; whole: Record<'optimistic' | 'exclusive', number[]> }> {
  const dataDir = mkdtempSync(join(TMP, 'gateway-steps-'));
  const config = loadConfig({ dataDir }, { ...process.env, WRIT_UPSTREAM_URL: upstreamUrl });
  const store = await openSqliteStore(config.dbFile);
  store.writer.pragma(`synchronous = ${synchronous}`);
  const w = await openWrit(config, { store });
  try {
    const ctx: WritContext = w.ctx;
    const { manifest, baseDir } = readManifest(join(ROOT, 'graph/example.yaml'));
    await applyManifest(ctx, GOVERNANCE_ID, manifest, baseDir);
    const base = BASE.steps + (synchronous === 'FULL' ? 0 : 5_000);
    const rev = new Map<number, number>();
    for (let p = 0; p < POSTS; p++) {
      const res = await fetch(`${upstreamUrl}/posts/${base + p}`, { method: 'PUT', headers: { 'content-type': 'application/json', 'if-match': '"0"' }, body: JSON.stringify({ fields: { title: 't', meta_description: 'm' } }) });
      rev.set(base + p, ((await res.json()) as { revision: number }).revision);
    }
    const titleDecisions = await Promise.all(Array.from({ length: POSTS }, (_, p) => decide(ctx, PRINCIPAL, { action: 'update_post', resource: `wp:post:${base + p}`, environment: 'production', fields: ['title'] })));
    const keys = titleDecisions.map((d) => `${d.resource}#title`);
    const grant = await ctx.leases.acquire({ resources: keys, holder: PRINCIPAL, priority: 0, ttlMs: 120_000 });

    const steps = new Map<StepName, number[]>();
    const time = async <T>(name: StepName, f: () => T | Promise<T>): Promise<T> => {
      const t = performance.now();
      const out = await f();
      const list = steps.get(name) ?? [];
      list.push((performance.now() - t) * 1000);
      steps.set(name, list);
      return out;
    };
    const whole = { optimistic: [] as number[], exclusive: [] as number[] };
    for (let i = 0; i < IN_PROCESS_WRITES + 50; i++) {
      const exclusive = i % 2 === 1;
      const id = base + (i % POSTS);
      const field = exclusive ? 'title' : 'meta_description';
      const resource = `wp:post:${id}`;
      const d = await decide(ctx, PRINCIPAL, { action: 'update_post', resource, environment: 'production', fields: [field] });
      const assertion = await createCallerAssertion({ principal: PRINCIPAL, privateJwk: jwk });
      const payload = { [field]: `v ${i}` };
      const counted = i >= 50;
      if (i % 4 < 2) {
        // The real function, end to end (minus HTTP in front of it).
        const t = performance.now();
        const graph = await ctx.graph.current();
        const caller = await verifyCallerAssertion(`Bearer ${assertion}`, { principal: (p) => graph.principal(p), replay: ctx.replay, now: ctx.clock.now(), audience: ctx.config.audience });
        const key = `${resource}#title`;
        const out = await performAction(ctx, caller, { action: 'update_post', resource, fields: [field], payload, expected_version: rev.get(id)! }, {
          decision: d.token!,
          idempotencyKey: crypto.randomUUID(),
          ...(exclusive ? { leaseToken: grant.token, leaseId: grant.lease_id, fencingEpoch: `${key}=${grant.epochs[key]}` } : {}),
        });
        if (counted) whole[exclusive ? 'exclusive' : 'optimistic'].push((performance.now() - t) * 1000);
        rev.set(id, out.receipt.final_version!);
        continue;
      }
      // The same steps, each timed (mirrors src/service/actions.ts).
      const record = counted ? time : <T>(_: StepName, f: () => T | Promise<T>) => Promise.resolve(f());
      const graph = await ctx.graph.current();
      const caller = await record('authenticate caller (verify; jti spent with the intent)', () => verifyCallerAssertion(`Bearer ${assertion}`, { principal: (p) => graph.principal(p), replay: ctx.replay, now: ctx.clock.now(), audience: ctx.config.audience }));
      const now = ctx.clock.now();
      const claims = await record('verify decision + binding + authority', async () => {
        const c = await verifyDecision(d.token!, { keys: ctx.keys, audience: ctx.config.gatewayAudience, now });
        checkDecisionBinding(c, { principal: PRINCIPAL, action: 'update_post', resource, environment: c.environment, fields: [field] });
        checkAuthorityStillValid(await ctx.graph.current(), c, now);
        return c;
      });
      const needed = coordinationKeys(resource, [field], claims.obligations);
      let fence: { lease_id: string; epoch: number } | undefined;
      if (needed.length > 0) {
        fence = await record('fence check (exclusive)', () => ctx.leases.validateFence({ key: needed[0]!, token: grant.token, epoch: grant.epochs[needed[0]!]!, principal: PRINCIPAL, now, lease_id: grant.lease_id }));
      }
      const hash = requestHash({ principal: PRINCIPAL, action: 'update_post', resource, environment: null, fields: [field], payload, expected_version: rev.get(id)! });
      const pending = await record('jti + decision mark + receipt intent (one commit)', () => ctx.store.readWrite(async (tx) => {
        await spendAssertion(ctx.replay, tx, caller, now);
        const recorded = await ctx.receipts.recordIntent({
          principal: PRINCIPAL, action: 'update_post', resource_key: resource, fields: [field],
          owners: [...new Set(Object.values(claims.owners).filter((o): o is string => o !== null))].sort(),
          authority_epoch: claims.graph_revision, ownership_epoch: claims.graph_revision, decision_id: claims.decision_id,
          policy_revision: claims.policy_revision, graph_revision: claims.graph_revision, chain: claims.chain,
          lease_id: fence?.lease_id ?? null, lease_epoch: fence?.epoch ?? null, expected_version: rev.get(id)!, idempotency_key: null, request_hash: hash,
        }, tx);
        await tx.singleUse.spend('decision', claims.decision_id, claims.expires_at, now);
        return recorded;
      }));
      const result = await record('upstream hop (HTTP PUT, upstream commits)', () => ctx.upstreams.route(resource, 'production').client.write(resource, {
        fields: payload, expectedVersion: rev.get(id)!, fencing: fence ? { [needed[0]!]: fence.epoch } : null, principal: PRINCIPAL, receiptId: pending.receipt_id,
      }));
      if (result.kind !== 'applied') throw new Error(`upstream answered ${result.kind}`);
      await record('receipt completion (commit)', () => ctx.receipts.complete(pending.receipt_id, { status: 'COMPLETED', final_version: result.version, upstream_status: result.status }));
      rev.set(id, result.version);
    }
    return { steps, whole };
  } finally {
    await w.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

const us = (n: number) => (Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : '—');
const ms = (n: number) => (n / 1000).toFixed(2);

async function main(): Promise<void> {
  mkdirSync(TMP, { recursive: true });
  const dataDir = mkdtempSync(join(TMP, 'gateway-'));
  const jwk = JSON.parse(readFileSync(join(ROOT, 'fixtures/keys/seo-agent-7.jwk'), 'utf8')) as JWK;
  const writ = await startServerProcess({ dataDir, separateUpstream: true });
  const proxy = await spawnListening('the pass-through proxy', [join(ROOT, 'dist/bench/passthrough-proxy.js'), '--upstream', writ.upstreamUrl], process.env);
  const server = { ...writ, proxyUrl: /listening on (\S+)/.exec(proxy.output())![1]! };
  let http: Awaited<ReturnType<typeof httpPhase>>;
  let full: Awaited<ReturnType<typeof stepPhase>>;
  let normal: Awaited<ReturnType<typeof stepPhase>>;
  let syncBefore: number[];
  let syncAfter: number[];
  let commitFull: number[];
  let commitNormal: number[];
  try {
    syncBefore = syncProbe(TMP, { syncs: 2_000 }).latencies;
    http = await httpPhase(server, jwk);
    syncAfter = syncProbe(TMP, { syncs: 2_000 }).latencies;
    commitFull = commitLatencies('FULL', 2_000);
    commitNormal = commitLatencies('NORMAL', 2_000);
    full = await stepPhase(server.upstreamUrl, jwk, 'FULL');
    normal = await stepPhase(server.upstreamUrl, jwk, 'NORMAL');
  } finally {
    proxy.proc.kill('SIGTERM');
    await proxy.exited;
    await writ.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }

  const s = { direct: summarize(http.samples.direct.map((x) => x.latency)), proxy: summarize(http.samples.proxy.map((x) => x.latency)), optimistic: summarize(http.samples.optimistic.map((x) => x.latency)), exclusive: summarize(http.samples.exclusive.map((x) => x.latency)) };
  const failed = (m: Mode) => http.samples[m].filter((x) => !x.ok).length;
  const lagP99 = summarize(Object.values(http.samples).flat().map((x) => x.lag)).p99;
  const sync = summarize([...syncBefore, ...syncAfter]);
  const cFull = summarize(commitFull);
  const cNormal = summarize(commitNormal);
  const addedP50 = (m: 'optimistic' | 'exclusive') => s[m].p50 - s.direct.p50;
  const addedP99 = (m: 'optimistic' | 'exclusive') => s[m].p99 - s.direct.p99;
  const row = (name: string, x: ReturnType<typeof summarize>, m: Mode) => `| ${name} | ${x.n} | ${failed(m)} | ${ms(x.p50)} | ${ms(x.p90)} | ${ms(x.p99)} | ${ms(x.max)} |`;
  const stepRows = [...full.steps.keys()].map((k) => {
    const f = summarize(full.steps.get(k)!);
    const n = summarize(normal.steps.get(k) ?? []);
    return `| ${k} | ${us(f.p50)} | ${us(f.p99)} | ${us(n.p50)} | ${us(n.p99)} |`;
  });
  const sumP50 = (m: typeof full) => [...m.steps.values()].reduce((a, v) => a + summarize(v).p50, 0);
  const wholeRow = (name: string, k: 'optimistic' | 'exclusive') => {
    const f = summarize(full.whole[k]);
    const n = summarize(normal.whole[k]);
    return `| ${name} | ${us(f.p50)} | ${us(f.p99)} | ${us(n.p50)} | ${us(n.p99)} |`;
  };
  // Inside `writ serve`, from each write's Server-Timing (ms → µs): Writ's own share is total − upstream.
  const inServer = (m: 'optimistic' | 'exclusive', f: (t: ServerTiming) => number) => summarize(http.timings[m].map((t) => f(t) * 1000));
  const serverSteps: [string, (t: ServerTiming) => number][] = [
    ['auth (assertion verified, jti checked)', (t) => t.auth!],
    ['checks (idempotency, decision, binding, authority, lease, route)', (t) => t.checks!],
    ['intent commit (durable before the forward)', (t) => t.intent!],
    ['upstream (forward to answer)', (t) => t.upstream!],
    ['settlement commit (durable before the answer)', (t) => t.settle!],
    ['total, from request received to answer sent', (t) => t.total!],
    ['**Writ\'s own: total − upstream**', (t) => t.total! - t.upstream!],
  ];
  const serverRows = serverSteps.map(([name, f]) => {
    const o = inServer('optimistic', f);
    const x = inServer('exclusive', f);
    return `| ${name} | ${us(o.p50)} | ${us(o.p99)} | ${us(x.p50)} | ${us(x.p99)} |`;
  });
  const own = (m: 'optimistic' | 'exclusive') => inServer(m, (t) => t.total! - t.upstream!);
  const commitsAdded = 2; // jti + decision mark + receipt intent (one transaction), receipt completion
  const section = [
    '## Gateway overhead (bench/gateway.ts)',
    '',
    '```',
    'npx tsc -p tsconfig.json && node dist/bench/gateway.js --write',
    '```',
    '',
    machineLine(),
    '',
    `A real \`writ serve\` process (graph/example.yaml; WAL, synchronous=FULL; data dir on bench/tmp), with the sample upstream as its own process (its own SQLite file, also synchronous=FULL; \`writ serve --no-upstream\`), driven from a second process at a fixed rate of ${RATE} req/s, open loop: ${ROUNDS} rounds of ${ROUND_SECONDS} s per variant, the four variants interleaved round by round, after a 1 s warm-up each. The timed requests of every variant go through the same client (node:http, keep-alive: the gateway's own upstream client). Latency runs from the scheduled send time to the answer (no coordinated omission; the sender's own timer lag p99 was ${us(lagP99)} µs). Each write updates one field of one of ${POSTS} posts per variant, round-robin, with the version read last (If-Match / expected_version).`,
    '',
    '- **direct**: `PUT /posts/:id` `{fields: {meta_description}}` with `If-Match` straight to the sample upstream.',
    '- **pass-through proxy**: the same PUT through bench/passthrough-proxy.ts, its own process on the same stack as Writ (fastify in front, the gateway\'s node:http upstream client behind), which checks nothing and records nothing: the cost of the extra hop alone.',
    `- **gateway, optimistic field**: \`POST /v1/actions\` as ${PRINCIPAL}, \`meta_description\` (WRITE_OPTIMISTIC: no lease), with decision, expected_version, Idempotency-Key.`,
    `- **gateway, exclusive field under a held lease**: the same on \`title\` (WRITE_EXCLUSIVE) with lease token, lease id and \`Writ-Fencing-Epoch\`; one lease on the ${POSTS} title keys, taken before and renewed between rounds.`,
    '',
    'Decisions (single-use, 30 s) and caller assertions (single-use jti) come from pools made just before each round, so only the `/v1/actions` call is timed; fetching a decision over HTTP is a separate request an agent makes before it (see the decision and lease-http sections).',
    '',
    '| variant | writes | failed | p50 ms | p90 ms | p99 ms | max ms |',
    '|---|---:|---:|---:|---:|---:|---:|',
    row('direct to the upstream', s.direct, 'direct'),
    row('pass-through proxy (checks nothing, records nothing)', s.proxy, 'proxy'),
    row('gateway, optimistic field', s.optimistic, 'optimistic'),
    row('gateway, exclusive field, held lease', s.exclusive, 'exclusive'),
    '',
    `Added by the gateway: optimistic p50 +${ms(addedP50('optimistic'))} ms, p99 +${ms(addedP99('optimistic'))} ms; exclusive p50 +${ms(addedP50('exclusive'))} ms, p99 +${ms(addedP99('exclusive'))} ms (p99 of the gateway minus p99 direct). Target added p99 < 3 ms: ${Math.max(addedP99('optimistic'), addedP99('exclusive')) < 3000 ? 'met' : 'MISSED'}. The pass-through proxy, which checks and records nothing, adds p50 +${ms(s.proxy.p50 - s.direct.p50)} ms, p99 +${ms(s.proxy.p99 - s.direct.p99)} ms: that much is the extra hop on this machine, whatever the proxy does.${http.errors.length ? ` First failures: ${http.errors.join('; ')}.` : ''}`,
    '',
    `Writ and the sample upstream each run in their own process, but better-sqlite3 commits block each process's event loop, so requests to one process queue behind its commits. From the in-process step timings below (whole write p50 ${ms(summarize(full.whole.optimistic).p50)} ms at FULL), one loop serves at most ~${us(1_000_000 / summarize(full.whole.optimistic).p50)} gateway writes/s on this machine at this load; when the fixed rate approaches that, requests queue and the open-loop latencies grow to tens or hundreds of ms — that queueing, not the per-write cost, is what the p90/p99 show when the load average is high.${failed('optimistic') + failed('exclusive') > 0 ? ' The failed writes are VERSION_CONFLICT answers caused by that queueing: a post comes round again after ' + POSTS / RATE + ' s, and when an answer takes longer the next write to it carries the version read before it (the gateway correctly refuses it).' : ''}`,
    '',
    '### Where the time goes',
    '',
    `Inside \`writ serve\`, from the \`Server-Timing\` header of each timed write above (${us(http.timings.optimistic.length)} optimistic, ${us(http.timings.exclusive.length)} exclusive). This leaves out both HTTP hops and the client, so it is Writ's own share without the machine's hop cost. µs:`,
    '',
    '| step | optimistic p50 | optimistic p99 | exclusive p50 | exclusive p99 |',
    '|---|---:|---:|---:|---:|',
    ...serverRows,
    '',
    `Writ's own time per write, inside the server: p50 ${ms(own('optimistic').p50)} ms, p99 ${ms(own('optimistic').p99)} ms (optimistic); p50 ${ms(own('exclusive').p50)} ms, p99 ${ms(own('exclusive').p99)} ms (exclusive). Against the 3 ms budget even without the extra hop: ${Math.max(own('optimistic').p99, own('exclusive').p99) < 3000 ? 'within it' : 'over it'}.`,
    '',
    `The disk, measured in the same run: write 4 KiB + fdatasync p50 ${us(sync.p50)} µs, p99 ${us(sync.p99)} µs (${us(sync.n)} syncs, half before and half after the HTTP phase). One autocommit INSERT in a WAL SQLite file on this disk: synchronous=FULL p50 ${us(cFull.p50)} µs, p99 ${us(cFull.p99)} µs; synchronous=NORMAL p50 ${us(cNormal.p50)} µs, p99 ${us(cNormal.p99)} µs.`,
    '',
    `A write through the gateway makes ${commitsAdded} synchronous commits the direct write does not: the intent (in one transaction with the caller assertion's jti and the decision's one-use mark; it must be durable before the write is forwarded) and the settlement (durable before the answer, so an acknowledged write always has its COMPLETED receipt) — each waits for its own fdatasync. The direct write makes the upstream's own commits (the post, and the sample upstream's request log), which the gateway path makes too.`,
    '',
    `The gateway's steps, timed one by one on the real code in this process (the order of src/gateway/perform-action.ts; Writ's store on this disk; the upstream is the server's sample upstream over loopback HTTP), ${IN_PROCESS_WRITES / 2} writes alternating optimistic and exclusive, Writ's store at synchronous=FULL and then NORMAL (the upstream stays at FULL). µs:`,
    '',
    '| step | FULL p50 | FULL p99 | NORMAL p50 | NORMAL p99 |',
    '|---|---:|---:|---:|---:|',
    ...stepRows,
    `| sum of the step p50s | ${us(sumP50(full))} | | ${us(sumP50(normal))} | |`,
    wholeRow('authenticate + performAction, whole, optimistic field', 'optimistic'),
    wholeRow('authenticate + performAction, whole, exclusive field', 'exclusive'),
    '',
    `Physical floor at synchronous=FULL: ${commitsAdded} commits × the commit p50 ${us(cFull.p50)} µs ≈ ${ms(commitsAdded * cFull.p50)} ms at p50, and × p99 ${us(cFull.p99)} µs ≈ ${ms(commitsAdded * cFull.p99)} ms if both hit the tail (a receipt commit writes more pages than this one-row probe: ~30 µs more per 4 KiB page on this disk at p50). The rest of Writ's own share is CPU: HTTP parsing, two Ed25519 verifications (assertion and decision, node:crypto, ~90 µs each), the receipt hash chain and JSON. The NORMAL column shows what the commits cost: it is the same code with Writ's store at synchronous=NORMAL, which the write path does not use (an intent must survive power loss before its write is forwarded).`,
    '',
    `Changes behind these figures (2026-11-30; the run before them: added p50 +5.9 ms, p99 +13 to +17 ms): the caller's jti is spent in the intent's transaction instead of a commit of its own (3 syncs per write → 2); receipts write fewer pages per commit (migration 008: a trigger instead of the prev_hash index, no per-entry receipt index, receipts WITHOUT ROWID); the upstream client is node:http with a keep-alive agent instead of global fetch (~0.5 ms p50 and several ms p99 less per forward here); assertions and decisions are verified with node:crypto on the main thread instead of jose's WebCrypto job on the thread pool (per token p50 150 → 90 µs, p99 1.6 → 0.19 ms, measured in-process); WAL checkpoints run in a worker thread instead of inside the commit that takes the WAL past 1,000 pages, about one write in 55 (src/store/sqlite/checkpointer.ts).`,
    '',
    `The extra hop alone (the pass-through proxy) adds p50 +${ms(s.proxy.p50 - s.direct.p50)} ms, p99 +${ms(s.proxy.p99 - s.direct.p99)} ms in this run: on these 2 shared vCPUs each extra process a request crosses costs wake-ups and scheduling, not CPU, and the p99 of one run differs from the next by several ms (on 2026-11-30 the proxy added p99 +0.2 to +3.8 ms over four runs on one machine of this kind, and +1.7 to +2.6 ms over six runs on another), so a 3 ms budget at p99 cannot be checked reliably here. The rate matters too: at 100 and 200 req/s (\`GATEWAY_RATE\`; one run each on 2026-11-30) the gateway added p99 +3.2 / +5.0 ms and +2.9 / +3.6 ms (optimistic / exclusive), because every process then wakes on warmer cores. Writ's own share measured from outside is the gateway minus the proxy: p50 +${ms(s.optimistic.p50 - s.proxy.p50)} ms, p99 +${ms(s.optimistic.p99 - s.proxy.p99)} ms (optimistic field), p50 +${ms(s.exclusive.p50 - s.proxy.p50)} ms, p99 +${ms(s.exclusive.p99 - s.proxy.p99)} ms (exclusive field).`,
  ].join('\n');
  console.log(section);
  if (process.argv.includes('--write')) writeResultsSection('gateway', section);
}

void main();
