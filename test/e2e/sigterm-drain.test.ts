import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { WritApiError, WritClient } from '../../src/sdk/index.js';
import { startSampleUpstream } from '../../src/upstream/index.js';
import { startFlakyUpstream, type FlakyUpstream } from '../support/flaky-upstream.js';
import { fixtureKey } from '../support/harness.js';
import { startServerProcess, type ServerProcess } from '../support/server-process.js';
import { until } from '../support/wait.js';

const tmp = mkdtempSync(join(tmpdir(), 'writ-drain-'));
let server: ServerProcess | undefined;
let flaky: FlakyUpstream | undefined;
let upstream: Awaited<ReturnType<typeof startSampleUpstream>> | undefined;
afterAll(async () => {
  await server?.stop();
  await flaky?.close();
  await upstream?.app.close();
  rmSync(tmp, { recursive: true, force: true });
});

describe('SIGTERM under load', () => {
  it('drains: writes in flight finish and settle, new requests and queued lease waits get 503 OVERLOADED with Retry-After, exit 0, and a restart finds everything settled', async () => {
    upstream = await startSampleUpstream({ port: 0, host: '127.0.0.1', dbFile: join(tmp, 'upstream.sqlite') });
    flaky = await startFlakyUpstream(upstream.url);
    const dataDir = join(tmp, 'writ');
    server = await startServerProcess({ dataDir, upstreamUrl: flaky.url, env: { WRIT_DRAIN_TIMEOUT_MS: '20000' } });
    const first = server;
    const agent = new WritClient({ baseUrl: first.url, principal: 'seo-agent-7', privateJwk: fixtureKey('seo-agent-7') });
    const write = async (post: number) => {
      const resource = `wp:post:${post}`;
      const decision = await agent.decide({ action: 'update_post', resource, environment: 'production', fields: ['meta_description'] });
      return agent.act({ decision, action: 'update_post', resource, fields: ['meta_description'], payload: { meta_description: `d${post}` }, expected_version: 0 });
    };

    // Load: readers deciding in a loop, and six writes held at the upstream, in flight at the signal.
    let stopLoad = false;
    const answers: string[] = [];
    const reader = async () => {
      while (!stopLoad) {
        try {
          await agent.decide({ action: 'update_post', resource: 'wp:post:1', environment: 'production', fields: ['title'] });
          answers.push('200');
        } catch (e) {
          if (e instanceof WritApiError) answers.push(`${e.status} ${e.code} retry=${e.retryAfterMs !== null}`);
          else answers.push('no connection'); // after the process has exited
        }
      }
    };
    const readers = [reader(), reader(), reader()];
    // A lease held, and another caller queued for it with a wait far longer than the drain.
    const titleDecision = () => agent.decide({ action: 'update_post', resource: 'wp:post:4200', environment: 'production', fields: ['title'] });
    await agent.acquireLease([await titleDecision()], { ttlMs: 60_000 });
    const queued = agent.acquireLease([await titleDecision()], { ttlMs: 10_000, waitMs: 60_000 }).catch((e: unknown) => e);
    await new Promise((r) => setTimeout(r, 300));
    flaky.mode = 'hold';
    const inflight = [0, 1, 2, 3, 4, 5].map((i) => write(4000 + i));
    await until('six writes held at the upstream', () => flaky!.held === 6);

    first.proc.kill('SIGTERM');
    await until('the drain to start', () => first.log().includes('draining'));
    // New requests are refused with 503 OVERLOADED and Retry-After; /readyz says not ready, /healthz alive.
    const refused = await write(4100).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(WritApiError);
    expect(refused).toMatchObject({ status: 503, code: 'OVERLOADED' });
    expect((refused as WritApiError).retryAfterMs).toBeGreaterThan(0);
    const ready = await fetch(`${first.url}/readyz`);
    expect(ready.status).toBe(503);
    expect(ready.headers.get('retry-after')).toBe('1');
    expect(ready.headers.get('connection')).toBe('close');
    expect(await ready.json()).toMatchObject({ status: 'not ready', code: 'OVERLOADED' }); // the 503 schema's code (without it: a 500)
    expect((await fetch(`${first.url}/healthz`)).status).toBe(200);
    expect(first.proc.exitCode).toBeNull();
    // The queued acquisition is told at once to retry, instead of holding the drain for its whole wait.
    expect(await queued).toMatchObject({ status: 503, code: 'OVERLOADED' });

    // The held writes go on: each is answered 201 with a COMPLETED receipt, then the process exits 0.
    flaky.mode = 'pass';
    flaky.release();
    const receipts = await Promise.all(inflight);
    for (const r of receipts) expect(r.status).toBe('COMPLETED');
    expect(await first.exited).toBe(0);
    stopLoad = true;
    await Promise.all(readers);
    expect(first.log()).toContain('drained: every admitted request has been answered');
    // Every answer the readers got was a decision or a 503 with Retry-After: nothing failed.
    expect(new Set(answers.filter((a) => a !== '200' && a !== 'no connection'))).toEqual(new Set(['503 OVERLOADED retry=true']));
    expect(answers).toContain('200');

    // Restart: nothing PENDING, every acknowledged write COMPLETED and in the upstream, the chain verifies.
    server = await startServerProcess({ dataDir, upstreamUrl: flaky.url });
    const gov = new WritClient({ baseUrl: server.url, principal: 'governance', privateJwk: JSON.parse(readFileSync(join(dataDir, 'admin.jwk'), 'utf8')) });
    expect((await gov.request<{ receipts: unknown[] }>('GET', '/v1/receipts?status=PENDING')).receipts).toEqual([]);
    for (const r of receipts) expect((await gov.request<{ receipt: { status: string } }>('GET', `/v1/receipts/${r.receipt_id}`)).receipt.status).toBe('COMPLETED');
    expect(((await (await fetch(`${upstream.url}/writes`)).json()) as { total: number }).total).toBe(6);
    expect((await gov.request<{ ok: boolean }>('GET', '/v1/audit/verify')).ok).toBe(true);
  });
});
