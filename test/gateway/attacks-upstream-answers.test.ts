import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { decideOk } from '../support/agent.js';
import { startHarness, type Harness } from '../support/harness.js';
import { MAX_ANSWER_BYTES } from '../../src/upstream/http-request.js';
import { reconcileReceipts } from '../../src/service/index.js';

/**
 * An upstream that answers badly: a huge (endless) answer, or a body trickled past the timeout. Writ reads
 * no more than MAX_ANSWER_BYTES of an answer (an upstream, or a proxy before it, could otherwise make it
 * buffer without bound within the timeout, which a single write's deadline allows); either way the write's
 * outcome is unknown: the receipt stays PENDING, to be settled from the upstream's record.
 */
let h: Harness;
let server: Server;
let behaviour: (res: ServerResponse, req: IncomingMessage) => void;
let sent = 0;
let socketClosedEarly = false;

beforeEach(async () => {
  sent = 0;
  socketClosedEarly = false;
  server = createServer((req, res) => {
    req.resume();
    req.on('end', () => behaviour(res, req));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  h = await startHarness({ upstreamRoutes: [{ pattern: 'wp:post:*', url, timeoutMs: 3000, environment: 'production' }] });
});
afterEach(async () => {
  await h?.close();
  server.closeAllConnections();
  await new Promise<void>((r) => server.close(() => r()));
});

const write = { action: 'update_post', resource: 'wp:post:1024', fields: ['meta_description'], payload: { meta_description: 'm' }, expected_version: 0 };
const act = async () => {
  const d = await decideOk(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['meta_description'] });
  return h.call('seo-agent-7', { method: 'POST', url: '/v1/actions', payload: write, headers: { 'writ-decision': d.token } });
};
const receiptStatus = async (id: string) => (await h.call('governance', { method: 'GET', url: `/v1/receipts/${id}` })).body.receipt.status;

describe('an upstream\'s answer', () => {
  it('larger than MAX_ANSWER_BYTES is not read to its end: the connection is dropped, the outcome is unknown (PENDING)', async () => {
    const TOTAL = 64 * 1024 * 1024;
    const chunk = Buffer.alloc(64 * 1024, 'x');
    behaviour = (res) => {
      res.writeHead(201, { 'content-type': 'application/json' });
      res.write('{"revision":1,"pad":"');
      sent = 0;
      res.on('close', () => (socketClosedEarly = sent < TOTAL));
      const pump = () => {
        while (sent < TOTAL) {
          sent += chunk.length;
          if (!res.write(chunk)) return void res.once('drain', pump);
        }
        res.end('"}');
      };
      pump();
    };
    const r = await act();
    expect(r.status, r.raw.slice(0, 300)).toBe(504);
    expect(r.body.code).toBe('UPSTREAM_TIMEOUT');
    expect(await receiptStatus(r.body.receipt_id)).toBe('PENDING');
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(socketClosedEarly).toBe(true);
    expect(sent).toBeLessThan(TOTAL);
    expect(MAX_ANSWER_BYTES).toBeLessThanOrEqual(4 * 1024 * 1024);
  }, 30_000);

  it('trickled past the timeout: UPSTREAM_TIMEOUT, PENDING (the timeout counts to the answer\'s last byte)', async () => {
    behaviour = (res) => {
      res.writeHead(201, { 'content-type': 'application/json' });
      res.write('{"revision":');
      const t = setInterval(() => res.write(' '), 200);
      setTimeout(() => {
        clearInterval(t);
        res.end('1}');
      }, 5000).unref();
      res.on('close', () => clearInterval(t));
    };
    const r = await act();
    expect(r.body.code, r.raw).toBe('UPSTREAM_TIMEOUT');
    expect(await receiptStatus(r.body.receipt_id)).toBe('PENDING');
  }, 20_000);

  it('a small answer still settles COMPLETED', async () => {
    behaviour = (res) => res.writeHead(201, { 'content-type': 'application/json' }).end(JSON.stringify({ revision: 1, pad: 'x'.repeat(10_000) }));
    const r = await act();
    expect(r.status, r.raw).toBe(201);
    expect(r.body.receipt.status).toBe('COMPLETED');
  });

  it('a 2xx whose revision is no version (missing, a string, negative, fractional, huge, an array, a boolean, not JSON) is not taken as one: the outcome is unknown (PENDING), never a COMPLETED receipt with a made-up version nor a 500', async () => {
    for (const answer of ['{}', '{"revision":"abc"}', '{"revision":-5}', '{"revision":1.5}', '{"revision":1e300}', '{"revision":[1]}', '{"revision":true}', '{"revision":"  "}', 'not json']) {
      behaviour = (res) => res.writeHead(201, { 'content-type': 'application/json' }).end(answer);
      const r = await act();
      expect(r.body.code, `${answer}: ${r.raw}`).toBe('UPSTREAM_TIMEOUT');
      expect(await receiptStatus(r.body.receipt_id), answer).toBe('PENDING');
    }
    expect((await h.call('governance', { method: 'GET', url: '/v1/audit/verify' })).body.ok).toBe(true);
  });

  it('reconciliation takes "applied" from a lookup only with a version: an answer without one leaves the receipt PENDING (unresolved)', async () => {
    let lookup = '{"applied":true,"revision":"x"}';
    behaviour = (res, req) => res.writeHead(req.method === 'GET' ? 200 : 201, { 'content-type': 'application/json' }).end(req.method === 'GET' ? lookup : '{}');
    const r = await act();
    expect(await receiptStatus(r.body.receipt_id)).toBe('PENDING');
    for (const bad of ['{"applied":true,"revision":"x"}', '{"applied":true}', '{"applied":"yes","revision":1}', '{}', 'not json']) {
      lookup = bad;
      const report = await reconcileReceipts(h.ctx, { olderThanMs: 0 });
      expect(report.unresolved.map((u) => u.receipt_id), bad).toContain(r.body.receipt_id);
      expect(await receiptStatus(r.body.receipt_id), bad).toBe('PENDING');
    }
    lookup = '{"applied":true,"revision":1}';
    await reconcileReceipts(h.ctx, { olderThanMs: 0 });
    const settled = (await h.call('governance', { method: 'GET', url: `/v1/receipts/${r.body.receipt_id}` })).body.receipt;
    expect([settled.status, settled.final_version]).toEqual(['COMPLETED', 1]);
  });
});
