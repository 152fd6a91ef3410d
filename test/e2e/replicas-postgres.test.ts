import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer as createHttpServer, request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { CLI, onFreePort, REPO, requireDist, spawnListening, startSampleUpstream } from '../../scripts/server-process.js';
import { startPrivatePostgres, type PrivatePostgres } from '../../scripts/private-postgres.js';

/**
 * Three `writ serve` replicas on one PostgreSQL, eight agent processes sending every request to a
 * random replica. Mid-run one replica is killed with SIGKILL (and started again later), the database
 * is restarted, and the third replica's clock runs 30 s ahead. Afterwards a history checker proves:
 * no two holders of a key ever overlap, every key's epochs strictly increase and none is issued
 * twice, every acknowledged write has exactly one COMPLETED receipt, the upstream holds exactly the
 * writes whose receipts are COMPLETED (PENDING ones reconciled), and the receipt chain verifies. Then a
 * revocation on one replica refuses a write on another in the very next request.
 *
 * Scale: WRIT_REPLICAS_SCALE. The suite runs 0.1 (≥ 2,000 lease operations, ≥ 200 gateway writes);
 * the full run the issue asks for (1: ≥ 20,000 and ≥ 2,000) takes minutes on two cores, so it is a
 * soak: `WRIT_REPLICAS_SCALE=1 npx vitest run test/e2e/replicas-postgres.test.ts` (bench/RESULTS.md).
 */
const SCALE = Number(process.env.WRIT_REPLICAS_SCALE ?? 0.1);
const AGENTS = 8;
const WRITES = Math.ceil((2_000 * SCALE) / AGENTS) * AGENTS;
// Each write cycle acquires and releases once; lease-only cycles make up the rest of the 20,000.
const LEASE_CYCLES = Math.ceil(((20_000 * SCALE - 2 * WRITES) / 2) / AGENTS) * AGENTS;
const WRITE_POSTS = [101, 102, 103, 104];
const LEASE_POSTS = [201, 202, 203, 204, 205, 206, 207, 208, 209, 210, 211, 212];

const cleanups: (() => Promise<void> | void)[] = [];
afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

interface Hold { key: string; lease_id: string; epoch: number; acquired_at: number; release_start: number; released: boolean; expires_at: number }
interface Write { receipt_id: string | null; status: string | null; code: string | null; post: number; acked: boolean }

describe('three writ serve replicas on one PostgreSQL', () => {
  it('keep one holder per key, growing epochs and every acknowledged write, through a killed replica, a database restart and a skewed clock', { timeout: 900_000 }, async () => {
    requireDist();
    const server: PrivatePostgres = await startPrivatePostgres();
    cleanups.push(() => server.stop());
    const admin = new pg.Client({ connectionString: server.url });
    await admin.connect();
    await admin.query('CREATE DATABASE writ');
    await admin.end();
    const url = server.url.replace(/\/postgres$/, '/writ');

    const dir = mkdtempSync(join(tmpdir(), 'writ-replicas-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const upstream = await startSampleUpstream(dir);
    cleanups.push(() => void upstream.proc.kill('SIGKILL'));
    const upstreamUrl = upstream.url;
    // A slow upstream: a proxy holds each PUT 400 ms (GETs pass at once). The writes are then in flight
    // long enough that a replica's reconciliation sweep judging receipts by its own skewed clock took them
    // for old ones, settled them FAILED, and the upstream applied them after (every run failed so; the
    // sweep now judges by the database's clock: src/service/reconcile.ts).
    const proxy = createHttpServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const forward = () => {
          const target = new URL(upstreamUrl);
          const out = httpRequest({ host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers }, (r) => {
            res.writeHead(r.statusCode!, r.headers);
            r.pipe(res);
          });
          out.on('error', () => res.destroy());
          out.end(Buffer.concat(chunks));
        };
        if (req.method === 'PUT') setTimeout(forward, 400);
        else forward();
      });
    });
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', () => r()));
    cleanups.push(async () => void proxy.close());
    const slowUpstreamUrl = `http://127.0.0.1:${(proxy.address() as { port: number }).port}`;
    const env = { ...process.env, WRIT_DATABASE_URL: url, WRIT_UPSTREAM_URL: slowUpstreamUrl, WRIT_UPSTREAM_TIMEOUT_MS: '1000' };
    const skew = join(REPO, 'test/e2e/fixtures/skew-clock.mjs');
    // All replicas share the data directory's signing keys and governance credential (a deployment's secrets).
    const spawnReplica = (i: number, graph: boolean, port: number) =>
      spawnListening(`replica ${i}`, [...(i === 2 ? ['--import', skew] : []), CLI, 'serve', '--data-dir', dir, '--port', String(port), '--no-upstream', ...(graph ? ['--graph', 'graph/example.yaml'] : [])],
        i === 2 ? { ...env, WRIT_TEST_CLOCK_SKEW_MS: '30000' } : env);
    const startReplica = (i: number, graph: boolean) => onFreePort((port) => spawnReplica(i, graph, port));
    const replicas = [await startReplica(0, true), await startReplica(1, false), await startReplica(2, false)];
    const ports = replicas.map((r) => r.port);
    cleanups.push(() => replicas.forEach((r) => r.proc.exitCode === null && r.proc.kill('SIGKILL')));
    const urls = ports.map((p) => `http://127.0.0.1:${p}`);

    // The agents.
    const started = Date.now();
    const outs = Array.from({ length: AGENTS }, (_, a) => join(dir, `agent-${a}.jsonl`));
    const { spawn } = await import('node:child_process');
    const agents = outs.map((out, a) => {
      const cfg = {
        name: `agent-${a}`, replicas: urls, upstream: upstreamUrl, principal: 'seo-agent-7', keyFile: join(REPO, 'fixtures/keys/seo-agent-7.jwk'),
        writeKeys: WRITE_POSTS, leaseKeys: LEASE_POSTS, writeCycles: WRITES / AGENTS, leaseCycles: LEASE_CYCLES / AGENTS, out,
      };
      const proc = spawn(process.execPath, [join(REPO, 'test/e2e/fixtures/replica-agent.mjs'), JSON.stringify(cfg)], { cwd: REPO, stdio: ['ignore', 'pipe', 'pipe'] });
      let stderr = '';
      proc.stderr!.on('data', (b: Buffer) => (stderr += b.toString()));
      return { proc, exited: new Promise<{ code: number | null; stderr: string }>((resolve) => proc.once('exit', (code) => resolve({ code, stderr }))) };
    });
    cleanups.push(() => agents.forEach((a) => a.proc.exitCode === null && a.proc.kill('SIGKILL')));

    // Chaos, by progress: kill replica 1 at 25% of the holds, start it again at 40%, restart the database at 60%.
    const expectedHolds = WRITES + LEASE_CYCLES;
    const holdsSoFar = () => outs.reduce((n, f) => n + (existsSync(f) ? (readFileSync(f, 'utf8').match(/"t":"hold"/g)?.length ?? 0) : 0), 0);
    const events: string[] = [];
    const done = Promise.all(agents.map((a) => a.exited));
    let finished = false;
    void done.then(() => (finished = true));
    const at = async (fraction: number) => {
      while (!finished && holdsSoFar() < fraction * expectedHolds) await new Promise((r) => setTimeout(r, 250));
      return !finished;
    };
    if (await at(0.25)) {
      replicas[1]!.proc.kill('SIGKILL');
      await replicas[1]!.exited;
      events.push(`replica 1 killed at ${holdsSoFar()} holds`);
    }
    if (await at(0.4)) {
      // On its old port: the agents and the load balancer know the replica by its address.
      replicas[1] = Object.assign(await spawnReplica(1, false, ports[1]!), { port: ports[1]! });
      events.push(`replica 1 started again at ${holdsSoFar()} holds`);
    }
    if (await at(0.6)) {
      await server.restart();
      events.push(`PostgreSQL restarted at ${holdsSoFar()} holds`);
    }
    const results = await done;
    const seconds = (Date.now() - started) / 1000;
    expect(results.map((r) => r.code), results.map((r) => r.stderr).join('\n')).toEqual(outs.map(() => 0));

    const lines = outs.flatMap((f) => readFileSync(f, 'utf8').trim().split('\n').filter(Boolean).map((l) => JSON.parse(l) as { t: string } & Record<string, unknown>));
    const holds = lines.filter((l) => l.t === 'hold') as unknown as Hold[];
    const writes = lines.filter((l) => l.t === 'write') as unknown as Write[];
    const refused = lines.filter((l) => l.t === 'refused') as unknown as { op: string; code: string }[];

    // 1. One holder at a time, epochs strictly increasing and never issued twice, per key.
    const byKey = new Map<string, Hold[]>();
    for (const h of holds) byKey.set(h.key, [...(byKey.get(h.key) ?? []), h]);
    const overlaps: string[] = [];
    for (const [key, list] of byKey) {
      list.sort((a, b) => a.epoch - b.epoch);
      for (let i = 1; i < list.length; i++) {
        const prev = list[i - 1]!;
        const next = list[i]!;
        if (next.epoch === prev.epoch) overlaps.push(`${key}: epoch ${next.epoch} granted twice (${prev.lease_id}, ${next.lease_id})`);
        // The previous holder held it at least until it asked to release (or its lease expired): the next
        // one cannot have been granted before that.
        const prevEnd = prev.released ? prev.release_start : Math.min(prev.release_start, prev.expires_at);
        if (next.acquired_at < prevEnd) overlaps.push(`${key}: epoch ${next.epoch} granted at ${next.acquired_at} while epoch ${prev.epoch} was held until ${prevEnd}`);
      }
    }
    expect(overlaps).toEqual([]);

    // 2. Every PENDING receipt gets reconciled (the sweeps of the surviving replicas), then the receipts
    //    and the upstream agree exactly with what the agents were told.
    const store = new pg.Client({ connectionString: url });
    await store.connect();
    cleanups.push(() => store.end());
    for (let i = 0; i < 240; i++) {
      const { rows } = await store.query<{ n: string }>("SELECT count(*) AS n FROM receipts WHERE status = 'PENDING'");
      if (Number(rows[0]!.n) === 0) break;
      await new Promise((r) => setTimeout(r, 500));
    }
    const { rows: receiptRows } = await store.query<{ receipt_id: string; status: string; resource_key: string }>("SELECT receipt_id, status, resource_key FROM receipts WHERE resource_key LIKE 'wp:post:%'");
    const statusOf = new Map(receiptRows.map((r) => [r.receipt_id, r.status]));
    expect(receiptRows.filter((r) => r.status === 'PENDING')).toEqual([]);
    const acked = writes.filter((w) => w.acked);
    expect(acked.filter((w) => statusOf.get(w.receipt_id!) !== 'COMPLETED').map((w) => w.receipt_id)).toEqual([]);
    expect(new Set(acked.map((w) => w.receipt_id)).size).toBe(acked.length);
    const applied: string[] = [];
    for (const post of WRITE_POSTS) {
      const history = (await fetch(`${upstreamUrl}/posts/${post}/history`).then((r) => r.json())) as { revisions: { receipt_id: string | null }[] };
      for (const r of history.revisions) if (r.receipt_id) applied.push(r.receipt_id);
    }
    const completed = receiptRows.filter((r) => r.status === 'COMPLETED').map((r) => r.receipt_id).sort();
    expect([...applied].sort()).toEqual(completed);

    // 3. The chain verifies, through any replica.
    const { createCallerAssertion } = await import(join(REPO, 'dist/src/sdk/index.js'));
    const governance = JSON.parse(readFileSync(join(dir, 'admin.jwk'), 'utf8'));
    const as = async (principal: string, jwk: unknown) => ({ authorization: `Bearer ${await createCallerAssertion({ principal, privateJwk: jwk })}` });
    const verify = await fetch(`${urls[0]}/v1/audit/verify`, { headers: await as('governance', governance) }).then((r) => r.json() as Promise<{ ok: boolean }>);
    expect(verify).toMatchObject({ ok: true });

    // 4. A revocation on replica 0 refuses a write on replica 1 in the next request.
    const seo = JSON.parse(readFileSync(join(REPO, 'fixtures/keys/seo-agent-7.jwk'), 'utf8'));
    const decided = await fetch(`${urls[1]}/v1/decisions`, {
      method: 'POST', headers: { ...(await as('seo-agent-7', seo)), 'content-type': 'application/json' },
      body: JSON.stringify({ action: 'update_post', resource: 'wp:post:300', environment: 'production', fields: ['meta_description'] }),
    }).then((r) => r.json() as Promise<{ allow: boolean; token: string }>);
    expect(decided.allow).toBe(true);
    const revoked = await fetch(`${urls[0]}/v1/edges/d-orch-seo`, { method: 'DELETE', headers: await as('governance', governance) });
    expect(revoked.status).toBe(200);
    const late = await fetch(`${urls[1]}/v1/actions`, {
      method: 'POST', headers: { ...(await as('seo-agent-7', seo)), 'content-type': 'application/json', 'writ-decision': decided.token },
      body: JSON.stringify({ action: 'update_post', resource: 'wp:post:300', fields: ['meta_description'], payload: { meta_description: 'too late' }, expected_version: 0 }),
    });
    expect(late.status).toBe(403);
    expect(((await late.json()) as { code: string }).code).toBe('AUTHORITY_REVOKED');

    const codes = new Map<string, number>();
    for (const r of refused) codes.set(r.code, (codes.get(r.code) ?? 0) + 1);
    console.log(`replicas: ${holds.length} holds (${2 * holds.length} lease operations) and ${writes.length} writes (${acked.length} acknowledged) in ${seconds.toFixed(0)} s; ` +
      `${events.join('; ')}; refusals and retries: ${JSON.stringify(Object.fromEntries(codes))}`);
    // Failures were clean refusals (503 OVERLOADED while the database restarted, connection errors
    // while a replica was down, decisions the fast-clock replica took for expired, and decisions it signed
    // that the others refused as issued in the future, DECISION_INVALID): never a 500.
    expect(codes.has('INTERNAL')).toBe(false);
    expect(2 * holds.length).toBeGreaterThanOrEqual(20_000 * SCALE * 0.95);
    expect(writes.length).toBeGreaterThanOrEqual(WRITES * 0.95);
  });
});
