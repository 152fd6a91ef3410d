/**
 * A lease granted whose answer never goes out, although its caller had not been seen leaving when the
 * grant was made: the connection breaks in the very turn of the event loop that commits the grant, so
 * Node reports its 'close' only after the answer was written into a dead socket. Driven in-process on
 * each engine: the store runs a hook right after the granting commit that destroys the server's side of
 * the caller's connection. Such a grant is given up as one granted after the caller left (released at
 * once: Writ made its token), and counted; before, it was held by no one who could use it until its TTL.
 * The same for a grant in flight when a shutdown's drain timed out and Writ closed the stream (1001).
 * (The caller leaving before the grant, over real processes: test/e2e/lease-stream-abandoned.test.ts.)
 */
import { request as httpRequest } from 'node:http';
import type { Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createCallerAssertion, newLeaseToken } from '../../src/sdk/index.js';
import type { AbandonedAcquisition } from '../../src/service/index.js';
import type { StoreTx } from '../../src/store/contract.js';
import { decideOk } from '../support/agent.js';
import { fixtureKey, type Harness } from '../support/harness.js';
import { closeOpened, listening } from '../support/lease-stream.js';
import { openRawWebSocket } from '../support/raw-websocket.js';

const SEO = 'seo-agent-7';

afterEach(closeOpened);

async function authorized(principal: string): Promise<Record<string, string>> {
  return { authorization: `Bearer ${await createCallerAssertion({ principal, privateJwk: fixtureKey(principal) })}` };
}

/**
 * The harness's store runs `afterGrant` synchronously right after the next commit that grants a lease,
 * in the continuation that goes on to answer it (so a socket destroyed there reports its 'close' later).
 */
function afterNextGrant(h: Harness, afterGrant: () => void): void {
  const store = h.ctx.store;
  const readWrite = store.readWrite.bind(store);
  let armed = true;
  store.readWrite = async <T>(fn: (tx: StoreTx) => Promise<T>): Promise<T> => {
    const out = await readWrite(fn);
    if (armed && (out as { granted?: unknown } | null)?.granted === true) {
      armed = false;
      afterGrant();
    }
    return out;
  };
}

/** The server's side of the connection whose client side is `client`. */
function serverSideOf(sockets: Set<Socket>, client: Socket): Socket {
  const found = [...sockets].find((s) => s.remotePort === client.localPort);
  if (!found) throw new Error(`no server socket for client port ${client.localPort}`);
  return found;
}

async function abandonedCount(h: Harness, outcome: string): Promise<number> {
  const text = (await h.call(null, { method: 'GET', url: '/metrics' })).raw;
  const line = text.split('\n').find((l) => l.startsWith(`writ_lease_acquisitions_abandoned_total{outcome="${outcome}"}`));
  return line === undefined ? 0 : Number(line.split(' ').at(-1));
}

/** writ_http_requests_total for `route` and `status` (0 when never counted). */
async function answeredCount(h: Harness, route: string, status: number): Promise<number> {
  const text = (await h.call(null, { method: 'GET', url: '/metrics' })).raw;
  const line = text.split('\n').find((l) => l.startsWith(`writ_http_requests_total{route="${route}",status="${status}"}`));
  return line === undefined ? 0 : Number(line.split(' ').at(-1));
}

async function until(what: string, ok: () => Promise<boolean>, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await ok())) {
    if (Date.now() > end) throw new Error(`${what}: not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe.each(['sqlite', 'postgres'] as const)('a grant whose answer is written into a connection that broke as it was granted, on %s', (engine) => {
  it('on the lease stream (the send fails): released at once and counted, the key free for the next acquirer', async () => {
    const { h, url } = await listening({ engine });
    const sockets = new Set<Socket>();
    h.app.server.on('connection', (s: Socket) => sockets.add(s));
    const key = 'wp:post:91#title';
    const decision = (await decideOk(h, SEO, { resource: 'wp:post:91', fields: ['title'] })).token;
    const releasedBefore = await abandonedCount(h, 'released');
    const raw = await openRawWebSocket(url, '/v1/leases/stream', await authorized(SEO));
    afterNextGrant(h, () => serverSideOf(sockets, raw.socket).destroy());
    raw.sendText(JSON.stringify({ id: 1, op: 'acquire', decisions: [decision], ttl_ms: 30_000 }));
    // Before: the lease stayed held by seo-agent-7, whose answer was lost, until its TTL, and nothing was counted.
    await until('the grant given up and counted', async () => (await abandonedCount(h, 'released')) === releasedBefore + 1);
    expect((await h.ctx.leases.describe(key))?.holderIdentity ?? null).toBeNull();
    expect((await h.ctx.leases.history({ key })).map((e) => e.event)).toEqual(['ACQUIRE', 'RELEASE']);
    expect(raw.messages).toEqual([]);
    // Counted once, as abandoned: not as an answer that went out (before, also a 200 in writ_http_requests_total).
    expect(await answeredCount(h, '/v1/leases/stream acquire', 200)).toBe(0);
  });

  it('on the lease stream, with the caller\'s own token: kept and counted, and the caller claims it by asking again with that token', async () => {
    const { h, url } = await listening({ engine });
    const sockets = new Set<Socket>();
    h.app.server.on('connection', (s: Socket) => sockets.add(s));
    const key = 'wp:post:94#title';
    const decision = (await decideOk(h, SEO, { resource: 'wp:post:94', fields: ['title'] })).token;
    const keptBefore = await abandonedCount(h, 'kept_for_replay');
    const token = newLeaseToken();
    const raw = await openRawWebSocket(url, '/v1/leases/stream', await authorized(SEO));
    afterNextGrant(h, () => serverSideOf(sockets, raw.socket).destroy());
    raw.sendText(JSON.stringify({ id: 1, op: 'acquire', decisions: [decision], ttl_ms: 30_000, token }));
    // Before: held, as now, but not counted.
    await until('the grant kept and counted', async () => (await abandonedCount(h, 'kept_for_replay')) === keptBefore + 1);
    expect(await answeredCount(h, '/v1/leases/stream acquire', 200)).toBe(0);
    expect((await h.ctx.leases.describe(key))?.holderIdentity).toBe(SEO);
    const claimed = await h.call(SEO, { method: 'POST', url: '/v1/leases', payload: { decisions: [decision], ttl_ms: 30_000, token } });
    expect(claimed.status).toBe(200);
    expect(claimed.body).toMatchObject({ replayed: true, keys: [key] });
  });

  it('on POST /v1/leases (the answer is never flushed): released at once and counted', async () => {
    const { h, url } = await listening({ engine });
    const sockets = new Set<Socket>();
    h.app.server.on('connection', (s: Socket) => sockets.add(s));
    const key = 'wp:post:92#title';
    const decision = (await decideOk(h, SEO, { resource: 'wp:post:92', fields: ['title'] })).token;
    const releasedBefore = await abandonedCount(h, 'released');
    const body = JSON.stringify({ decisions: [decision], ttl_ms: 30_000 });
    const req = httpRequest(`${url}/v1/leases`, { method: 'POST', agent: false, headers: { ...(await authorized(SEO)), 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } });
    const answered = new Promise<unknown>((resolve) => {
      req.on('response', resolve);
      req.on('error', resolve);
    });
    req.on('socket', (client: Socket) => afterNextGrant(h, () => serverSideOf(sockets, client).destroy()));
    req.end(body);
    expect(await answered).toMatchObject({ code: 'ECONNRESET' });
    // Before: the lease stayed held, its answer lost, until its TTL, and nothing was counted.
    await until('the grant given up and counted', async () => (await abandonedCount(h, 'released')) === releasedBefore + 1);
    expect((await h.ctx.leases.describe(key))?.holderIdentity ?? null).toBeNull();
    expect((await h.ctx.leases.history({ key })).map((e) => e.event)).toEqual(['ACQUIRE', 'RELEASE']);
    // An HTTP answer is counted once it went out (fastify's 'finish'): this one is counted only as abandoned.
    expect(await answeredCount(h, '/v1/leases', 201)).toBe(0);
  });

  it('on a lease stream Writ closes (1001) when its drain timed out with the grant in flight, to a client that does not answer the close: released at once and counted', async () => {
    const { h, url } = await listening({ engine, config: { drainTimeoutMs: 100 } });
    const key = 'wp:post:93#title';
    const decision = (await decideOk(h, SEO, { resource: 'wp:post:93', fields: ['title'] })).token;
    // Told as the metrics are (the app is closed by then: no /metrics to read).
    const told: AbandonedAcquisition[] = [];
    const observer = h.ctx.observer;
    h.ctx.observer = { ...observer, abandonedAcquisition: (e) => void told.push(e) };
    const raw = await openRawWebSocket(url, '/v1/leases/stream', await authorized(SEO));
    // The grant commits, and its answer waits (a slow turn) until the server has closed the stream.
    let granted = () => {};
    const committed = new Promise<void>((resolve) => (granted = resolve));
    let answer = () => {};
    const answering = new Promise<void>((resolve) => (answer = resolve));
    const store = h.ctx.store;
    const readWrite = store.readWrite.bind(store);
    store.readWrite = async <T>(fn: (tx: StoreTx) => Promise<T>): Promise<T> => {
      const out = await readWrite(fn);
      if ((out as { granted?: unknown } | null)?.granted === true) {
        granted();
        await answering;
      }
      return out;
    };
    raw.sendText(JSON.stringify({ id: 1, op: 'acquire', decisions: [decision], ttl_ms: 30_000 }));
    await committed;
    const closing = h.app.close();
    // The drain times out (the acquisition still holds it), and the stream is closed with 1001: CLOSING, as
    // the client never answers the close frame (ws's 'close' would come at its 30 s close timer).
    expect(await raw.serverClosed).toBe(1001);
    answer();
    // Before: the answer went into the CLOSING socket and the lease stayed held until its TTL, nothing counted.
    await until('the grant given up and told', async () => told.length > 0);
    expect(told).toEqual([expect.objectContaining({ outcome: 'released', principal: SEO, keys: [key] })]);
    expect((await h.ctx.leases.describe(key))?.holderIdentity ?? null).toBeNull();
    expect(raw.messages).toEqual([]);
    raw.destroy();
    await closing;
  });
});
