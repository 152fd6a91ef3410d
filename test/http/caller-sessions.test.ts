import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { decideOk } from '../support/agent.js';
import { bearer, clientKeyPair, requestToken, sessionOf, sessionRequest, type ClientSession, type RequestTokenOptions } from '../support/caller-session.js';
import { startHarness, type Harness } from '../support/harness.js';

/**
 * Caller sessions (POST /v1/sessions, tasks/caller-sessions-spec.md): a session opened with an assertion
 * authenticates later requests with an HS256 request token bound to the method and path, each single-use.
 */
let h: Harness;
let clock: ManualClock;
beforeAll(async () => {
  clock = new ManualClock(Date.UTC(2026, 5, 1, 12, 0, 0));
  h = await startHarness({ clock });
});
afterAll(async () => h?.close());

const A = 'seo-agent-7';
const decisionBody = { action: 'update_post', resource: 'wp:post:1', environment: 'production', fields: ['title'] };

async function open(principal = A, ttlMs?: number): Promise<ClientSession> {
  const pair = clientKeyPair();
  const r = await h.call(principal, { method: 'POST', url: '/v1/sessions', payload: sessionRequest(pair.x, ttlMs) });
  expect(r.status, r.raw).toBe(201);
  return sessionOf(r.body, pair);
}

/** A request authenticated by the session (a fresh request token for its method and path). */
function send(session: ClientSession, method: 'GET' | 'POST' | 'DELETE', url: string, payload?: object, o: Partial<RequestTokenOptions> = {}) {
  const token = requestToken(session, { method, path: url.split('?')[0]!, now: clock.now(), ...o });
  return h.app.inject({ method, url, headers: bearer(token), ...(payload === undefined ? {} : { payload }) });
}

describe('a caller session', () => {
  it('is opened with an assertion: 201 with the session token, Writ\'s X25519 key, the principal, the caller key and the expiry', async () => {
    const pair = clientKeyPair();
    const r = await h.call(A, { method: 'POST', url: '/v1/sessions', payload: sessionRequest(pair.x, 60_000) });
    expect(r.status, r.raw).toBe(201);
    expect(r.body).toEqual({
      session: expect.stringMatching(/^ws1\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/),
      public_key: { kty: 'OKP', crv: 'X25519', x: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/) },
      principal: A, kid: 'seo-agent-7-k1', expires_at: new Date(clock.now() + 60_000).toISOString(),
    });
    // Without ttl_ms: the longest (an hour by default).
    const long = await h.call(A, { method: 'POST', url: '/v1/sessions', payload: sessionRequest(clientKeyPair().x) });
    expect(long.body.expires_at).toBe(new Date(clock.now() + 3_600_000).toISOString());
  });

  it('authenticates a decision, a lease acquisition and its release, and a read, each with its own request token', async () => {
    const s = await open();
    const d = await send(s, 'POST', '/v1/decisions', decisionBody);
    expect(d.statusCode, d.body).toBe(200);
    expect(d.json()).toMatchObject({ allow: true, principal: A });
    const lease = await send(s, 'POST', '/v1/leases', { decisions: [d.json().token], ttl_ms: 10_000 });
    expect(lease.statusCode, lease.body).toBe(201);
    expect(lease.json()).toMatchObject({ holder: A, keys: ['wp:post:1#title'] });
    const held = await send(s, 'GET', `/v1/leases?holder=${A}&state=HELD`);
    expect(held.statusCode, held.body).toBe(200);
    expect(held.json().leases.map((l: { key: string }) => l.key)).toEqual(['wp:post:1#title']);
    const released = await send(s, 'DELETE', `/v1/leases/${lease.json().lease_id}`, { token: lease.json().token });
    expect(released.statusCode, released.body).toBe(200);
    expect((await send(s, 'GET', `/v1/leases?holder=${A}&state=HELD`)).json().leases).toEqual([]);
  });

  it('a request token is single-use: the same one again is refused, and spent durably like an assertion\'s jti', async () => {
    const s = await open();
    const token = requestToken(s, { method: 'POST', path: '/v1/decisions', now: clock.now(), jti: 'once-only' });
    expect((await h.app.inject({ method: 'POST', url: '/v1/decisions', headers: bearer(token), payload: decisionBody })).statusCode).toBe(200);
    expect(h.db.prepare('SELECT count(*) AS n FROM seen_ids WHERE id = ?').get(`${A}\u0000once-only`)).toEqual({ n: 1 });
    const again = await h.app.inject({ method: 'POST', url: '/v1/decisions', headers: bearer(token), payload: decisionBody });
    expect(again.statusCode).toBe(401);
    expect(again.json()).toMatchObject({ code: 'UNAUTHENTICATED', detail: expect.stringMatching(/replayed/) });
  });

  it('a lease decision made with a session is the same as one made with an assertion', async () => {
    const s = await open();
    const d = await decideOk(h, A, { resource: 'wp:post:2', fields: ['title'] });
    const lease = await send(s, 'POST', '/v1/leases', { decisions: [d.token], ttl_ms: 10_000 });
    expect(lease.statusCode, lease.body).toBe(201);
    expect((await h.call(A, { method: 'DELETE', url: `/v1/leases/${lease.json().lease_id}`, payload: { token: lease.json().token } })).status).toBe(200);
  });
});
