import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { decideOk } from '../support/agent.js';
import { startHarness, type Harness } from '../support/harness.js';

/**
 * What goes to the upstream is what Writ builds, never what the caller sent: a recording upstream takes
 * every request as it arrived (headers, URL, body) and answers 201 at revision 1.
 */
interface Seen { method: string; url: string; headers: IncomingHttpHeaders; body: string }
let h: Harness;
let server: Server;
let seen: Seen[];

beforeEach(async () => {
  seen = [];
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      res.writeHead(201, { 'content-type': 'application/json' });
      res.end('{"revision":1}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  h = await startHarness({ upstreamRoutes: [{ pattern: 'wp:post:*', url, timeoutMs: 5000, environment: 'production' }] });
});
afterEach(async () => {
  await h?.close();
  server.closeAllConnections();
  await new Promise<void>((r) => server.close(() => r()));
});

const write = { action: 'update_post', resource: 'wp:post:1024', fields: ['meta_description'], payload: { meta_description: 'm' }, expected_version: 0 };

describe('the forwarded request is built by Writ', () => {
  it('no caller header reaches the upstream: not Authorization, Cookie, Host, hop-by-hop headers, nor Writ-* headers that name another principal or receipt', async () => {
    const d = await decideOk(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['meta_description'] });
    const r = await h.call('seo-agent-7', {
      method: 'POST', url: '/v1/actions', payload: write,
      headers: {
        'writ-decision': d.token,
        cookie: 'writ_console=stolen; other=1',
        host: 'evil.example',
        'proxy-authorization': 'Basic c2VjcmV0',
        'x-forwarded-for': '10.0.0.1',
        'x-forwarded-host': 'evil.example',
        te: 'trailers',
        upgrade: 'websocket',
        'writ-principal': 'governance',
        'writ-receipt-id': 'rcpt_forged',
        'writ-deadline': '99999999999999',
        'writ-fencing-epoch': '7',
        'if-match': '"42"',
        'x-http-method-override': 'DELETE',
      },
    });
    expect(r.status, r.raw).toBe(201);
    expect(seen).toHaveLength(1);
    const [got] = seen;
    expect(got!.method).toBe('PUT');
    expect(got!.url).toBe('/posts/1024');
    expect(Object.keys(got!.headers).sort()).toEqual(['connection', 'content-length', 'content-type', 'host', 'if-match', 'writ-deadline', 'writ-principal', 'writ-receipt-id']);
    expect(got!.headers.host).toBe(new URL(`http://127.0.0.1:${(server.address() as { port: number }).port}`).host);
    expect(got!.headers['writ-principal']).toBe('seo-agent-7');
    expect(got!.headers['writ-receipt-id']).toBe(r.body.receipt.receipt_id);
    expect(got!.headers['if-match']).toBe('"0"');
    expect(Number(got!.headers['writ-deadline'])).toBeLessThanOrEqual(h.clock.now() + 5000);
    // The body is exactly the checked fields, nothing else the request carried.
    expect(JSON.parse(got!.body)).toEqual({ fields: { meta_description: 'm' } });
  });

  it('the body cannot choose the upstream (url, path, upstream, headers members are refused by the schema) and nothing is forwarded', async () => {
    for (const extra of [{ url: 'http://169.254.169.254/' }, { path: '/admin' }, { upstream: 'x' }, { headers: { authorization: 'x' } }]) {
      const d = await decideOk(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['meta_description'] });
      const r = await h.call('seo-agent-7', { method: 'POST', url: '/v1/actions', payload: { ...write, ...extra }, headers: { 'writ-decision': d.token } });
      expect(r.status, r.raw).toBe(400);
    }
    expect(seen).toEqual([]);
  });

  it('a payload member not named in fields, or a field not in the payload, is UNPROCESSABLE and nothing is forwarded', async () => {
    const d = await decideOk(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['meta_description'] });
    const extra = await h.call('seo-agent-7', { method: 'POST', url: '/v1/actions', payload: { ...write, payload: { meta_description: 'm', title: 'smuggled' } }, headers: { 'writ-decision': d.token } });
    expect(extra.body.code).toBe('UNPROCESSABLE');
    const missing = await h.call('seo-agent-7', { method: 'POST', url: '/v1/actions', payload: { ...write, fields: ['meta_description', 'title'], payload: { title: 'x' } }, headers: { 'writ-decision': d.token } });
    expect(missing.body.code).toBe('UNPROCESSABLE');
    expect(seen).toEqual([]);
  });

  it('a __proto__ or constructor member in the payload is refused at the edge (400) and nothing is forwarded', async () => {
    const d = await decideOk(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['meta_description'] });
    for (const raw of [
      '{"action":"update_post","resource":"wp:post:1024","fields":["__proto__"],"payload":{"__proto__":{"meta_description":"m"}},"expected_version":0}',
      '{"action":"update_post","resource":"wp:post:1024","fields":["constructor"],"payload":{"constructor":{"prototype":{"x":1}}},"expected_version":0}',
    ]) {
      const r = await h.call('seo-agent-7', { method: 'POST', url: '/v1/actions', payload: raw, headers: { 'writ-decision': d.token, 'content-type': 'application/json' } });
      expect(r.status, r.raw).toBe(400);
    }
    expect(seen).toEqual([]);
  });
});
