import { once } from 'node:events';
import { WebSocketServer } from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LeaseStream, LeaseStreamClosedError } from '../../src/sdk/index.js';
import { fixtureKey } from '../support/harness.js';
import { startServerProcess, type ServerProcess } from '../support/server-process.js';
import { clientFor, revisionOf, sleep } from './sdk-support.js';

/** withLease({ stream }): the lease is taken, renewed and released over the lease stream, not HTTP. */
let server: ServerProcess;
beforeAll(async () => {
  server = await startServerProcess();
});
afterAll(async () => server?.stop());

const leaseRequests = (sent: { method: string; path: string }[]) => sent.filter((r) => r.path.startsWith('/v1/leases'));

/** The lease stream's answers by operation, from /metrics. */
async function streamAnswers(): Promise<Record<string, number>> {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  const out: Record<string, number> = {};
  for (const m of text.matchAll(/^writ_http_requests_total\{route="\/v1\/leases\/stream (\w+)",status="200"\} (\d+)/gm)) out[m[1]!] = Number(m[2]);
  return out;
}

describe('withLease over a lease stream', () => {
  it('takes, renews and releases over the stream: no HTTP lease request; the write goes through the gateway', async () => {
    const { client, sent } = clientFor(server, 'seo-agent-7');
    const stream = await client.openLeaseStream();
    const resource = 'wp:post:7301';
    const d = await client.decide({ action: 'update_post', resource, environment: 'production', fields: ['title'] });
    const before = await streamAnswers();
    const receipt = await client.withLease([d], async ({ act }) => {
      await sleep(3_000); // a 2 s TTL is renewed every 667 ms
      return act({ decision: d, action: 'update_post', resource, fields: ['title'], payload: { title: 'over the stream' }, expected_version: await revisionOf(server, '7301') });
    }, { ttlMs: 2_000, stream });
    expect(receipt.status).toBe('COMPLETED');
    const after = await streamAnswers();
    expect((after.acquire ?? 0) - (before.acquire ?? 0)).toBe(1);
    expect((after.renew ?? 0) - (before.renew ?? 0)).toBeGreaterThanOrEqual(2);
    expect((after.release ?? 0) - (before.release ?? 0)).toBe(1);
    expect(leaseRequests(sent)).toEqual([]);
    await stream.close();
  });

  it('keeps the lease when the stream closes while it is held: renewals and the release go over HTTP', async () => {
    const { client, sent } = clientFor(server, 'seo-agent-7');
    const stream = await client.openLeaseStream();
    const resource = 'wp:post:7302';
    const d = await client.decide({ action: 'update_post', resource, environment: 'production', fields: ['title'] });
    const out = await client.withLease([d], async ({ signal }) => {
      await stream.close();
      await sleep(3_000);
      return signal.aborted;
    }, { ttlMs: 2_000, stream });
    expect(out).toBe(false); // never lost
    const http = leaseRequests(sent);
    expect(http.filter((r) => r.method === 'POST' && r.path.endsWith('/renew')).length).toBeGreaterThanOrEqual(2);
    expect(http.filter((r) => r.method === 'DELETE')).toHaveLength(1);
    expect(http.filter((r) => r.method === 'POST' && r.path === '/v1/leases')).toEqual([]); // taken over the stream
  });

  it('takes the lease over HTTP when the stream was closed before the request was sent', async () => {
    const { client, sent } = clientFor(server, 'seo-agent-7');
    const stream = await client.openLeaseStream();
    await stream.close();
    const d = await client.decide({ action: 'update_post', resource: 'wp:post:7303', environment: 'production', fields: ['title'] });
    const epoch = await client.withLease([d], async ({ lease }) => lease!.epochs['wp:post:7303#title'], { ttlMs: 2_000, stream });
    expect(epoch).toBeGreaterThan(0);
    expect(leaseRequests(sent).filter((r) => r.method === 'POST' && r.path === '/v1/leases')).toHaveLength(1);
  });
});

describe('a lease stream that stops answering', () => {
  it('is cut after requestTimeoutMs: the pending call rejects with LeaseStreamClosedError instead of waiting for TCP', async () => {
    // A peer that completes the upgrade and then never answers (as a half-open connection would look).
    const mute = new WebSocketServer({ port: 0, host: '127.0.0.1' });
    await once(mute, 'listening');
    try {
      const port = (mute.address() as { port: number }).port;
      const stream = await LeaseStream.open({ baseUrl: `http://127.0.0.1:${port}`, principal: 'seo-agent-7', privateJwk: fixtureKey('seo-agent-7'), requestTimeoutMs: 200 });
      const started = Date.now();
      const e = await stream.renew({ lease_id: 'lease_x', token: 't' }).catch((x: unknown) => x);
      expect(e).toBeInstanceOf(LeaseStreamClosedError);
      expect((e as LeaseStreamClosedError).requestId).toBe(1);
      expect(Date.now() - started).toBeLessThan(5_000);
    } finally {
      for (const c of mute.clients) c.terminate();
      mute.close();
    }
  });
});
