import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { PlainHttpClient } from '../../src/upstream/http-request.js';

let server: http.Server | undefined;
afterEach(() => new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve())));

async function upstream(delayMs: number): Promise<string> {
  server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => setTimeout(() => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ echo: body })), delayMs));
  });
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server!.address() as AddressInfo).port}`;
}

describe('the gateway\'s upstream HTTP client', () => {
  it('a write slower than the 4 s idle-socket limit still gets its answer (that limit is for idle pooled sockets only)', { timeout: 15_000 }, async () => {
    const url = await upstream(4_300);
    const client = new PlainHttpClient(url);
    const res = await client.request(`${url}/x`, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: '{"a":1}', timeoutMs: 8_000 });
    expect(res).toMatchObject({ status: 200, body: { echo: '{"a":1}' } });
  });

  it('gives up after its own timeout with a timeout error (an unknown outcome for a write)', async () => {
    const url = await upstream(2_000);
    const client = new PlainHttpClient(url);
    await expect(client.request(`${url}/x`, { method: 'PUT', body: '{}', timeoutMs: 200 })).rejects.toMatchObject({ kind: 'timeout' });
  });

  it('reuses one connection for sequential requests', async () => {
    const url = await upstream(0);
    const sockets = new Set<unknown>();
    server!.on('connection', (s) => sockets.add(s));
    const client = new PlainHttpClient(url);
    for (let i = 0; i < 5; i++) expect((await client.request(`${url}/x`, { method: 'GET', timeoutMs: 2_000 })).status).toBe(200);
    expect(sockets.size).toBe(1);
  });
});
