import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OverloadedError, type WritApiError } from '../../src/sdk/index.js';
import { startServerProcess, type ServerProcess } from '../support/server-process.js';
import { clientFor, grantPublisherJobs, sleep } from './sdk-support.js';

/** Taking a lease across Writ shedding load or restarting: within the deadline, that is a wait, not a refusal. */
let server: ServerProcess;
beforeAll(async () => {
  server = await startServerProcess();
  await grantPublisherJobs(server);
});
afterAll(async () => server?.stop());

const titleOf = (resource: string) => ({ action: 'update_post', resource, environment: 'production', fields: ['title'] });

/** A fetch that answers the first `times` lease acquisitions itself, 503 OVERLOADED with Retry-After 1 s, as a Writ shedding load does. */
function overloadedFor(times: number): typeof fetch {
  let left = times;
  return (input, init) => {
    const url = new URL(typeof input === 'string' ? input : input instanceof URL ? input.href : input.url);
    if (url.pathname === '/v1/leases' && init?.method === 'POST' && left-- > 0) {
      const problem = { type: 'https://writ.dev/errors/OVERLOADED', title: 'Overloaded', status: 503, code: 'OVERLOADED', detail: 'the service is shedding load; retry after Retry-After' };
      return Promise.resolve(new Response(JSON.stringify(problem), { status: 503, headers: { 'content-type': 'application/problem+json', 'retry-after': '1' } }));
    }
    return fetch(input, init);
  };
}

describe('withLease and runExclusive when Writ is overloaded or restarting', () => {
  it('withLease retries OVERLOADED after its Retry-After, within deadlineMs', async () => {
    const resource = 'wp:post:7502';
    const { client, sent } = clientFor(server, 'seo-agent-7', overloadedFor(2));
    const d = await client.decide(titleOf(resource));
    const retries: { delayMs: number; error: WritApiError }[] = [];
    const ran = await client.withLease([d], async ({ lease }) => lease !== null, { deadlineMs: 10_000, onRetry: (_a, delayMs, error) => retries.push({ delayMs, error }) });
    expect(ran).toBe(true);
    expect(retries.map((r) => r.error.code)).toEqual(['OVERLOADED', 'OVERLOADED']);
    for (const r of retries) expect(r.delayMs).toBeGreaterThanOrEqual(1_000);
    expect(sent.filter((r) => r.method === 'POST' && r.path === '/v1/leases')).toHaveLength(3);
  });

  it('withLease gives up on OVERLOADED when its Retry-After would pass the deadline', async () => {
    const { client } = clientFor(server, 'seo-agent-7', overloadedFor(1));
    const d = await client.decide(titleOf('wp:post:7503'));
    await expect(client.withLease([d], async () => 'ran', { deadlineMs: 500 })).rejects.toBeInstanceOf(OverloadedError);
  });

  it('runExclusive (waitMs 0) retries OVERLOADED within deadlineMs, and still answers { ran: false } at once when another runner holds the job', async () => {
    const jobKey = `job:overloaded-${Date.now()}`;
    const { client } = clientFor(server, 'publisher', overloadedFor(1));
    const result = await client.runExclusive(jobKey, async ({ fencingEpoch }) => fencingEpoch, { deadlineMs: 10_000 });
    expect(result).toMatchObject({ ran: true });

    const other = clientFor(server, 'publisher').client;
    let skipped: unknown;
    const started = Date.now();
    await other.runExclusive(jobKey, async () => {
      skipped = await client.runExclusive(jobKey, async () => 'twice', { deadlineMs: 10_000 });
    });
    expect(skipped).toEqual({ ran: false, holder: 'publisher' });
    expect(Date.now() - started).toBeLessThan(3_000);
  });
  it('withLease waits through a SIGTERM restart of Writ while it waits for a busy key, and takes the lease within deadlineMs', async () => {
    const resource = 'wp:post:7501';
    const holder = clientFor(server, 'seo-agent-7').client;
    const waiter = clientFor(server, 'editor-alice').client;
    const d = await holder.decide(titleOf(resource));
    const w = await waiter.decide(titleOf(resource));
    expect([d.allow, w.allow]).toEqual([true, true]);
    const held = await holder.acquireLease([d], { ttlMs: 3_000 });

    const retries: unknown[] = [];
    const started = Date.now();
    const waiting = waiter.withLease([w], async ({ lease }) => lease!.epochs[`${resource}#title`], {
      deadlineMs: 25_000, onRetry: (_attempt, _delay, e) => retries.push(e),
    }).then((epoch) => ({ epoch, error: null }), (error: unknown) => ({ epoch: null, error }));
    await sleep(300);
    const port = Number(new URL(server.url).port);
    const upstreamPort = Number(new URL(server.upstreamUrl).port);
    await server.stop();
    await sleep(500); // refused connections meanwhile
    server = await startServerProcess({ dataDir: server.dataDir, port, upstreamPort });
    const { epoch, error } = await waiting;

    expect(error, `after ${Date.now() - started} ms: ${String(error)}`).toBeNull();
    // Its queued wait was ended by the shutdown (OVERLOADED): it asked again once Writ was back.
    expect(retries.some((e) => e instanceof OverloadedError), retries.map(String).join('\n')).toBe(true);
    expect(epoch).toBe(held.epochs[`${resource}#title`]! + 1);
  });
});
