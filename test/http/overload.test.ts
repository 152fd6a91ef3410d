import { createServer, type Server, type Socket } from 'node:net';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { act, decideOk } from '../support/agent.js';
import { startHarness, type Harness } from '../support/harness.js';
import { durableState } from '../support/state.js';

const harnesses: Harness[] = [];
afterAll(async () => {
  for (const h of harnesses) await h.close();
});

describe('per-principal rate limit (WRIT_RATE_LIMIT_PER_S, WRIT_RATE_LIMIT_BURST)', () => {
  it('a principal past its burst gets 429 RATE_LIMITED with Retry-After; others and governance are not limited; the bucket refills with time', async () => {
    const clock = new ManualClock(Date.UTC(2026, 5, 1, 12));
    const h = await startHarness({ clock, config: { rateLimit: { perSecond: 2, burst: 3 } } });
    harnesses.push(h);
    const read = (who: string) => h.call(who, { method: 'GET', url: `/v1/principals/${who}` });
    for (let i = 0; i < 3; i++) expect((await read('seo-agent-7')).status).toBe(200);
    const limited = await read('seo-agent-7');
    expect(limited.status).toBe(429);
    expect(String(limited.headers['content-type'])).toMatch(/application\/problem\+json/);
    expect(limited.body.code).toBe('RATE_LIMITED');
    expect(limited.body.retry_after_ms).toBe(500);
    expect(limited.headers['retry-after']).toBe('1');
    // Another principal has its own bucket; governance has none.
    expect((await read('content-agent-3')).status).toBe(200);
    for (let i = 0; i < 20; i++) expect((await read('governance')).status).toBe(200);
    // Half a second later one more request fits, and only one.
    clock.advance(500);
    expect((await read('seo-agent-7')).status).toBe(200);
    expect((await read('seo-agent-7')).status).toBe(429);
  });

  it('a limited request changes nothing and leaves its caller assertion usable', async () => {
    const clock = new ManualClock(Date.UTC(2026, 5, 1, 12));
    const h = await startHarness({ clock, config: { rateLimit: { perSecond: 1, burst: 1 } } });
    harnesses.push(h);
    const body = { action: 'update_post', resource: 'wp:post:5', environment: 'production', fields: ['title'] };
    expect((await h.call('seo-agent-7', { method: 'POST', url: '/v1/decisions', payload: body })).status).toBe(200);
    const auth = await h.auth('seo-agent-7');
    const before = await durableState(h);
    const lease = await h.app.inject({ method: 'POST', url: '/v1/leases', headers: auth, payload: { decisions: ['x.y.z'], ttl_ms: 5_000 } });
    expect(lease.statusCode).toBe(429);
    expect(lease.json().code).toBe('RATE_LIMITED');
    expect(await durableState(h)).toEqual(before);
    clock.advance(1_000);
    const again = await h.app.inject({ method: 'POST', url: '/v1/decisions', headers: auth, payload: body });
    expect(again.statusCode, again.body).toBe(200); // the same assertion: it was not spent by the refusal
  });

  it('a limited principal is refused before any work on its request (a malformed body is 429, not 400), and a forged token cannot spend another principal\'s requests', async () => {
    const clock = new ManualClock(Date.UTC(2026, 5, 1, 12));
    const h = await startHarness({ clock, config: { rateLimit: { perSecond: 1, burst: 2 } } });
    harnesses.push(h);
    const auth = await h.auth('seo-agent-7');
    const [head, payload] = auth.authorization!.slice('Bearer '.length).split('.');
    const forged = { authorization: `Bearer ${head}.${payload}.${'A'.repeat(86)}` };
    const decide = (headers: Record<string, string>, payload: string) =>
      h.app.inject({ method: 'POST', url: '/v1/decisions', headers: { ...headers, 'content-type': 'application/json' }, payload });
    const body = JSON.stringify({ action: 'update_post', resource: 'wp:post:5', environment: 'production', fields: ['title'] });
    // Forged tokens claiming seo-agent-7 are refused as unauthenticated and take nothing from its bucket.
    for (let i = 0; i < 5; i++) expect((await decide(forged, body)).statusCode).toBe(401);
    expect((await decide(await h.auth('seo-agent-7'), body)).statusCode).toBe(200);
    expect((await decide(await h.auth('seo-agent-7'), body)).statusCode).toBe(200);
    // Now its bucket is empty: refused before the body is parsed or the signature checked.
    const limited = await decide(await h.auth('seo-agent-7'), '{"not json');
    expect(limited.statusCode).toBe(429);
    expect(limited.json().code).toBe('RATE_LIMITED');
    expect(limited.headers['retry-after']).toBe('1');
    expect((await decide(forged, body)).statusCode).toBe(429);
    // Probes are never limited.
    expect((await h.app.inject({ method: 'GET', url: '/healthz', headers: auth })).statusCode).toBe(200);
    clock.advance(1_000);
    expect((await decide(await h.auth('seo-agent-7'), body)).statusCode).toBe(200);
  });

  it('is off by default', async () => {
    const h = await startHarness();
    harnesses.push(h);
    for (let i = 0; i < 30; i++) expect((await h.call('seo-agent-7', { method: 'GET', url: '/v1/principals/seo-agent-7' })).status).toBe(200);
  });
});

describe('bounded in-flight writes (WRIT_MAX_INFLIGHT_WRITES)', () => {
  // An upstream that holds every write until told to hang up.
  let silent: Server;
  const sockets: Socket[] = [];
  let seen = 0;
  afterEach(() => {
    for (const s of sockets) s.destroy();
    silent?.close();
  });

  it('one write past the bound is 503 OVERLOADED with Retry-After and changes nothing; a slot frees when a write ends', async () => {
    silent = createServer((s) => {
      sockets.push(s);
      s.on('data', () => seen++);
    });
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', () => r()));
    const port = (silent.address() as { port: number }).port;
    const h = await startHarness({ config: { maxInflightWrites: 2 }, upstreamRoutes: [{ pattern: 'wp:post:*', url: `http://127.0.0.1:${port}`, timeoutMs: 1_500, environment: 'production' }] });
    harnesses.push(h);
    const write = async (post: number) => {
      const d = await decideOk(h, 'seo-agent-7', { resource: `wp:post:${post}`, fields: ['meta_description'] });
      return () => act(h, 'seo-agent-7', { resource: `wp:post:${post}`, fields: ['meta_description'], payload: { meta_description: 'm' }, expected_version: 0 }, { decision: d.token });
    };
    const [w1, w2, w3, w4] = [await write(1), await write(2), await write(3), await write(4)];
    const hanging = [w1(), w2()];
    for (let i = 0; i < 400 && seen < 2; i++) await new Promise((r) => setTimeout(r, 10));
    expect(seen).toBe(2);

    const before = await durableState(h);
    const refused = await w3();
    expect(refused.status).toBe(503);
    expect(refused.body.code).toBe('OVERLOADED');
    expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(await durableState(h)).toEqual(before); // no receipt, no lease change
    expect(seen).toBe(2);

    for (const s of sockets) s.destroy(); // the upstream hangs up: both writes end (failed, or pending after the timeout)
    const ended = await Promise.all(hanging);
    for (const e of ended) expect(e.status).toBeGreaterThanOrEqual(500);
    const admitted = await w4();
    expect(admitted.body.code).not.toBe('OVERLOADED');
  });
});
