/**
 * Two claims of the README's "The auditor's console (web)" section, as a browser would see them over HTTP:
 *
 * 1. The session cookie of `POST /v1/console/session` is `HttpOnly`, `SameSite=Strict`, and `Secure` over TLS.
 *    How "over TLS" is decided: src/http/routes/console.ts `secure()` is `request.protocol === 'https'`: a TLS
 *    socket into Writ's own server, or `X-Forwarded-Proto: https` from a proxy named in WRIT_TRUST_PROXY
 *    (fastify's trustProxy; nobody by default). The test hands real TLS connections (a self-signed
 *    certificate made with openssl here) to the app's own http.Server, as a TLS listener in front of it would.
 *
 * 2. "a key rotation ends links and sessions once the retired key leaves the JWKS". Links and sessions are
 *    tokens signed by the decision key ring; a retired key stays published for the ring's grace period,
 *    which `openWrit` (and `writ keys rotate`) set to `config.decisionTtlMs`, also when another process
 *    rotated and this one only verifies.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import https from 'node:https';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import tls from 'node:tls';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { KeyRing } from '../../src/decision/index.js';
import { GOVERNANCE_ID } from '../../src/graph/model.js';
import { CONSOLE_SESSION_TTL_MS, issueLoginToken, LOGIN_LINK_TTL_MS } from '../../src/service/index.js';
import { loadConfig } from '../../src/config/index.js';
import { buildApp } from '../../src/http/index.js';
import { startHarness, type Harness } from '../support/harness.js';

const T0 = Date.UTC(2026, 5, 1, 12);

/** A real HTTP/1.1 exchange over a socket (TLS or not); the Set-Cookie header as received. */
function post(transport: typeof http | typeof https, port: number, body: unknown, extra: { ca?: string; headers?: Record<string, string> } = {}): Promise<{ status: number; setCookie: string[]; body: any }> {
  const payload = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = transport.request({
      host: '127.0.0.1', port, method: 'POST', path: '/v1/console/session', agent: false,
      headers: { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(payload)), ...extra.headers },
      // TLS only: the certificate is self-signed for localhost, so trust exactly it.
      ...(transport === https ? { servername: 'localhost', ca: extra.ca } : {}),
    }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, setCookie: res.headers['set-cookie'] ?? [], body: JSON.parse(Buffer.concat(chunks).toString() || 'null') }));
    });
    req.on('error', reject);
    req.end(payload);
  });
}

// One Writ for the whole file (the rotation tests come last and move its clock).
let h: Harness;
let clock: ManualClock;
beforeAll(async () => {
  clock = new ManualClock(T0);
  h = await startHarness({ clock });
}, 60_000);
afterAll(async () => h?.close());

describe('the console session cookie: HttpOnly, SameSite=Strict, and Secure over TLS', () => {
  let certDir: string;
  let cert: string;
  let httpPort: number;
  let tlsServer: tls.Server;
  let tlsPort: number;

  beforeAll(async () => {
    // A self-signed certificate for localhost, made for this test only.
    certDir = mkdtempSync(join(tmpdir(), 'writ-tls-'));
    execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1',
      '-subj', '/CN=localhost', '-addext', 'subjectAltName=DNS:localhost', '-keyout', join(certDir, 'key.pem'), '-out', join(certDir, 'cert.pem')], { stdio: 'ignore' });
    cert = readFileSync(join(certDir, 'cert.pem'), 'utf8');
    // Plain HTTP: the app's own server on a real socket.
    await h.app.listen({ port: 0, host: '127.0.0.1' });
    httpPort = (h.app.server.address() as AddressInfo).port;
    // TLS: each decrypted connection is handed to the same http.Server (socket.encrypted is true).
    tlsServer = tls.createServer({ key: readFileSync(join(certDir, 'key.pem')), cert }, (socket) => h.app.server.emit('connection', socket));
    await new Promise<void>((resolve) => tlsServer.listen(0, '127.0.0.1', resolve));
    tlsPort = (tlsServer.address() as AddressInfo).port;
  }, 60_000);
  afterAll(async () => {
    await new Promise((resolve) => tlsServer?.close(resolve));
    rmSync(certDir, { recursive: true, force: true });
  });

  const link = async () => (await issueLoginToken(h.ctx, GOVERNANCE_ID)).token;
  const attributes = (setCookie: string) => setCookie.split(';').slice(1).map((a) => a.trim());

  it('over TLS the cookie carries Secure, HttpOnly and SameSite=Strict', async () => {
    const r = await post(https, tlsPort, { token: await link() }, { ca: cert });
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({ principal: GOVERNANCE_ID, auditor: true });
    expect(r.setCookie).toHaveLength(1);
    const setCookie = r.setCookie[0]!;
    expect(setCookie).toMatch(/^writ_console=[\w.-]+;/);
    expect(attributes(setCookie)).toEqual(expect.arrayContaining(['HttpOnly', 'SameSite=Strict', 'Secure', 'Path=/', `Max-Age=${CONSOLE_SESSION_TTL_MS / 1000}`]));
  });

  it('over plain HTTP the same exchange sets HttpOnly and SameSite=Strict but not Secure', async () => {
    const r = await post(http, httpPort, { token: await link() });
    expect(r.status).toBe(201);
    const setCookie = r.setCookie[0]!;
    expect(attributes(setCookie)).toEqual(expect.arrayContaining(['HttpOnly', 'SameSite=Strict']));
    expect(attributes(setCookie)).not.toContain('Secure');
  });

  // TLS terminated by a reverse proxy in front of Writ counts only when that proxy is named in
  // WRIT_TRUST_PROXY: otherwise X-Forwarded-Proto is ignored (any client could send it).
  it('X-Forwarded-Proto: https makes the cookie Secure only from a proxy named in WRIT_TRUST_PROXY', async () => {
    const viaHttp = await post(http, httpPort, { token: await link() }, { headers: { 'x-forwarded-proto': 'https' } });
    expect(viaHttp.status).toBe(201);
    expect(attributes(viaHttp.setCookie[0]!)).not.toContain('Secure');

    const behindProxy = await buildApp({ ...h.ctx, config: { ...h.ctx.config, trustProxy: loadConfig({}, { WRIT_TRUST_PROXY: '127.0.0.1, 10.8.0.0/16' }).trustProxy } });
    try {
      const fromProxy = await behindProxy.inject({ method: 'POST', url: '/v1/console/session', remoteAddress: '10.8.1.2', headers: { 'x-forwarded-proto': 'https' }, payload: { token: await link() } });
      expect(fromProxy.statusCode).toBe(201);
      expect(attributes(String(fromProxy.headers['set-cookie']))).toEqual(expect.arrayContaining(['HttpOnly', 'SameSite=Strict', 'Secure']));
      const fromElsewhere = await behindProxy.inject({ method: 'POST', url: '/v1/console/session', remoteAddress: '192.0.2.7', headers: { 'x-forwarded-proto': 'https' }, payload: { token: await link() } });
      expect(fromElsewhere.statusCode).toBe(201);
      expect(attributes(String(fromElsewhere.headers['set-cookie']))).not.toContain('Secure');
    } finally {
      await behindProxy.close();
    }
    // "Everyone" or a malformed address is refused at start, with the reason.
    for (const bad of ['true', '*', '0.0.0.0/0', '::/0', '10.0.0.0/7', '10.0.0.0/33', 'proxy.example.com']) {
      expect(() => loadConfig({}, { WRIT_TRUST_PROXY: bad })).toThrow(/WRIT_TRUST_PROXY must name the proxies/);
    }
  });

  it('signing out over TLS clears the cookie with the same attributes, Secure included', async () => {
    const r = await post(https, tlsPort, { token: await link() }, { ca: cert });
    const cookie = r.setCookie[0]!.split(';')[0]!;
    const out = await new Promise<string[]>((resolve, reject) => {
      const req = https.request({ host: '127.0.0.1', port: tlsPort, method: 'DELETE', path: '/v1/console/session', agent: false, servername: 'localhost', ca: cert, headers: { cookie } }, (res) => {
        res.resume();
        res.on('end', () => (res.statusCode === 200 ? resolve(res.headers['set-cookie'] ?? []) : reject(new Error(`status ${res.statusCode}`))));
      });
      req.on('error', reject);
      req.end();
    });
    expect(attributes(out[0]!)).toEqual(expect.arrayContaining(['Max-Age=0', 'HttpOnly', 'SameSite=Strict', 'Secure']));
  });
});

describe('a key rotation ends console links and sessions once the retired key leaves the JWKS', () => {
  const kids = async (): Promise<string[]> => (await h.call(null, { method: 'GET', url: '/.well-known/jwks.json' })).body.keys.map((k: { kid: string }) => k.kid);
  const exchange = (token: string) => h.call(null, { method: 'POST', url: '/v1/console/session', payload: { token } });
  const readSession = (cookie: string) => h.call(null, { method: 'GET', url: '/v1/console/session', headers: { cookie } });
  const readReceipts = (cookie: string) => h.call(null, { method: 'GET', url: '/v1/receipts', headers: { cookie } });
  async function signIn(): Promise<string> {
    const r = await exchange((await issueLoginToken(h.ctx, GOVERNANCE_ID)).token);
    expect(r.status).toBe(201);
    return String(r.headers['set-cookie']).split(';')[0]!;
  }

  /**
   * Issues a session and two links under the current key, rotates with `rotate`, then walks the clock to
   * the last millisecond of the grace period (both still work) and to its end (both refused).
   */
  async function rotationEndsLinksAndSessions(rotate: () => Promise<unknown>): Promise<number> {
    const oldKid = h.ctx.keys.current().kid;
    const cookie = await signIn();
    const earlyLink = (await issueLoginToken(h.ctx, GOVERNANCE_ID)).token;
    const lateLink = (await issueLoginToken(h.ctx, GOVERNANCE_ID)).token;

    const rotatedAt = clock.now();
    await rotate();
    const grace = h.ctx.keys.retiredKeyPublishedMs;

    // Within the grace period the retired key is still published, and both still work.
    clock.set(rotatedAt + grace - 1);
    expect(await kids()).toContain(oldKid);
    expect(h.ctx.keys.current().kid).not.toBe(oldKid);
    const stillReads = await readSession(cookie);
    expect(stillReads.status).toBe(200);
    expect(stillReads.body.principal).toBe(GOVERNANCE_ID);
    expect((await readReceipts(cookie)).status).toBe(200);
    const early = await exchange(earlyLink);
    expect(early.status).toBe(201);
    const newCookie = String(early.headers['set-cookie']).split(';')[0]!;

    // Once it leaves the JWKS, the old session cookie no longer reads and the old link is LOGIN_LINK_INVALID.
    clock.set(rotatedAt + grace);
    expect(await kids()).not.toContain(oldKid);
    const refused = await readSession(cookie);
    expect(refused.status).toBe(401);
    expect(refused.body.code).toBe('UNAUTHENTICATED');
    expect(refused.body.detail).toContain('rotated out');
    expect((await readReceipts(cookie)).body.code).toBe('UNAUTHENTICATED');
    const late = await exchange(lateLink);
    expect(late.status).toBe(401);
    expect(late.body.code).toBe('LOGIN_LINK_INVALID');
    expect(late.body.detail).toContain('rotated out');
    // Both were well inside their own lifetimes (link 10 min, session 30 min): only the rotation ended them.
    expect(clock.now() - rotatedAt).toBeLessThan(LOGIN_LINK_TTL_MS);
    // A session opened during the grace period (signed with the new key) is unaffected.
    expect((await readSession(newCookie)).status).toBe(200);
    return grace;
  }

  it('in-process KeyRing.rotate(): before the grace period ends the old link and cookie work; at its end both are refused', async () => {
    const grace = await rotationEndsLinksAndSessions(() => h.ctx.keys.rotate());
    // openWrit (and `writ keys rotate`) give the ring maxTokenTtlMs = config.decisionTtlMs
    // (WRIT_DECISION_TTL_MS, default 30 s): links and sessions end that long after a rotation, and one
    // second more (a process sharing the key directory sees a rotation within a second).
    expect(grace).toBe(h.config.decisionTtlMs + 1000);
    expect(grace).toBe(31_000);
  });

  // `writ keys rotate` opens its own KeyRing on <dataDir>/keys with maxTokenTtlMs = config.decisionTtlMs
  // (src/cli/commands.ts) and rotates; here the same, on the test's clock instead of the system clock.
  const rotateLikeTheCli = async () => {
    const cli = await KeyRing.open(join(h.config.dataDir, 'keys'), clock, { maxTokenTtlMs: h.config.decisionTtlMs });
    await cli.rotate();
    return cli;
  };

  it('a rotation by another process (as `writ keys rotate` does) ends them too, in a server that serves its JWKS or signs meanwhile', async () => {
    // The GET /.well-known/jwks.json (and the signing of the early link's session) inside the helper make
    // the serving process re-read the key directory; see the next test for a server that does neither.
    clock.advance(60_000);
    await rotationEndsLinksAndSessions(rotateLikeTheCli);
  });

  // A serving process that only verifies (no signing, no JWKS served) must see another process's
  // rotation too: KeyRing.verificationKey re-reads the key directory at least once a second, also for a
  // kid it already holds (before, only for an unknown kid, so the old link and session worked on forever).
  it('a server that only verifies sees another process\'s rotation: past the grace period the old cookie and link are refused', async () => {
    clock.advance(60_000);
    const cookie = await signIn();
    const link = (await issueLoginToken(h.ctx, GOVERNANCE_ID)).token;
    const rotatedAt = clock.now();
    await rotateLikeTheCli();
    // Within the grace period both still work.
    const published = h.ctx.keys.retiredKeyPublishedMs;
    clock.set(rotatedAt + published - 1);
    expect((await readSession(cookie)).status).toBe(200);
    // Past it, the first request refuses (no signing or JWKS read in between).
    clock.set(rotatedAt + published + 1);
    const stale = await readSession(cookie);
    expect(stale.status).toBe(401);
    expect(stale.body.detail).toContain('rotated out');
    const exchanged = await exchange(link);
    expect(exchanged.status).toBe(401);
    expect(exchanged.body.code).toBe('LOGIN_LINK_INVALID');
  });
});
