import { once } from 'node:events';
import { rmSync } from 'node:fs';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCallerAssertion, newLeaseToken, WritClient } from '../../src/sdk/index.js';
import { createTestDatabase } from '../store/conformance/engines.js';
import { fixtureKey } from '../support/harness.js';
import { openRawWebSocket } from '../support/raw-websocket.js';
import { startServerProcess, type ServerProcess } from '../support/server-process.js';

/**
 * An acquisition waiting in the queue on a lease stream whose client went away (a raw client that
 * closed its socket), or on POST /v1/leases whose connection dropped: a real `writ serve` per engine. The acquisition leaves the queue when the stream
 * closes, so the key is not granted to nobody when its holder releases it: the next acquirer has it at
 * once. A caller that sent its own token and comes back asks again with it and gets the key (one lease,
 * never two). A client that sends a close frame and then hangs (its connection open, the stream CLOSING
 * until ws's close timer) is gone from its close frame. Seen as a user would: GET /v1/leases/queues,
 * POST /v1/leases, /metrics and the server's log.
 */
const SEO = 'seo-agent-7';
const ALICE = 'editor-alice';
const ENGINES = [
  { name: 'SQLite', database: async () => null },
  { name: 'PostgreSQL', database: async () => createTestDatabase('writ_abandoned') },
];

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function authorized(principal: string): Promise<Record<string, string>> {
  return { authorization: `Bearer ${await createCallerAssertion({ principal, privateJwk: fixtureKey(principal) })}` };
}

async function queues(url: string): Promise<{ key: string; waiters: { holder: string }[] }[]> {
  const res = await fetch(`${url}/v1/leases/queues`, { headers: await authorized(ALICE) });
  expect(res.status).toBe(200);
  return ((await res.json()) as { queues: { key: string; waiters: { holder: string }[] }[] }).queues;
}

async function until(what: string, ok: () => Promise<boolean>, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await ok())) {
    if (Date.now() > end) throw new Error(`${what}: not within ${ms} ms`);
    await sleep(50);
  }
}

async function postLease(url: string, principal: string, decision: string, token?: string): Promise<{ status: number; body: Record<string, any> }> {
  const res = await fetch(`${url}/v1/leases`, {
    method: 'POST',
    headers: { ...(await authorized(principal)), 'content-type': 'application/json' },
    body: JSON.stringify({ decisions: [decision], ttl_ms: 30_000, ...(token === undefined ? {} : { token }) }),
  });
  return { status: res.status, body: (await res.json()) as Record<string, any> };
}

async function abandonedCount(url: string, outcome: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`writ_lease_acquisitions_abandoned_total{outcome="${outcome}"}`));
  return line === undefined ? 0 : Number(line.split(' ').at(-1));
}

/** Every writ_http_requests_total count of `route`, summed over the statuses. */
async function answeredCount(url: string, route: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  return text.split('\n').filter((l) => l.startsWith(`writ_http_requests_total{route="${route}",`)).reduce((n, l) => n + Number(l.split(' ').at(-1)), 0);
}

describe.each(ENGINES)('an acquisition whose lease stream closed while it waited, on $name', ({ database }) => {
  let server: ServerProcess;
  const cleanups: (() => Promise<void> | void)[] = [];
  beforeAll(async () => {
    const db = await database();
    if (db) cleanups.push(db.drop);
    // WRIT_LOG=info: the log line that says what became of the acquisition.
    server = await startServerProcess({ env: { WRIT_LOG: 'info', ...(db ? { WRIT_DATABASE_URL: db.url } : {}) } });
    cleanups.push(() => rmSync(server.dataDir, { recursive: true, force: true }));
  }, 120_000);
  afterAll(async () => {
    await server?.stop();
    for (const c of cleanups.splice(0).reverse()) await c();
  });

  /** Editor-alice holds the title of `post` (30 s); seo-agent-7 has a decision to wait for it. With the count of withdrawn acquisitions before. */
  async function aliceHoldsSeoWaits(post: number) {
    const key = `wp:post:${post}#title`;
    const alice = new WritClient({ baseUrl: server.url, principal: ALICE, privateJwk: fixtureKey(ALICE) });
    const seo = new WritClient({ baseUrl: server.url, principal: SEO, privateJwk: fixtureKey(SEO) });
    const decide = async (c: WritClient) => (await c.decide({ action: 'update_post', resource: `wp:post:${post}`, environment: 'production', fields: ['title'] })).token!;
    const [aliceDecision, seoDecision] = [await decide(alice), await decide(seo)];
    const withdrawnBefore = await abandonedCount(server.url, 'withdrawn');
    const held = await alice.acquireLease([aliceDecision], { ttlMs: 30_000 });
    return { key, alice, seo, aliceDecision, seoDecision, withdrawnBefore, held };
  }

  for (const withToken of [false, true]) {
    it(`${withToken ? 'with' : 'without'} the caller's token: leaves the queue when the client goes; the holder's release serves the next acquirer at once${withToken ? ', and the caller asking again with its token gets the key' : ''}`, { timeout: 60_000 }, async () => {
      const { key, alice, seo, aliceDecision, seoDecision, withdrawnBefore, held } = await aliceHoldsSeoWaits(withToken ? 8_802 : 8_801);
      // A raw client: an acquire that waits behind Alice, then the socket is cut without a close frame.
      const ws = new WebSocket(`${server.url.replace(/^http/, 'ws')}/v1/leases/stream`, { headers: await authorized(SEO), perMessageDeflate: false });
      ws.on('error', () => undefined);
      await once(ws, 'open');
      const seoToken = newLeaseToken();
      ws.send(JSON.stringify({ id: 1, op: 'acquire', decisions: [seoDecision], ttl_ms: 30_000, wait_ms: 30_000, ...(withToken ? { token: seoToken } : {}) }));
      await until('the stream\'s acquisition queued', async () => (await queues(server.url)).some((q) => q.key === key && q.waiters.some((w) => w.holder === SEO)));
      const answeredBefore = await answeredCount(server.url, '/v1/leases/stream acquire');
      ws.terminate();

      // It leaves the queue (before: it stayed, and was granted when Alice released, to no one).
      await until('the acquisition left the queue', async () => !(await queues(server.url)).some((q) => q.key === key));
      expect(await abandonedCount(server.url, 'withdrawn')).toBe(withdrawnBefore + 1);
      // Counted once, as withdrawn: its answer (OVERLOADED) never went out (before: also a 503 in writ_http_requests_total).
      expect(await answeredCount(server.url, '/v1/leases/stream acquire')).toBe(answeredBefore);
      expect(server.log()).toContain(`an acquisition of ${key} by ${SEO} was answered: withdrawn from the queue`);

      await alice.releaseLease(held);
      if (!withToken) {
        // The next acquirer (Alice again, no wait) has the key at once, with the next epoch.
        const next = await postLease(server.url, ALICE, aliceDecision);
        expect(next.status, JSON.stringify(next.body)).toBe(201);
        expect(next.body.epochs[key]).toBe(held.epochs[key]! + 1);
        await alice.releaseLease(next.body as { lease_id: string; token: string });
        return;
      }
      // The caller comes back and asks again with its token: the key is its (a new grant: the wait took nothing),
      // and asked once more with it, the same lease (replayed), never a second one.
      const claimed = await postLease(server.url, SEO, seoDecision, seoToken);
      expect(claimed.status, JSON.stringify(claimed.body)).toBe(201);
      expect(claimed.body.epochs[key]).toBe(held.epochs[key]! + 1);
      const again = await postLease(server.url, SEO, seoDecision, seoToken);
      expect(again.status).toBe(200);
      expect(again.body).toMatchObject({ lease_id: claimed.body.lease_id, replayed: true, epochs: claimed.body.epochs });
      await seo.releaseLease(claimed.body as { lease_id: string; token: string });
    });
  }

  for (const withToken of [false, true]) {
    it(`a close frame from a client that then hangs (the connection stays open, the stream CLOSING): the acquisition is abandoned at the close frame, not left to be granted to nobody when the holder releases${withToken ? '; asked again with its token, the key is the caller\'s' : ''}`, { timeout: 60_000 }, async () => {
      const post = withToken ? 8_805 : 8_804;
      const key = `wp:post:${post}#title`;
      const alice = new WritClient({ baseUrl: server.url, principal: ALICE, privateJwk: fixtureKey(ALICE) });
      const seo = new WritClient({ baseUrl: server.url, principal: SEO, privateJwk: fixtureKey(SEO) });
      const decide = async (c: WritClient) => (await c.decide({ action: 'update_post', resource: `wp:post:${post}`, environment: 'production', fields: ['title'] })).token!;
      const [aliceDecision, seoDecision] = [await decide(alice), await decide(seo)];
      const withdrawnBefore = await abandonedCount(server.url, 'withdrawn');
      const held = await alice.acquireLease([aliceDecision], { ttlMs: 30_000 });
      const raw = await openRawWebSocket(server.url, '/v1/leases/stream', await authorized(SEO));
      cleanups.push(() => raw.destroy());
      const seoToken = newLeaseToken();
      raw.sendText(JSON.stringify({ id: 1, op: 'acquire', decisions: [seoDecision], ttl_ms: 30_000, wait_ms: 30_000, ...(withToken ? { token: seoToken } : {}) }));
      await until('the stream\'s acquisition queued', async () => (await queues(server.url)).some((q) => q.key === key && q.waiters.some((w) => w.holder === SEO)));
      raw.sendClose(1000);
      // The server has read the close frame once its own arrives; its socket stays open (the client neither reads on nor ends it).
      expect(await raw.serverClosed).toBe(1000);
      // Before: the acquisition stayed queued (its stream was CLOSING, not closed), Alice's release granted it
      // and its answer went into the closing socket: the key held by no one who could use it until its TTL.
      await alice.releaseLease(held);
      await until('the acquisition left the queue', async () => !(await queues(server.url)).some((q) => q.key === key));
      expect(await abandonedCount(server.url, 'withdrawn')).toBe(withdrawnBefore + 1);
      expect(raw.messages).toEqual([]);
      expect(raw.socket.destroyed).toBe(false);
      if (!withToken) {
        const next = await postLease(server.url, ALICE, aliceDecision);
        expect(next.status, JSON.stringify(next.body)).toBe(201);
        expect(next.body.epochs[key]).toBe(held.epochs[key]! + 1);
        await alice.releaseLease(next.body as { lease_id: string; token: string });
        return;
      }
      const claimed = await postLease(server.url, SEO, seoDecision, seoToken);
      expect(claimed.status, JSON.stringify(claimed.body)).toBe(201);
      expect(claimed.body.epochs[key]).toBe(held.epochs[key]! + 1);
      await seo.releaseLease(claimed.body as { lease_id: string; token: string });
    });
  }

  it('the same for POST /v1/leases with wait_ms whose client drops the connection: it leaves the queue, and the next acquirer has the key at once', { timeout: 60_000 }, async () => {
    const { key, alice, aliceDecision, seoDecision, withdrawnBefore, held } = await aliceHoldsSeoWaits(8_803);
    const cut = new AbortController();
    const waiting = fetch(`${server.url}/v1/leases`, {
      method: 'POST', signal: cut.signal,
      headers: { ...(await authorized(SEO)), 'content-type': 'application/json' },
      body: JSON.stringify({ decisions: [seoDecision], ttl_ms: 30_000, wait_ms: 30_000 }),
    }).catch((e: unknown) => e);
    await until('the HTTP acquisition queued', async () => (await queues(server.url)).some((q) => q.key === key && q.waiters.some((w) => w.holder === SEO)));
    cut.abort();
    expect(await waiting).toMatchObject({ name: 'AbortError' });
    await until('the acquisition left the queue', async () => !(await queues(server.url)).some((q) => q.key === key));
    expect(await abandonedCount(server.url, 'withdrawn')).toBe(withdrawnBefore + 1);
    await alice.releaseLease(held);
    const next = await postLease(server.url, ALICE, aliceDecision);
    expect(next.status, JSON.stringify(next.body)).toBe(201);
    expect(next.body.epochs[key]).toBe(held.epochs[key]! + 1);
  });
});
