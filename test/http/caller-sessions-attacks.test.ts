import { randomUUID } from 'node:crypto';
import { rmSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { callerSessionsOf } from '../../src/decision/index.js';
import { buildApp } from '../../src/http/index.js';
import { openWrit } from '../../src/service/index.js';
import { openSqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { createCallerAssertion, generatePrincipalKeyPair } from '../../src/sdk/index.js';
import { bearer, clientKeyPair, openingClaims, requestToken, sessionOf, sessionRequest, type ClientSession, type RequestTokenOptions, openSession, principalWithSession } from '../support/caller-session.js';
import { fixtureKey, startHarness, type Harness } from '../support/harness.js';
import { closeOpened, listening } from '../support/lease-stream.js';

/**
 * Caller sessions tried as an attacker would (README "Caller sessions"): what a party without K, or
 * with K and a token for one request, can and cannot get out of Writ.
 */
let h: Harness;
let clock: ManualClock;
beforeAll(async () => {
  clock = new ManualClock(Date.UTC(2026, 5, 1, 12, 0, 0));
  h = await startHarness({ clock });
});
afterAll(async () => h?.close());

const A = 'seo-agent-7';

const open = (principal = A, ttlMs?: number): Promise<ClientSession> => openSession(h, principal, ttlMs);

/** How many times `principal`'s jti was spent (0 or 1). */
const spent = (principal: string, jti: string) => (h.db.prepare('SELECT count(*) AS n FROM seen_ids WHERE id = ?').get(`${principal}\u0000${jti}`) as { n: number }).n;

function refused(r: LightMyRequestResponse, status: number, code: string, detail?: RegExp) {
  expect(r.statusCode, r.body).toBe(status);
  expect(r.json().code, r.body).toBe(code);
  if (detail) expect(r.json().detail).toMatch(detail);
}

const token = (s: ClientSession, o: Partial<RequestTokenOptions> & Pick<RequestTokenOptions, 'method' | 'path'>) => requestToken(s, { now: clock.now(), ...o });
const inject = (method: 'GET' | 'POST' | 'DELETE', url: string, t: string, payload?: object) =>
  h.app.inject({ method, url, headers: bearer(t), ...(payload === undefined ? {} : { payload }) });

const newPrincipal = (id: string) => principalWithSession(h, id);

describe('without K, the session token alone tells nothing about the principal', () => {
  it('a revoked principal\'s session, or one whose key was removed, with a MAC not made with K: the MAC refusal, not the principal\'s state', async () => {
    const revoked = await newPrincipal('attack-revoked');
    const rotated = await newPrincipal('attack-rotated');
    expect((await h.call('governance', { method: 'DELETE', url: '/v1/principals/attack-revoked', payload: { reason: 'test' } })).status).toBe(200);
    const next = await generatePrincipalKeyPair('attack-rotated-k2');
    expect((await h.call('governance', { method: 'POST', url: '/v1/principals', payload: { id: 'attack-rotated', kind: 'agent', keys: [next.publicJwk] } })).status).toBe(200);
    const forged = (s: ClientSession) => token(s, { method: 'GET', path: '/v1/leases', macKey: Buffer.alloc(32, 7) });
    refused(await inject('GET', '/v1/leases', forged(revoked.session)), 401, 'UNAUTHENTICATED', /MAC/);
    refused(await inject('GET', '/v1/leases', forged(rotated.session)), 401, 'UNAUTHENTICATED', /MAC/);
    // With K, the holder is told what ended its session.
    refused(await inject('GET', '/v1/leases', token(revoked.session, { method: 'GET', path: '/v1/leases' })), 401, 'UNAUTHENTICATED', /revoked/);
    refused(await inject('GET', '/v1/leases', token(rotated.session, { method: 'GET', path: '/v1/leases' })), 401, 'CALLER_SESSION_INVALID', /no longer has the key/);
  });
});

describe('a request token cannot be moved to another request', () => {
  it('the raw path is what is bound: over a socket, other spellings of the route, HEAD for GET, an absolute URL, another lease', async () => {
    const { h: live, url } = await listening();
    try {
      const pair = clientKeyPair();
      const opened = await live.call(A, { method: 'POST', url: '/v1/sessions', payload: sessionRequest(pair.x) }, { claims: openingClaims(pair.x) });
      const s = sessionOf(opened.body, pair);
      const { port } = new URL(url);
      /** The request line exactly as given (http.request does not normalize its path). */
      const raw = (method: string, path: string, t: string, body?: object) => new Promise<{ status: number; body: string }>((resolve, reject) => {
        const data = body === undefined ? undefined : JSON.stringify(body);
        const req = httpRequest({ host: '127.0.0.1', port, method, path, agent: false, headers: { ...bearer(t), ...(data ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) } : {}) } }, (res) => {
          let text = '';
          res.on('data', (c: Buffer) => (text += c.toString()));
          res.on('end', () => resolve({ status: res.statusCode!, body: text }));
        });
        req.on('error', reject);
        req.end(data);
      });
      const get = (jti: string) => requestToken(s, { method: 'GET', path: '/v1/leases', now: live.clock.now(), jti });
      expect((await raw('GET', `/v1/leases?holder=${A}`, get('q-ok'))).status).toBe(200);
      const spellings = ['//v1/leases', '/v1/leases/', '/v1/./leases', '/v1/x/../leases', '/v1/%6Ceases', '/V1/LEASES', '/v1/leases;x', '/v1/leases#x', 'http://evil.example/v1/leases', `${url}/v1/leases`];
      for (const [i, path] of spellings.entries()) {
        const r = await raw('GET', path, get(`spelling-${i}`));
        expect([400, 401, 404], `${path}: ${r.status} ${r.body}`).toContain(r.status);
        if (r.status === 401) expect(JSON.parse(r.body).detail, path).toMatch(/htu/);
      }
      const head = await raw('HEAD', '/v1/leases', get('head'));
      expect(head.status).toBe(401);
      // A token for one lease's release is not one for another's, nor for its renewal.
      const del = requestToken(s, { method: 'DELETE', path: '/v1/leases/lease_a', now: live.clock.now(), jti: 'del-a' });
      const other = await raw('DELETE', '/v1/leases/lease_b', del, { token: 'x' });
      expect(other.status, other.body).toBe(401);
      expect(JSON.parse(other.body).detail).toMatch(/htu/);
      const renew = await raw('POST', '/v1/leases/lease_a/renew', del, { token: 'x', ttl_ms: 10_000 });
      expect(renew.status, renew.body).toBe(401);
      expect(JSON.parse(renew.body).detail).toMatch(/htm|htu/);
    } finally {
      await closeOpened();
    }
  });

  it('a token whose exp is after its session\'s end is refused from the session\'s end', async () => {
    const s = await open(A, 5_000);
    const t = token(s, { method: 'GET', path: '/v1/leases', ttlSeconds: 60, jti: 'outlives' });
    clock.advance(5_000);
    refused(await inject('GET', '/v1/leases', t), 401, 'CALLER_SESSION_INVALID', /expired/);
    expect(spent(A, 'outlives')).toBe(0);
  });

  it('iat far in the future, and header games: alg none, lower-case hs256, HS512, crit', async () => {
    const s = await open();
    const get = (o: Partial<RequestTokenOptions>) => inject('GET', '/v1/leases', token(s, { method: 'GET', path: '/v1/leases', ...o }));
    refused(await get({ now: clock.now() + 3_600_000 }), 401, 'UNAUTHENTICATED', /future|lifetime/);
    refused(await get({ header: { alg: 'none' } }), 401, 'UNAUTHENTICATED', /not allowed/);
    refused(await get({ header: { alg: 'hs256' } }), 401, 'UNAUTHENTICATED', /not allowed/);
    refused(await get({ header: { alg: 'HS512' } }), 401, 'UNAUTHENTICATED', /not allowed/);
    refused(await get({ header: { crit: ['exp'] } }), 401, 'UNAUTHENTICATED', /malformed/);
    refused(await get({ header: { alg: 'RS256' } }), 401, 'UNAUTHENTICATED', /not allowed/);
    refused(await get({ header: { alg: 'ES256' } }), 401, 'UNAUTHENTICATED', /no key with kid/);
    // jku / x5u are never fetched: the key is K (the MAC still has to be K's).
    expect((await get({ header: { jku: 'https://evil.example/jwks', x5u: 'https://evil.example/c' } })).statusCode).toBe(200);
    refused(await get({ header: { jku: 'https://evil.example/jwks' }, macKey: Buffer.alloc(32) }), 401, 'UNAUTHENTICATED', /MAC/);
  });
});

describe('a request token replayed after a restart', () => {
  it('is refused by the restarted process (the spend is in the store, not only in memory); the session itself still opens', async () => {
    const first = await startHarness({ clock });
    const pair = clientKeyPair();
    const opened = await first.call(A, { method: 'POST', url: '/v1/sessions', payload: sessionRequest(pair.x) }, { claims: openingClaims(pair.x) });
    const s = sessionOf(opened.body, pair);
    const t = token(s, { method: 'GET', path: '/v1/leases', jti: 'before-restart' });
    expect((await first.app.inject({ method: 'GET', url: '/v1/leases', headers: bearer(t) })).statusCode).toBe(200);
    expect(first.db.prepare('SELECT count(*) AS n FROM seen_ids WHERE id = ?').get(`${A}\u0000before-restart`)).toEqual({ n: 1 });
    await first.app.close();
    await first.writ.close();
    const writ = await openWrit(first.config, { clock, store: await openSqliteStore(first.config.dbFile) });
    const app = await buildApp(writ.ctx);
    try {
      refused(await app.inject({ method: 'GET', url: '/v1/leases', headers: bearer(t) }), 401, 'UNAUTHENTICATED', /replayed/);
      expect((await app.inject({ method: 'GET', url: '/v1/leases', headers: bearer(token(s, { method: 'GET', path: '/v1/leases' })) })).statusCode).toBe(200);
    } finally {
      await app.close();
      await writ.close();
      rmSync(first.dataDir, { recursive: true, force: true });
    }
  });
});

describe('WRIT_CALLER_SESSION_MAX_TTL_MS lowered (after a restart)', () => {
  it('bounds the sessions opened before it: one opened for an hour ends that long after it was opened', async () => {
    const first = await startHarness({ clock });
    const pair = clientKeyPair();
    const opened = await first.call(A, { method: 'POST', url: '/v1/sessions', payload: sessionRequest(pair.x, 3_600_000) }, { claims: openingClaims(pair.x) });
    expect(opened.status, opened.raw).toBe(201);
    const s = sessionOf(opened.body, pair);
    await first.app.close();
    await first.writ.close();
    const writ = await openWrit({ ...first.config, callerSessionMaxTtlMs: 60_000 }, { clock, store: await openSqliteStore(first.config.dbFile) });
    const app = await buildApp(writ.ctx);
    const read = () => app.inject({ method: 'GET', url: '/v1/leases', headers: bearer(token(s, { method: 'GET', path: '/v1/leases' })) });
    try {
      clock.advance(59_000);
      expect((await read()).statusCode).toBe(200);
      clock.advance(1_000);
      refused(await read(), 401, 'CALLER_SESSION_INVALID', /WRIT_CALLER_SESSION_MAX_TTL_MS/);
    } finally {
      await app.close();
      await writ.close();
      rmSync(first.dataDir, { recursive: true, force: true });
    }
  });
});

describe('the session token as an attacker would make it', () => {
  it('junk, truncated, re-encoded or very long session tokens are CALLER_SESSION_INVALID and never enter the unseal cache', async () => {
    const s = await open();
    const cache = (callerSessionsOf(h.ctx.keys) as unknown as { cache: { size: number } }).cache;
    const before = cache.size;
    const [, kid, sealed] = s.token.split('.') as [string, string, string];
    const variants = [
      `ws1.${kid}.${sealed.slice(0, -1)}`, `ws1.${kid}.${sealed.slice(0, 20)}`, `ws1.${kid}.${sealed}=`, `ws1.${kid}.${sealed}.x`,
      `ws1.${kid}.${Buffer.from(sealed, 'base64url').toString('base64')}`, `WS1.${kid}.${sealed}`, `ws1..${sealed}`,
      `ws1.${kid}.${'A'.repeat(8_000)}`, `ws1.${'k'.repeat(6_000)}.${sealed}`, `ws1.__proto__.${sealed}`, `ws1.constructor.${sealed}`,
    ];
    for (const kidToken of variants) {
      const r = await inject('GET', '/v1/leases', token({ ...s, token: kidToken }, { method: 'GET', path: '/v1/leases' }));
      expect([401], `${kidToken.slice(0, 60)}: ${r.body}`).toContain(r.statusCode);
      expect(['CALLER_SESSION_INVALID', 'UNAUTHENTICATED']).toContain(r.json().code);
    }
    expect(cache.size).toBe(before);
  });
});

describe('opening a session with junk', () => {
  async function openRefused(payload: unknown, status: number, code: string) {
    const jti = randomUUID();
    // Bound to the body's key where it names one, so that the body's own refusal is what is seen.
    const x = (payload as { public_key?: { x?: unknown } } | null)?.public_key?.x;
    const claims = openingClaims(typeof x === 'string' ? x : clientKeyPair().x);
    const assertion = await createCallerAssertion({ principal: A, privateJwk: fixtureKey(A), now: clock.now(), jti, claims });
    const r = await h.app.inject({ method: 'POST', url: '/v1/sessions', headers: { ...bearer(assertion), 'content-type': 'application/json' }, payload: JSON.stringify(payload) });
    refused(r, status, code);
    expect(spent(A, jti)).toBe(0);
  }
  const key = (x: string) => ({ public_key: { kty: 'OKP', crv: 'X25519', x } });
  const le = (hex: string) => Buffer.from(hex, 'hex').toString('base64url');

  it('an opening assertion is single-use: replayed, it opens nothing (the first session stands)', async () => {
    const jti = randomUUID();
    const x = clientKeyPair().x;
    const assertion = await createCallerAssertion({ principal: A, privateJwk: fixtureKey(A), now: clock.now(), jti, claims: openingClaims(x) });
    const first = await h.app.inject({ method: 'POST', url: '/v1/sessions', headers: bearer(assertion), payload: sessionRequest(x) });
    expect(first.statusCode, first.body).toBe(201);
    refused(await h.app.inject({ method: 'POST', url: '/v1/sessions', headers: bearer(assertion), payload: sessionRequest(x) }), 401, 'UNAUTHENTICATED', /replayed/);
    expect(spent(A, jti)).toBe(1);
  });

  it('non-canonical encodings of low-order points (u = p, p + 1, the top bit set) are refused as low-order', async () => {
    const p = 'edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f';
    const p1 = 'eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f';
    const zeroTop = `${'00'.repeat(31)}80`;
    const oneTop = `01${'00'.repeat(30)}80`;
    const order8Top = 'e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b880';
    for (const hex of [p, p1, zeroTop, oneTop, order8Top]) await openRefused(key(le(hex)), 422, 'UNPROCESSABLE');
  });

  it('bodies that are not the object asked for, and ttl_ms that is not a whole number in range', async () => {
    for (const body of [[], null, 'x', 1, {}, { public_key: null }, { public_key: [] }, { public_key: { kty: 'OKP', crv: 'X25519' } }]) await openRefused(body, 400, 'MALFORMED_REQUEST');
    const x = clientKeyPair().x;
    for (const ttl of ['60000', null, true, 1e300, -1, 0, 1000.5, [60000], { ms: 1 }]) await openRefused({ ...key(x), ttl_ms: ttl }, 400, 'MALFORMED_REQUEST');
  });
});

describe('a leaked assertion cannot be turned into a session: the opening assertion is bound to the body\'s key', () => {
  /** An assertion of A with these extra claims (undefined: no claims of its own), sent to open a session with `x`; its jti. */
  async function openWith(claims: Record<string, unknown> | undefined, x: string, url = '/v1/sessions') {
    const jti = randomUUID();
    const assertion = await createCallerAssertion({ principal: A, privateJwk: fixtureKey(A), now: clock.now(), jti, ...(claims ? { claims } : {}) });
    const r = await h.app.inject({ method: 'POST', url, headers: bearer(assertion), payload: sessionRequest(x) });
    return { r, jti, assertion };
  }

  it('an assertion without cnf, htm and htu (any leaked one): 401 saying what to add, nothing spent; the assertion still buys its one request', async () => {
    const x = clientKeyPair().x;
    const { r, jti, assertion } = await openWith(undefined, x);
    refused(r, 401, 'UNAUTHENTICATED', /cnf\.jwk/);
    expect(r.json().detail).toContain(x);
    expect(r.json().detail).toMatch(/htm.*htu/);
    expect(spent(A, jti)).toBe(0);
    // Unspent: the same assertion is still good for one ordinary request.
    const read = await h.app.inject({ method: 'GET', url: '/v1/leases', headers: bearer(assertion) });
    expect(read.statusCode, read.body).toBe(200);
    expect(spent(A, jti)).toBe(1);
  });

  it('cnf naming another key (an attacker\'s body with a victim\'s bound assertion), or not an X25519 JWK: 401, nothing spent', async () => {
    const victim = clientKeyPair().x;
    const attacker = clientKeyPair().x;
    for (const cnf of [
      { jwk: { kty: 'OKP', crv: 'X25519', x: victim } },
      { jwk: { kty: 'OKP', crv: 'Ed25519', x: attacker } },
      { jwk: { kty: 'EC', crv: 'X25519', x: attacker } },
      { jwk: { crv: 'X25519', x: attacker } },
      { jwk: attacker }, { jkt: attacker }, attacker, null, [],
    ]) {
      const { r, jti } = await openWith({ cnf, htm: 'POST', htu: '/v1/sessions' }, attacker);
      refused(r, 401, 'UNAUTHENTICATED', /cnf\.jwk/);
      expect(spent(A, jti), JSON.stringify(cnf)).toBe(0);
    }
  });

  it('cnf.jwk carrying a private key (d): 401 saying never to send it, nothing spent', async () => {
    const x = clientKeyPair().x;
    const { r, jti } = await openWith({ cnf: { jwk: { kty: 'OKP', crv: 'X25519', x, d: 'AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE' } }, htm: 'POST', htu: '/v1/sessions' }, x);
    refused(r, 401, 'UNAUTHENTICATED', /private key/);
    expect(spent(A, jti)).toBe(0);
  });

  it('htm or htu missing or naming another request: 401, nothing spent', async () => {
    const x = clientKeyPair().x;
    const cnf = { jwk: { kty: 'OKP', crv: 'X25519', x } };
    for (const [claims, why] of [
      [{ cnf, htu: '/v1/sessions' }, /htm/], [{ cnf, htm: 'POST' }, /htu/],
      [{ cnf, htm: 'post', htu: '/v1/sessions' }, /htm/], [{ cnf, htm: 'GET', htu: '/v1/sessions' }, /htm/],
      [{ cnf, htm: 'POST', htu: '/v1/sessions/' }, /htu/], [{ cnf, htm: 'POST', htu: '/v1/leases' }, /htu/],
      [{ cnf, htm: 'POST', htu: 'http://localhost/v1/sessions' }, /htu/], [{ cnf, htm: 'POST', htu: '/v1/sessions?ttl=1' }, /htu/],
    ] as const) {
      const { r, jti } = await openWith(claims, x);
      refused(r, 401, 'UNAUTHENTICATED', why);
      expect(spent(A, jti), JSON.stringify(claims)).toBe(0);
    }
  });

  it('bound to the body\'s key, POST and /v1/sessions (a query is not part of htu): 201, spent, and the session works', async () => {
    for (const url of ['/v1/sessions', '/v1/sessions?from=test']) {
      const pair = clientKeyPair();
      const { r, jti } = await openWith(openingClaims(pair.x), pair.x, url);
      expect(r.statusCode, r.body).toBe(201);
      expect(spent(A, jti)).toBe(1);
      const s = sessionOf(r.json(), pair);
      const read = await inject('GET', '/v1/leases', token(s, { method: 'GET', path: '/v1/leases' }));
      expect(read.statusCode, read.body).toBe(200);
    }
  });

  it('a bound assertion sent to another route is an ordinary assertion: it buys that one request, as any leaked assertion', async () => {
    const x = clientKeyPair().x;
    const jti = randomUUID();
    const assertion = await createCallerAssertion({ principal: A, privateJwk: fixtureKey(A), now: clock.now(), jti, claims: openingClaims(x) });
    const read = await h.app.inject({ method: 'GET', url: '/v1/leases', headers: bearer(assertion) });
    expect(read.statusCode, read.body).toBe(200);
    refused(await h.app.inject({ method: 'POST', url: '/v1/sessions', headers: bearer(assertion), payload: sessionRequest(x) }), 401, 'UNAUTHENTICATED', /replayed/);
  });
});
