import { createHmac, randomUUID } from 'node:crypto';
import { SignJWT, importJWK } from 'jose';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { createCallerAssertion, generatePrincipalKeyPair } from '../../src/sdk/index.js';
import { decideOk } from '../support/agent.js';
import { bearer, clientKeyPair, openingClaims, requestToken, sessionOf, sessionRequest, type ClientSession, type RequestTokenOptions, openSession, openSessionWithKey, principalWithSession } from '../support/caller-session.js';
import { VECTOR } from '../support/caller-session-vector.js';
import { fixtureKey, startHarness, type Harness } from '../support/harness.js';
import { closeOpened, listening, rawStream } from '../support/lease-stream.js';

/**
 * Caller sessions (POST /v1/sessions, README "Caller sessions"): a session opened with an assertion
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

const open = (principal = A, ttlMs?: number): Promise<ClientSession> => openSession(h, principal, ttlMs);

/** A request authenticated by the session (a fresh request token for its method and path). */
function send(session: ClientSession, method: 'GET' | 'POST' | 'DELETE', url: string, payload?: object, o: Partial<RequestTokenOptions> = {}) {
  const token = requestToken(session, { method, path: url.split('?')[0]!, now: clock.now(), ...o });
  return h.app.inject({ method, url, headers: bearer(token), ...(payload === undefined ? {} : { payload }) });
}

describe('a caller session', () => {
  it('is opened with an assertion: 201 with the session token, Writ\'s X25519 key, the principal, the caller key and the expiry', async () => {
    const pair = clientKeyPair();
    const r = await h.call(A, { method: 'POST', url: '/v1/sessions', payload: sessionRequest(pair.x, 60_000) }, { claims: openingClaims(pair.x) });
    expect(r.status, r.raw).toBe(201);
    expect(r.body).toEqual({
      session: expect.stringMatching(/^ws1\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/),
      public_key: { kty: 'OKP', crv: 'X25519', x: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/) },
      principal: A, kid: 'seo-agent-7-k1', expires_at: new Date(clock.now() + 60_000).toISOString(),
    });
    // Without ttl_ms: the longest (an hour by default).
    const longX = clientKeyPair().x;
    const long = await h.call(A, { method: 'POST', url: '/v1/sessions', payload: sessionRequest(longX) }, { claims: openingClaims(longX) });
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

  it('governance may open one like any principal, and act over it', async () => {
    const s = await open('governance');
    expect(s.principal).toBe('governance');
    const r = await send(s, 'GET', '/v1/graph');
    expect(r.statusCode, r.body).toBe(200);
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

/** How many times `principal`'s jti was spent (0 or 1). */
const spent = (principal: string, jti: string) => (h.db.prepare('SELECT count(*) AS n FROM seen_ids WHERE id = ?').get(`${principal}\u0000${jti}`) as { n: number }).n;
const heldBy = async (principal: string) => (await h.call('governance', { method: 'GET', url: `/v1/leases?holder=${principal}&state=HELD` })).body.leases;

function refused(r: LightMyRequestResponse, status: number, code: string, detail?: RegExp) {
  expect(r.statusCode, r.body).toBe(status);
  expect(r.json().code, r.body).toBe(code);
  if (detail) expect(r.json().detail).toMatch(detail);
}

/**
 * A lease acquisition with `authorization`, made with a good decision: refused with `status`/`code`,
 * taking no lease and spending no jti (`jti`: the one the token carries).
 */
async function leaseRefused(authorization: string, jti: string, status: number, code: string, detail?: RegExp) {
  const d = await decideOk(h, A, { resource: 'wp:post:77', fields: ['title'] });
  const r = await h.app.inject({ method: 'POST', url: '/v1/leases', headers: { authorization }, payload: { decisions: [d.token], ttl_ms: 10_000 } });
  refused(r, status, code, detail);
  expect(await heldBy(A)).toEqual([]);
  expect(spent(A, jti)).toBe(0);
}

const encode = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
const leaseToken = (s: ClientSession, o: Partial<RequestTokenOptions> = {}) => requestToken(s, { method: 'POST', path: '/v1/leases', now: clock.now(), ...o });

describe('a request token that is not exactly what its session allows is refused, and changes nothing', () => {
  it('a MAC tampered with, or a payload edited under the MAC', async () => {
    const s = await open();
    const token = leaseToken(s, { jti: 'tampered' });
    const [head, body, mac] = token.split('.') as [string, string, string];
    const flipped = Buffer.from(mac, 'base64url');
    flipped[0]! ^= 1;
    await leaseRefused(`Bearer ${head}.${body}.${flipped.toString('base64url')}`, 'tampered', 401, 'UNAUTHENTICATED', /MAC/);
    const payload = JSON.parse(Buffer.from(body, 'base64url').toString()) as Record<string, unknown>;
    await leaseRefused(`Bearer ${head}.${encode({ ...payload, exp: (payload.exp as number) + 60 })}.${mac}`, 'tampered', 401, 'UNAUTHENTICATED', /MAC/);
    await leaseRefused(`Bearer ${head}.${encode({ ...payload, iss: 'content-agent-3', sub: 'content-agent-3' })}.${mac}`, 'tampered', 401, 'UNAUTHENTICATED', /MAC/);
  });

  it('a token MACed with one session\'s key naming another session (its kid), even of the same principal', async () => {
    const one = await open();
    const two = await open();
    await leaseRefused(`Bearer ${leaseToken({ ...one, token: two.token }, { jti: 'crossed' })}`, 'crossed', 401, 'UNAUTHENTICATED', /MAC/);
  });

  it('the session token altered (its sealed body, its signing kid) is CALLER_SESSION_INVALID', async () => {
    const s = await open();
    const [, kid, sealed] = s.token.split('.') as [string, string, string];
    const bytes = Buffer.from(sealed, 'base64url');
    bytes[20]! ^= 1;
    await leaseRefused(`Bearer ${leaseToken({ ...s, token: `ws1.${kid}.${bytes.toString('base64url')}` }, { jti: 'altered' })}`, 'altered', 401, 'CALLER_SESSION_INVALID', /open a new session/);
    await leaseRefused(`Bearer ${leaseToken({ ...s, token: `ws1.not-a-kid-of-ours.${sealed}` }, { jti: 'altered' })}`, 'altered', 401, 'CALLER_SESSION_INVALID');
    await leaseRefused(`Bearer ${leaseToken({ ...s, token: 'ws1.garbage' }, { jti: 'altered' })}`, 'altered', 401, 'CALLER_SESSION_INVALID');
  });

  it('no algorithm confusion: HS256 is never checked against a registered key, EdDSA never against a session\'s key', async () => {
    const s = await open();
    const jwk = fixtureKey(A);
    // HS256 keyed with the caller's registered public key (what an attacker knows), under its kid.
    const publicBytes = Buffer.from(jwk.x!, 'base64url');
    const hs = (kid: string, key: Buffer, jti: string) => {
      const input = `${encode({ alg: 'HS256', kid })}.${encode({ iss: A, sub: A, aud: 'writ', iat: Math.floor(clock.now() / 1000), exp: Math.floor(clock.now() / 1000) + 60, jti, htm: 'POST', htu: '/v1/leases' })}`;
      return `Bearer ${input}.${createHmac('sha256', key).update(input).digest('base64url')}`;
    };
    await leaseRefused(hs(jwk.kid!, publicBytes, 'confused-1'), 'confused-1', 401, 'UNAUTHENTICATED', /HS256 is only for caller sessions/);
    await leaseRefused(hs(jwk.x!, publicBytes, 'confused-2'), 'confused-2', 401, 'UNAUTHENTICATED', /HS256 is only for caller sessions/);
    await leaseRefused(hs(s.token, publicBytes, 'confused-3'), 'confused-3', 401, 'UNAUTHENTICATED', /MAC/);
    // EdDSA (signed by the principal's own key) naming the session as its kid: an unknown kid.
    const signed = await new SignJWT({ htm: 'POST', htu: '/v1/leases' }).setProtectedHeader({ alg: 'EdDSA', kid: s.token }).setIssuer(A).setSubject(A).setAudience('writ')
      .setIssuedAt(Math.floor(clock.now() / 1000)).setExpirationTime(Math.floor(clock.now() / 1000) + 60).setJti('confused-4').sign(await importJWK(jwk, 'EdDSA'));
    await leaseRefused(`Bearer ${signed}`, 'confused-4', 401, 'UNAUTHENTICATED', /no key with kid ws1\./);
    // EdDSA whose "signature" is the session's MAC.
    const [head, body] = leaseToken(s, { jti: 'confused-5', header: { alg: 'EdDSA' } }).split('.') as [string, string];
    await leaseRefused(`Bearer ${head}.${body}.${createHmac('sha256', s.k).update(`${head}.${body}`).digest('base64url')}`, 'confused-5', 401, 'UNAUTHENTICATED', /no key with kid/);
    // An approval (an assertion only) cannot be an HS256 token at all.
    const approve = { principal: A, action: decisionBody.action, resource: decisionBody.resource, environment: decisionBody.environment, fields: decisionBody.fields };
    const approval = requestToken(s, { method: 'POST', path: '/v1/decisions', now: clock.now(), audience: 'writ:approval', claims: { approve } });
    const r = await send(s, 'POST', '/v1/decisions', { ...decisionBody, context: { approval } });
    refused(r, 422, 'UNPROCESSABLE', /approval is not valid: assertion algorithm "HS256" is not allowed/);
  });

  it('a token bound to another method or path (htm, htu), or without them', async () => {
    const s = await open();
    await leaseRefused(`Bearer ${leaseToken(s, { jti: 'htm', method: 'GET' })}`, 'htm', 401, 'UNAUTHENTICATED', /htm/);
    await leaseRefused(`Bearer ${leaseToken(s, { jti: 'htm', method: 'post' })}`, 'htm', 401, 'UNAUTHENTICATED', /htm/);
    await leaseRefused(`Bearer ${leaseToken(s, { jti: 'htu', path: '/v1/decisions' })}`, 'htu', 401, 'UNAUTHENTICATED', /htu/);
    await leaseRefused(`Bearer ${leaseToken(s, { jti: 'htu', path: '/v1/leases?x=1' })}`, 'htu', 401, 'UNAUTHENTICATED', /htu/);
    await leaseRefused(`Bearer ${leaseToken(s, { jti: 'htu', path: '/v1/leases/' })}`, 'htu', 401, 'UNAUTHENTICATED', /htu/);
    await leaseRefused(`Bearer ${leaseToken(s, { jti: 'htx', claims: { htm: undefined } })}`, 'htx', 401, 'UNAUTHENTICATED', /htm is missing/);
    await leaseRefused(`Bearer ${leaseToken(s, { jti: 'htx', claims: { htu: undefined } })}`, 'htx', 401, 'UNAUTHENTICATED', /htu is missing/);
    // The query is not part of htu: a read with one is accepted.
    expect((await send(s, 'GET', `/v1/leases?holder=${A}`)).statusCode).toBe(200);
  });

  it('the assertion\'s claim checks: audience, lifetime, expiry, iss/sub of another principal', async () => {
    const s = await open();
    await leaseRefused(`Bearer ${leaseToken(s, { jti: 'c1', audience: 'other' })}`, 'c1', 401, 'UNAUTHENTICATED', /audience/);
    await leaseRefused(`Bearer ${leaseToken(s, { jti: 'c2', ttlSeconds: 3600 })}`, 'c2', 401, 'UNAUTHENTICATED', /lifetime/);
    await leaseRefused(`Bearer ${leaseToken(s, { jti: 'c3', now: clock.now() - 120_000 })}`, 'c3', 401, 'UNAUTHENTICATED', /expired/);
    await leaseRefused(`Bearer ${leaseToken(s, { jti: 'c4', claims: { iss: 'content-agent-3', sub: 'content-agent-3' } })}`, 'c4', 401, 'UNAUTHENTICATED', /iss and sub/);
    await leaseRefused(`Bearer ${leaseToken(s, { jti: 'c5', claims: { jti: undefined } })}`, 'c5', 401, 'UNAUTHENTICATED', /jti is missing/);
  });

  it('a jti is single-use across the two schemes: spent by an assertion, refused in a request token, and the reverse', async () => {
    const s = await open();
    const assertion = await createCallerAssertion({ principal: A, privateJwk: fixtureKey(A), now: clock.now(), jti: 'shared-1' });
    expect((await h.app.inject({ method: 'POST', url: '/v1/decisions', headers: bearer(assertion), payload: decisionBody })).statusCode).toBe(200);
    refused(await send(s, 'POST', '/v1/decisions', decisionBody, { jti: 'shared-1' }), 401, 'UNAUTHENTICATED', /replayed/);
    expect((await send(s, 'POST', '/v1/decisions', decisionBody, { jti: 'shared-2' })).statusCode).toBe(200);
    const again = await createCallerAssertion({ principal: A, privateJwk: fixtureKey(A), now: clock.now(), jti: 'shared-2' });
    refused(await h.app.inject({ method: 'POST', url: '/v1/decisions', headers: bearer(again), payload: decisionBody }), 401, 'UNAUTHENTICATED', /replayed/);
  });

  it('a session cannot open another session', async () => {
    const s = await open();
    const r = await send(s, 'POST', '/v1/sessions', sessionRequest(clientKeyPair().x), { jti: 'no-extension' });
    refused(r, 401, 'UNAUTHENTICATED', /a caller session cannot open another session/);
    expect(spent(A, 'no-extension')).toBe(0);
  });

  it('a session from another deployment (other keys) is CALLER_SESSION_INVALID', async () => {
    const other = await startHarness({ clock });
    try {
      const pair = clientKeyPair();
      const r = await other.call(A, { method: 'POST', url: '/v1/sessions', payload: sessionRequest(pair.x) }, { claims: openingClaims(pair.x) });
      expect(r.status).toBe(201);
      const foreign = sessionOf(r.body, pair);
      await leaseRefused(`Bearer ${leaseToken(foreign, { jti: 'foreign' })}`, 'foreign', 401, 'CALLER_SESSION_INVALID', /no longer has|not sealed by this deployment/);
    } finally {
      await other.close();
    }
  });
});

describe('opening a session: bad input is refused, and spends nothing', () => {
  async function openRefused(payload: { public_key?: { x?: string; [member: string]: unknown }; [member: string]: unknown }, status: number, code: string, detail?: RegExp) {
    const jti = randomUUID();
    // Bound to the body's key (as a client does), so that the refusal is the body's.
    const claims = openingClaims(payload.public_key?.x ?? clientKeyPair().x);
    const assertion = await createCallerAssertion({ principal: A, privateJwk: fixtureKey(A), now: clock.now(), jti, claims });
    const r = await h.app.inject({ method: 'POST', url: '/v1/sessions', headers: bearer(assertion), payload });
    refused(r, status, code, detail);
    expect(spent(A, jti)).toBe(0);
    // Nothing was spent: the same assertion is still good for a request (bound to the refused key, it can open no other session).
    const ok = await h.app.inject({ method: 'GET', url: '/v1/leases', headers: bearer(assertion) });
    expect(ok.statusCode, ok.body).toBe(200);
    expect(spent(A, jti)).toBe(1);
  }
  const key = (x: string) => ({ public_key: { kty: 'OKP', crv: 'X25519', x } });

  it('the README\'s opening claims (test vector), made fresh, open a session with the vector\'s client key, and no other', async () => {
    const { cnf, htm, htu } = JSON.parse(VECTOR.OPENING_CLAIMS) as Record<string, unknown>;
    const sign = () => createCallerAssertion({ principal: A, privateJwk: fixtureKey(A), now: clock.now(), claims: { cnf, htm, htu } });
    const opened = await h.app.inject({ method: 'POST', url: '/v1/sessions', headers: bearer(await sign()), payload: sessionRequest(VECTOR.CLIENT_X) });
    expect(opened.statusCode, opened.body).toBe(201);
    refused(await h.app.inject({ method: 'POST', url: '/v1/sessions', headers: bearer(await sign()), payload: sessionRequest(clientKeyPair().x) }), 401, 'UNAUTHENTICATED', /cnf\.jwk/);
  });

  it('a public key of the wrong length, not base64url, or of another type', async () => {
    await openRefused(key(Buffer.alloc(31, 9).toString('base64url')), 400, 'MALFORMED_REQUEST');
    await openRefused(key(Buffer.alloc(33, 9).toString('base64url')), 400, 'MALFORMED_REQUEST');
    await openRefused(key('+'.repeat(43)), 400, 'MALFORMED_REQUEST');
    // 43 characters whose last one carries bits past the 32 bytes: not canonical.
    await openRefused(key(`${Buffer.alloc(32, 9).toString('base64url').slice(0, 42)}B`), 400, 'MALFORMED_REQUEST', /canonical/);
    await openRefused({ public_key: { kty: 'OKP', crv: 'Ed25519', x: clientKeyPair().x } }, 400, 'MALFORMED_REQUEST');
    await openRefused({ public_key: { kty: 'OKP', crv: 'X25519', x: clientKeyPair().x, d: 'AAAA' } }, 400, 'MALFORMED_REQUEST');
    await openRefused({ ...key(clientKeyPair().x), extra: 1 }, 400, 'MALFORMED_REQUEST');
  });

  it('an all-zero or other low-order point (the shared secret would be zeros)', async () => {
    await openRefused(key(Buffer.alloc(32).toString('base64url')), 422, 'UNPROCESSABLE', /low-order/);
    const one = Buffer.alloc(32);
    one[0] = 1;
    await openRefused(key(one.toString('base64url')), 422, 'UNPROCESSABLE', /low-order/);
    // 325606250916557431795983626356110631294008115727848805560023387167927233504 (order 8)
    const order8 = Buffer.from('e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800', 'hex');
    await openRefused(key(order8.toString('base64url')), 422, 'UNPROCESSABLE', /low-order/);
  });

  it('ttl_ms out of range', async () => {
    await openRefused({ ...key(clientKeyPair().x), ttl_ms: 999 }, 400, 'MALFORMED_REQUEST');
    await openRefused({ ...key(clientKeyPair().x), ttl_ms: 3_600_001 }, 400, 'MALFORMED_REQUEST', /ttl_ms/);
    await openRefused({ ...key(clientKeyPair().x), ttl_ms: 1.5e3 + 0.5 }, 400, 'MALFORMED_REQUEST');
  });
});

describe('what ends a session', () => {
  it('its expiry (by Writ\'s clock)', async () => {
    const s = await open(A, 5_000);
    clock.advance(5_000);
    await leaseRefused(`Bearer ${leaseToken(s, { jti: 'late' })}`, 'late', 401, 'CALLER_SESSION_INVALID', /expired.*: open a new session with a caller assertion/);
  });

  const newPrincipal = (id: string) => principalWithSession(h, id);
  const read = (s: ClientSession) => send(s, 'GET', '/v1/leases');

  it('its principal revoked: UNAUTHENTICATED at once', async () => {
    const { session } = await newPrincipal('session-revoked');
    expect((await read(session)).statusCode).toBe(200);
    expect((await h.call('governance', { method: 'DELETE', url: '/v1/principals/session-revoked', payload: { reason: 'test' } })).status).toBe(200);
    refused(await read(session), 401, 'UNAUTHENTICATED', /revoked/);
  });

  it('its key rotated (the same kid with other material) or removed: CALLER_SESSION_INVALID, and the new key opens a new one', async () => {
    const { session } = await newPrincipal('session-rotated');
    expect((await read(session)).statusCode).toBe(200);
    const next = await generatePrincipalKeyPair('session-rotated-k1');
    const r = await h.call('governance', { method: 'POST', url: '/v1/principals', payload: { id: 'session-rotated', kind: 'agent', keys: [next.publicJwk] } });
    expect(r.status, r.raw).toBe(200);
    refused(await read(session), 401, 'CALLER_SESSION_INVALID', /no longer has the key session-rotated-k1 .*: open a new session with a caller assertion/);
    expect((await read(await openSessionWithKey(h, 'session-rotated', next.privateJwk))).statusCode).toBe(200);
  });

  it('a key replaced and then registered again with the same material: its sessions come back (a key is its material, not its registration)', async () => {
    const { pair, session } = await newPrincipal('session-readded');
    const other = await generatePrincipalKeyPair('session-readded-k2');
    const register = async (key: object) => expect((await h.call('governance', { method: 'POST', url: '/v1/principals', payload: { id: 'session-readded', kind: 'agent', keys: [key] } })).status).toBe(200);
    await register(other.publicJwk);
    refused(await read(session), 401, 'CALLER_SESSION_INVALID', /no longer has the key session-readded-k1/);
    await register(pair.publicJwk);
    expect((await read(session)).statusCode).toBe(200);
  });

  it('the signing key that sealed it rotated: it goes on while the old key is published, and ends once the key leaves the ring', async () => {
    const s = await open();
    expect((await read(s)).statusCode).toBe(200);
    await h.ctx.keys.rotate();
    expect((await read(s)).statusCode).toBe(200);
    const fresh = await open();
    expect(fresh.token.split('.')[1]).toBe(h.ctx.keys.current().kid);
    clock.advance(h.ctx.keys.retiredKeyPublishedMs + 1);
    refused(await read(s), 401, 'CALLER_SESSION_INVALID', /no longer has/);
    expect((await read(fresh)).statusCode).toBe(200);
  });
});

describe('sessions turned off (WRIT_CALLER_SESSION_MAX_TTL_MS=0)', () => {
  it('opening one and a request token are CALLER_SESSIONS_DISABLED (403), spending nothing', async () => {
    const s = await open();
    const off = await startHarness({ clock, config: { callerSessionMaxTtlMs: 0 } });
    try {
      const jti = randomUUID();
      const x = clientKeyPair().x;
      const assertion = await createCallerAssertion({ principal: A, privateJwk: fixtureKey(A), now: clock.now(), jti, claims: openingClaims(x) });
      const opening = await off.app.inject({ method: 'POST', url: '/v1/sessions', headers: bearer(assertion), payload: sessionRequest(x) });
      refused(opening, 403, 'CALLER_SESSIONS_DISABLED', /WRIT_CALLER_SESSION_MAX_TTL_MS=0/);
      expect(off.db.prepare('SELECT count(*) AS n FROM seen_ids WHERE id = ?').get(`${A}\u0000${jti}`)).toEqual({ n: 0 });
      const token = requestToken(s, { method: 'GET', path: '/v1/leases', now: clock.now() });
      const request = await off.app.inject({ method: 'GET', url: '/v1/leases', headers: bearer(token) });
      refused(request, 403, 'CALLER_SESSIONS_DISABLED');
      // The same words both ways (one place writes them).
      expect(request.json().detail).toBe(opening.json().detail);
      // Assertions work as ever.
      expect((await off.app.inject({ method: 'GET', url: '/v1/leases', headers: bearer(assertion) })).statusCode).toBe(200);
    } finally {
      await off.close();
    }
  });
});

describe('the lease stream opened with a caller session', () => {
  it('is authenticated once: it outlives the session, and ends when its principal is revoked', async () => {
    const { h: live, url } = await listening({ clock: new ManualClock(Date.UTC(2026, 5, 1, 12, 0, 0)) });
    try {
      const s = await openSession(live, A, 1_000);
      const raw = await rawStream(url, bearer(requestToken(s, { method: 'GET', path: '/v1/leases/stream', now: live.clock.now() })));
      (live.clock as ManualClock).advance(5_000);
      // The session is over for requests...
      const late = await live.app.inject({ method: 'GET', url: '/v1/leases', headers: bearer(requestToken(s, { method: 'GET', path: '/v1/leases', now: live.clock.now() })) });
      expect(late.json().code, late.body).toBe('CALLER_SESSION_INVALID');
      // ...not for the stream it opened.
      const d = await decideOk(live, A, { resource: 'wp:post:6', fields: ['title'] });
      raw.send({ id: 1, op: 'acquire', decisions: [d.token], ttl_ms: 10_000 });
      expect(await raw.next()).toMatchObject({ id: 1, ok: true, result: { holder: A } });
      expect((await live.call('governance', { method: 'DELETE', url: `/v1/principals/${A}`, payload: { reason: 'test' } })).status).toBe(200);
      raw.send({ id: 2, op: 'acquire', decisions: [d.token], ttl_ms: 10_000 });
      expect(await raw.next()).toMatchObject({ id: 2, ok: false, problem: { code: 'UNAUTHENTICATED' } });
    } finally {
      await closeOpened();
    }
  });


  it('its upgrade takes a request token for GET /v1/leases/stream (and no other)', async () => {
    const { h: live, url } = await listening();
    try {
      const pair = clientKeyPair();
      const r = await live.call(A, { method: 'POST', url: '/v1/sessions', payload: sessionRequest(pair.x) }, { claims: openingClaims(pair.x) });
      const s = sessionOf(r.body, pair);
      const wrong = requestToken(s, { method: 'GET', path: '/v1/leases', now: live.clock.now() });
      await expect(rawStream(url, bearer(wrong))).rejects.toThrow(/401/);
      const raw = await rawStream(url, bearer(requestToken(s, { method: 'GET', path: '/v1/leases/stream', now: live.clock.now() })));
      const d = await decideOk(live, A, { resource: 'wp:post:5', fields: ['title'] });
      raw.send({ id: 1, op: 'acquire', decisions: [d.token], ttl_ms: 10_000 });
      const grant = await raw.next();
      expect(grant, JSON.stringify(grant)).toMatchObject({ id: 1, ok: true, result: { holder: A } });
      raw.send({ id: 2, op: 'release', lease_id: grant.result.lease_id, token: grant.result.token });
      expect(await raw.next()).toMatchObject({ id: 2, ok: true });
    } finally {
      await closeOpened();
    }
  });
});
