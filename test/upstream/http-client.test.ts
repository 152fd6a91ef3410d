import type { FastifyInstance } from 'fastify';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HttpUpstreamClient, startSampleUpstream } from '../../src/upstream/index.js';

let app: FastifyInstance;
let client: HttpUpstreamClient;
let baseUrl: string;

beforeAll(async () => {
  const started = await startSampleUpstream({ port: 0, dbFile: ':memory:' });
  app = started.app;
  baseUrl = started.url;
  client = new HttpUpstreamClient({ baseUrl, timeoutMs: 2000 });
});
afterAll(async () => {
  await app.close();
});

const write = (over: Partial<Parameters<HttpUpstreamClient['write']>[1]> = {}) => ({
  fields: { title: 't' },
  expectedVersion: 0,
  fencing: { 'wp:post:x#title': 1 } as Record<string, number> | null,
  principal: 'seo-agent-7',
  receiptId: `r-${Math.random()}`,
  ...over,
});

describe('HttpUpstreamClient against the sample upstream', () => {
  it('reads a missing post as version 0 and writes it into existence', async () => {
    expect(await client.read('wp:post:1')).toEqual({ exists: false, version: 0, fields: {} });
    expect(await client.write('wp:post:1', write({ fields: { title: 'first' } }))).toMatchObject({ kind: 'applied', status: 201, version: 1, replayed: false });
    expect(await client.read('wp:post:1')).toEqual({ exists: true, version: 1, fields: { title: 'first' } });
  });

  it('maps a stale expected version to a conflict with the current version (lost update refused)', async () => {
    await client.write('wp:post:31', write({ expectedVersion: 0 }));
    const read = await client.read('wp:post:31');
    expect((await client.write('wp:post:31', write({ expectedVersion: read.version }))).kind).toBe('applied');
    const second = await client.write('wp:post:31', write({ expectedVersion: read.version, fields: { title: 'second agent' } }));
    expect(second).toEqual({ kind: 'conflict', status: 412, conflict: true, currentVersion: 2, changedFields: ['title'] });
  });

  it('lets two writers of different fields from the same version both apply', async () => {
    await client.write('wp:post:32', write({ fields: { title: 'T', body: 'B' } }));
    const { version } = await client.read('wp:post:32');
    expect(await client.write('wp:post:32', write({ expectedVersion: version, fields: { title: 'T2' } }))).toMatchObject({ kind: 'applied', version: 2 });
    expect(await client.write('wp:post:32', write({ expectedVersion: version, fields: { body: 'B2' } }))).toMatchObject({ kind: 'applied', version: 3 });
    expect((await client.read('wp:post:32')).fields).toEqual({ title: 'T2', body: 'B2' });
  });

  it('sends fencing epochs as key=epoch pairs sorted by key, and omits the header when fencing is null', async () => {
    await client.write('wp:post:33', write({ fencing: { 'wp:post:33#title': 5, 'domain:SEO_METADATA': 3 }, receiptId: 'r-33a' }));
    await client.write('wp:post:33', write({ expectedVersion: 1, fencing: null, receiptId: 'r-33b' }));
    const { requests } = (await (await fetch(`${baseUrl}/requests?post=33`)).json()) as { requests: { fencing_epoch: string | null }[] };
    expect(requests.map((r) => r.fencing_epoch)).toEqual(['domain:SEO_METADATA=3, wp:post:33#title=5', null]);
    const post = (await (await fetch(`${baseUrl}/posts/33`)).json()) as { fences: Record<string, number> };
    expect(post.fences).toEqual({ 'domain:SEO_METADATA': 3, 'wp:post:33#title': 5 });
  });

  it('maps a lower fencing epoch on any key to staleEpoch naming that key and its highest epoch', async () => {
    await client.write('wp:post:100', write({ fencing: { 'wp:post:100#title': 4, 'domain:SEO_METADATA': 2 } }));
    const stale = await client.write('wp:post:100', write({ expectedVersion: 1, fencing: { 'wp:post:100#title': 9, 'domain:SEO_METADATA': 1 } }));
    expect(stale).toEqual({ kind: 'stale_epoch', status: 409, staleEpoch: true, key: 'domain:SEO_METADATA', highestEpoch: 2 });
  });

  it('reads changedFields and key as [] and null from an upstream that does not send them', async () => {
    const legacy: Server = createServer((req, res) => {
      const status = req.url === '/posts/1' ? 412 : 409;
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(status === 412 ? { code: 'PRECONDITION_FAILED', current_revision: 4 } : { code: 'STALE_FENCING_EPOCH', highest: 7 }));
    });
    await new Promise<void>((resolve) => legacy.listen(0, '127.0.0.1', resolve));
    try {
      const old = new HttpUpstreamClient({ baseUrl: `http://127.0.0.1:${(legacy.address() as AddressInfo).port}`, timeoutMs: 2000 });
      expect(await old.write('wp:post:1', write())).toEqual({ kind: 'conflict', status: 412, conflict: true, currentVersion: 4, changedFields: [] });
      expect(await old.write('wp:post:2', write())).toEqual({ kind: 'stale_epoch', status: 409, staleEpoch: true, key: null, highestEpoch: 7 });
    } finally {
      legacy.closeAllConnections();
      await new Promise((resolve) => legacy.close(resolve));
    }
  });

  it('sends the receipt id, so lookup finds the write', async () => {
    const result = await client.write('wp:post:55', write({ receiptId: 'rcpt_lookup' }));
    expect(result).toMatchObject({ kind: 'applied', version: 1 });
    expect(await client.lookup('wp:post:55', 'rcpt_lookup')).toEqual({ applied: true, revision: 1 });
    expect(await client.lookup('wp:post:55', 'rcpt_other')).toEqual({ applied: false });
  });

  it('refuses resource keys the adapter does not map', async () => {
    await expect(client.read('site:example.com:robots')).rejects.toMatchObject({ code: 'UNKNOWN_RESOURCE' });
  });

  it('reports a timeout as uncertain (maybe applied) and a refused connection as certainly not applied', async () => {
    const hanging: Server = createServer(() => {
      /* never answers */
    });
    await new Promise<void>((resolve) => hanging.listen(0, '127.0.0.1', resolve));
    const port = (hanging.address() as AddressInfo).port;
    try {
      const slow = new HttpUpstreamClient({ baseUrl: `http://127.0.0.1:${port}`, timeoutMs: 200 });
      expect(await slow.write('wp:post:1', write())).toMatchObject({ kind: 'timeout', status: null, maybeApplied: true });
      await expect(slow.read('wp:post:1')).rejects.toMatchObject({ code: 'UPSTREAM_TIMEOUT' });
    } finally {
      hanging.closeAllConnections();
      await new Promise((resolve) => hanging.close(resolve));
    }
    // A port nothing listens on (a fresh one: a pooled socket to the closed server would fail differently).
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const closedPort = (probe.address() as AddressInfo).port;
    await new Promise((resolve) => probe.close(resolve));
    const down = new HttpUpstreamClient({ baseUrl: `http://127.0.0.1:${closedPort}`, timeoutMs: 2000 });
    expect(await down.write('wp:post:1', write())).toMatchObject({ kind: 'network_error', maybeApplied: false });
    await expect(down.lookup('wp:post:1', 'r')).rejects.toMatchObject({ code: 'UPSTREAM_FAILED' });
  });
});
