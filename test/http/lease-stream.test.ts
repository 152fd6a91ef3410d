/**
 * GET /v1/leases/stream (src/http/routes/lease-stream.ts) over a real socket of the in-process harness:
 * the SDK's LeaseStream and raw `ws` for the protocol's edges.
 */
import { once } from 'node:events';
import { fdatasync } from 'node:fs';
import { connect } from 'node:net';
import type { Socket } from 'node:net';
import WebSocket from 'ws';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { loadConfig } from '../../src/config/index.js';
import { GOVERNANCE_ID, type PublicJwk } from '../../src/graph/model.js';
import { issueLoginToken, registerPrincipal } from '../../src/service/index.js';
import { generatePrincipalKeyPair, LeaseStream, LeaseStreamClosedError, UnauthenticatedError, WritApiError, WritClient, type LeaseGrant } from '../../src/sdk/index.js';
import { act, decideOk, leaseOk } from '../support/agent.js';
import { fixtureKey, type Harness } from '../support/harness.js';
import { closeOpened, closesWithin, listening, opened, openServerSockets, rawStream, type Raw } from '../support/lease-stream.js';

const loadDefaults = () => loadConfig({}, {});
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;
const SEO = 'seo-agent-7';
const ALICE = 'editor-alice';

afterEach(closeOpened);

function client(url: string, principal: string): WritClient {
  return new WritClient({ baseUrl: url, principal, privateJwk: fixtureKey(principal) });
}

async function openStream(url: string, principal: string): Promise<LeaseStream> {
  const s = await client(url, principal).openLeaseStream();
  opened.push(s);
  return s;
}

const titleDecision = async (h: Harness, principal: string, post: number) => (await decideOk(h, principal, { resource: `wp:post:${post}`, fields: ['title'] })).token;

/** How a refused upgrade is answered: the HTTP status and problem (no socket). */
async function refusedUpgrade(url: string, headers: Record<string, string>): Promise<{ status: number; body: any }> {
  const ws = new WebSocket(`${url.replace(/^http/, 'ws')}/v1/leases/stream`, { headers, perMessageDeflate: false });
  ws.on('error', () => undefined);
  return new Promise((resolve, reject) => {
    ws.once('open', () => {
      ws.terminate();
      reject(new Error('the upgrade was accepted'));
    });
    ws.once('unexpected-response', (_req, res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => {
        ws.terminate();
        resolve({ status: res.statusCode ?? 0, body: JSON.parse(body) });
      });
    });
  });
}

/** Until the wait queue holds an acquisition (a stream's, sent just before). */
async function untilQueued(h: Harness): Promise<void> {
  const until = Date.now() + 5_000;
  while ((await h.ctx.leases.queues()).length === 0) {
    if (Date.now() > until) throw new Error('the stream acquisition never queued');
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Alice holds wp:post:N#title, and a stream of SEO's waits in the queue for it (up to 30 s). */
async function queuedBehindAliceOn(h: Harness, url: string, post: number) {
  const alice = await leaseOk(h, ALICE, [await titleDecision(h, ALICE, post)]);
  const s = await openStream(url, SEO);
  const waiting = s.acquire([await titleDecision(h, SEO, post)], { waitMs: 30_000 }).catch((e: unknown) => e);
  await untilQueued(h);
  return { alice, s, waiting };
}

async function queuedBehindAlice(post: number) {
  const { h, url } = await listening();
  return { h, url, ...(await queuedBehindAliceOn(h, url, post)) };
}

const leasesOf = async (h: Harness, holder?: string) =>
  (await h.call(GOVERNANCE_ID, { method: 'GET', url: `/v1/leases${holder ? `?holder=${holder}` : ''}` })).body.leases as any[];

const codeOf = (p: Promise<unknown>) => p.then(() => 'RESOLVED', (e: any) => e?.code ?? String(e));

describe('the lease stream, over the SDK', () => {
  it('acquire → renew → release answer the HTTP bodies; the lease is a real one (writes with it, busy for others) and its epoch is kept after release', async () => {
    const { h, url } = await listening({ upstream: true });
    const s = await openStream(url, SEO);
    const d = await titleDecision(h, SEO, 7);
    const grant = await s.acquire([d], { ttlMs: 20_000 });
    for (const k of ['epochs', 'expires_at', 'holder', 'keys', 'lease_id', 'token']) expect(grant).toHaveProperty(k);
    expect(grant).toMatchObject({ holder: SEO, lease_id: expect.stringMatching(/^lease_/), token: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/) });
    expect(grant.expires_at).toMatch(RFC3339);
    expect(grant.keys.length).toBeGreaterThan(0);
    expect(Object.keys(grant.epochs).sort()).toEqual(grant.keys);
    const [key] = grant.keys;
    const epoch1 = grant.epochs[key!]!;
    expect(epoch1).toBe(1);
    // The same shape as POST /v1/leases answers (another key, same fields).
    const http = await leaseOk(h, SEO, [await titleDecision(h, SEO, 8)]);
    expect(Object.keys(grant).sort()).toEqual(Object.keys(http).sort());

    // Another principal's HTTP acquisition of the same key meanwhile: 423 naming the holder.
    const busy = await h.call(ALICE, { method: 'POST', url: '/v1/leases', payload: { decisions: [await titleDecision(h, ALICE, 7)], ttl_ms: 10_000 } });
    expect(busy.status).toBe(423);
    expect(busy.body).toMatchObject({ code: 'RESOURCE_BUSY', holder: SEO });

    // A write through the gateway with the stream's lease completes.
    const w = await act(h, SEO, { resource: 'wp:post:7', fields: ['title'], payload: { title: 'from the stream' }, expected_version: 0 }, { decision: d, lease: grant });
    expect(w.status, JSON.stringify(w.body)).toBe(201);
    expect(w.body.receipt).toMatchObject({ status: 'COMPLETED', lease_id: grant.lease_id, lease_epoch: epoch1 });

    const renewed = await s.renew(grant, 30_000);
    expect(Object.keys(renewed).sort()).toEqual(['epochs', 'expires_at', 'lease_id']);
    expect(renewed).toMatchObject({ lease_id: grant.lease_id, epochs: grant.epochs });
    expect(renewed.expires_at).toMatch(RFC3339);
    expect(Date.parse(renewed.expires_at)).toBeGreaterThan(Date.parse(grant.expires_at));

    const released = await s.release(grant);
    expect(released).toEqual({ lease_id: grant.lease_id, epochs: grant.epochs });
    // The key's record keeps the epoch as its high-water mark; nobody holds it.
    const rec = (await leasesOf(h)).find((l) => l.key === key);
    expect(rec).toMatchObject({ key, epoch: epoch1 });
    expect(rec.state).not.toBe('HELD');
    expect(JSON.stringify(rec)).not.toContain(grant.token);

    // The next acquisition, by the other principal over its own stream, gets a higher epoch.
    const alice = await openStream(url, ALICE);
    const next = await alice.acquire([await titleDecision(h, ALICE, 7)]);
    expect(next.holder).toBe(ALICE);
    expect(next.epochs[key!]).toBeGreaterThan(epoch1);
    await alice.release(next);
  });

  it('refusals answer the HTTP codes, change nothing, and leave the stream usable', async () => {
    const { h, url } = await listening({ upstream: true });
    const s = await openStream(url, SEO);
    const aliceLease = await leaseOk(h, ALICE, [await titleDecision(h, ALICE, 11)]);
    const before = h.db.prepare('SELECT * FROM lease_keys ORDER BY 1').all();
    const leasesBefore = h.db.prepare('SELECT * FROM leases ORDER BY 1').all();

    // RESOURCE_BUSY with the holder and retry_after_ms.
    const busy = await s.acquire([await titleDecision(h, SEO, 11)]).catch((e: unknown) => e);
    expect(busy).toBeInstanceOf(WritApiError);
    expect(busy).toMatchObject({ code: 'RESOURCE_BUSY', status: 423, holder: ALICE });
    expect((busy as WritApiError).problem.retry_after_ms).toEqual(expect.any(Number));
    expect((busy as WritApiError).retryAfterMs).toBeGreaterThan(0);

    // DECISION_INVALID for a tampered token (the HTTP route says the same).
    const good = await titleDecision(h, SEO, 12);
    const [hd, pl, sig] = good.split('.');
    const tampered = `${hd}.${pl}.${sig!.slice(0, -4)}${sig!.slice(-4) === 'AAAA' ? 'BBBB' : 'AAAA'}`;
    const viaHttpTampered = await h.call(SEO, { method: 'POST', url: '/v1/leases', payload: { decisions: [tampered] } });
    expect(await codeOf(s.acquire([tampered]))).toBe('DECISION_INVALID');
    expect(viaHttpTampered.body.code).toBe('DECISION_INVALID');

    // UNPROCESSABLE for a decision that needs no lease (meta_description).
    const meta = (await decideOk(h, SEO, { resource: 'wp:post:12', fields: ['meta_description'] })).token;
    const noLease = await s.acquire([meta]).catch((e: unknown) => e);
    expect(noLease).toMatchObject({ code: 'UNPROCESSABLE', status: 422 });
    expect((await h.call(SEO, { method: 'POST', url: '/v1/leases', payload: { decisions: [meta] } })).body.code).toBe('UNPROCESSABLE');

    expect(h.db.prepare('SELECT * FROM lease_keys ORDER BY 1').all()).toEqual(before);
    expect(h.db.prepare('SELECT * FROM leases ORDER BY 1').all()).toEqual(leasesBefore);

    // Wrong token, someone else's lease, and a released lease: the same codes as the HTTP routes.
    const mine = await s.acquire([good]);
    const wrong = { lease_id: mine.lease_id, token: aliceLease.token };
    const viaHttp = async (method: 'renew' | 'release', lease: { lease_id: string; token: string }) => (method === 'renew'
      ? await h.call(SEO, { method: 'POST', url: `/v1/leases/${lease.lease_id}/renew`, payload: { token: lease.token } })
      : await h.call(SEO, { method: 'DELETE', url: `/v1/leases/${lease.lease_id}`, payload: { token: lease.token } })).body.code;
    const alices = { lease_id: aliceLease.lease_id, token: aliceLease.token };
    const cases: [string, () => Promise<unknown>, 'renew' | 'release', { lease_id: string; token: string }][] = [
      ['wrong token, renew', () => s.renew(wrong), 'renew', wrong],
      ['wrong token, release', () => s.release(wrong), 'release', wrong],
      ['another principal\'s lease, renew', () => s.renew(alices), 'renew', alices],
      ['another principal\'s lease, release', () => s.release(alices), 'release', alices],
      ['unknown lease', () => s.release({ lease_id: 'lease_nope', token: mine.token }), 'release', { lease_id: 'lease_nope', token: mine.token }],
    ];
    const heldBefore = h.db.prepare('SELECT * FROM lease_keys ORDER BY 1').all();
    for (const [what, viaStream, method, lease] of cases) {
      const streamCode = await codeOf(viaStream());
      expect(streamCode, what).toMatch(/^LEASE_(TOKEN_MISMATCH|NOT_FOUND|EXPIRED)$/);
      expect(streamCode, what).toBe(await viaHttp(method, lease));
    }
    expect(h.db.prepare('SELECT * FROM lease_keys ORDER BY 1').all()).toEqual(heldBefore);

    // A released lease: renew and release again.
    await s.release(mine);
    const releasedStream = [await codeOf(s.renew(mine)), await codeOf(s.release(mine))];
    expect(releasedStream[0]).toMatch(/^LEASE_(EXPIRED|NOT_FOUND)$/);
    expect(releasedStream).toEqual([await viaHttp('renew', mine), await viaHttp('release', mine)]);

    // Still usable: the key alice holds is free once she releases it, and the stream takes it.
    await h.call(ALICE, { method: 'DELETE', url: `/v1/leases/${aliceLease.lease_id}`, payload: { token: aliceLease.token } });
    const after = await s.acquire([await titleDecision(h, SEO, 11)]);
    expect(after.holder).toBe(SEO);
    await s.release(after);
  });

  it('a message bigger than WRIT_BODY_LIMIT closes the stream with 1009 and creates nothing', async () => {
    const { h, url } = await listening({ config: { bodyLimitBytes: 2_048 } });
    const raw = await rawStream(url, await h.auth(SEO));
    raw.send({ id: 1, op: 'release', lease_id: 'l', token: 'x'.repeat(4_000) });
    expect(await raw.closed).toMatchObject({ code: 1009 });
    expect(raw.replies).toEqual([]);
  });

  it('a bad message is answered MALFORMED_REQUEST (or NESTING_TOO_DEEP), creates nothing, and the stream stays open', async () => {
    const { h, url } = await listening();
    const raw = await rawStream(url, await h.auth(SEO));
    const deep = `{"id":1,"op":"acquire","decisions":${'['.repeat(h.config.jsonMaxDepth + 2)}${']'.repeat(h.config.jsonMaxDepth + 2)}}`;
    const bad: [string, string | Buffer, number | null, string][] = [
      ['not JSON', '{"id": 1, "op": ', null, 'MALFORMED_REQUEST'],
      ['a JSON array', '[{"id": 2, "op": "release", "lease_id": "l", "token": "t"}]', null, 'MALFORMED_REQUEST'],
      ['a JSON string', '"hello"', null, 'MALFORMED_REQUEST'],
      ['no id', JSON.stringify({ op: 'release', lease_id: 'l', token: 't' }), null, 'MALFORMED_REQUEST'],
      ['a negative id', JSON.stringify({ id: -3, op: 'release', lease_id: 'l', token: 't' }), null, 'MALFORMED_REQUEST'],
      ['a fractional id', JSON.stringify({ id: 1.5, op: 'release', lease_id: 'l', token: 't' }), null, 'MALFORMED_REQUEST'],
      ['a string id', JSON.stringify({ id: '4', op: 'release', lease_id: 'l', token: 't' }), null, 'MALFORMED_REQUEST'],
      ['an unknown op', JSON.stringify({ id: 5, op: 'steal', lease_id: 'l', token: 't' }), 5, 'MALFORMED_REQUEST'],
      ['an extra property', JSON.stringify({ id: 6, op: 'release', lease_id: 'l', token: 't', force: true }), 6, 'MALFORMED_REQUEST'],
      ['a wrong type', JSON.stringify({ id: 7, op: 'acquire', decisions: 'tok' }), 7, 'MALFORMED_REQUEST'],
      ['a wrong type (ttl)', JSON.stringify({ id: 8, op: 'renew', lease_id: 'l', token: 't', ttl_ms: '1000' }), 8, 'MALFORMED_REQUEST'],
      ['a missing field', JSON.stringify({ id: 9, op: 'release', lease_id: 'l' }), 9, 'MALFORMED_REQUEST'],
      ['a binary frame', Buffer.from(JSON.stringify({ id: 10, op: 'release', lease_id: 'l', token: 't' })), null, 'MALFORMED_REQUEST'],
      ['nesting deeper than the max', deep, null, 'NESTING_TOO_DEEP'],
      ['a lone surrogate', '{"id":12,"op":"release","lease_id":"\\ud800","token":"t"}', 12, 'MALFORMED_REQUEST'],
      ['a NUL', '{"id":13,"op":"release","lease_id":"a\\u0000","token":"t"}', 13, 'MALFORMED_REQUEST'],
    ];
    for (const [what, message, id, code] of bad) {
      if (Buffer.isBuffer(message)) raw.ws.send(message, { binary: true });
      else raw.ws.send(message);
      const reply = await raw.next();
      expect(reply, what).toMatchObject({ id, ok: false, problem: { code } });
      expect(reply.problem.status, what).toBe(400);
      expect(typeof reply.problem.detail, what).toBe('string');
      expect(raw.ws.readyState, what).toBe(WebSocket.OPEN);
    }
    expect(raw.replies).toHaveLength(bad.length);
    expect(await leasesOf(h)).toEqual([]);
    expect(h.db.prepare('SELECT COUNT(*) AS n FROM leases').get()).toEqual({ n: 0 });

    // Still usable: a good request is answered with its id.
    raw.send({ id: 99, op: 'acquire', decisions: [await titleDecision(h, SEO, 21)], ttl_ms: 5_000 });
    const ok = await raw.next();
    expect(ok).toMatchObject({ id: 99, ok: true, result: { holder: SEO } });
    raw.send({ id: 100, op: 'release', lease_id: ok.result.lease_id, token: ok.result.token });
    expect(await raw.next()).toMatchObject({ id: 100, ok: true, result: { lease_id: ok.result.lease_id } });
  });
});

describe('opening the lease stream', () => {
  it('refuses the upgrade with an HTTP problem: no Authorization, a replayed or expired assertion, a console session, a plain GET', async () => {
    const { h, url } = await listening();
    const none = await refusedUpgrade(url, {});
    expect(none).toMatchObject({ status: 401, body: { code: 'UNAUTHENTICATED' } });

    const used = await h.auth(SEO);
    expect((await fetch(`${url}/v1/leases`, { headers: used })).status).toBe(200);
    expect(await refusedUpgrade(url, used)).toMatchObject({ status: 401, body: { code: 'UNAUTHENTICATED' } });

    // An assertion used to open one stream cannot open a second.
    const once1 = await h.auth(SEO);
    const first = await rawStream(url, once1);
    expect(first.ws.readyState).toBe(WebSocket.OPEN);
    expect(await refusedUpgrade(url, once1)).toMatchObject({ status: 401, body: { code: 'UNAUTHENTICATED' } });

    const expired = await h.auth(SEO, { now: Date.now() - 10 * 60_000, ttlSeconds: 60 });
    expect(await refusedUpgrade(url, expired)).toMatchObject({ status: 401, body: { code: 'UNAUTHENTICATED' } });

    const forged = (await h.auth(SEO)).authorization!.slice(0, -6) + 'AAAAAA';
    expect(await refusedUpgrade(url, { authorization: forged })).toMatchObject({ status: 401, body: { code: 'UNAUTHENTICATED' } });

    const { token } = await issueLoginToken(h.ctx, SEO);
    const session = await h.call(null, { method: 'POST', url: '/v1/console/session', payload: { token } });
    expect(session.status).toBe(201);
    const cookie = String(session.headers['set-cookie']).split(';')[0]!;
    // The cookie works for the HTTP API, not for the stream.
    expect((await fetch(`${url}/v1/console/session`, { headers: { cookie } })).status).toBe(200);
    expect(await refusedUpgrade(url, { cookie })).toMatchObject({ status: 401, body: { code: 'UNAUTHENTICATED' } });

    const plain = await fetch(`${url}/v1/leases/stream`, { headers: await h.auth(SEO) });
    expect(plain.status).toBe(400);
    expect(await plain.json()).toMatchObject({ code: 'MALFORMED_REQUEST' });
    const plainNoAuth = await fetch(`${url}/v1/leases/stream`);
    expect(plainNoAuth.status).toBe(400);

    // The SDK: a typed error. A principal without a registered key, and an unknown principal.
    const stranger = new WritClient({ baseUrl: url, principal: 'nobody-at-all', privateJwk: fixtureKey(SEO) });
    const err = await stranger.openLeaseStream().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UnauthenticatedError);
    expect(err).toMatchObject({ code: 'UNAUTHENTICATED', status: 401 });
    const wrongKey = new WritClient({ baseUrl: url, principal: SEO, privateJwk: fixtureKey(ALICE) });
    expect(await wrongKey.openLeaseStream().catch((e: unknown) => e)).toBeInstanceOf(UnauthenticatedError);
  });
});

describe('pipelining', () => {
  it('40 acquisitions sent at once are each answered once, with its id and a lease of its own; then all are released', async () => {
    const { h, url } = await listening();
    const raw = await rawStream(url, await h.auth(SEO));
    const N = 40;
    const tokens: string[] = [];
    for (let i = 0; i < N; i++) tokens.push(await titleDecision(h, SEO, 300 + i));
    for (let i = 0; i < N; i++) raw.send({ id: 1000 + i, op: 'acquire', decisions: [tokens[i]], ttl_ms: 20_000 });
    const replies: any[] = [];
    for (let i = 0; i < N; i++) replies.push(await raw.next(10_000));
    expect(replies.map((r) => r.ok)).toEqual(Array(N).fill(true));
    expect(replies.map((r) => r.id).sort()).toEqual(Array.from({ length: N }, (_, i) => 1000 + i));
    // Each answer is the lease for its own request's key.
    for (const r of replies) expect(r.result.keys.join(',')).toContain(`wp:post:${300 + (r.id - 1000)}`);
    expect(new Set(replies.map((r) => r.result.lease_id)).size).toBe(N);
    expect(new Set(replies.map((r) => r.result.token)).size).toBe(N);
    expect((await leasesOf(h, SEO)).filter((l) => l.state === 'HELD')).toHaveLength(N);

    for (const [i, r] of replies.entries()) raw.send({ id: 2000 + i, op: 'release', lease_id: r.result.lease_id, token: r.result.token });
    const released: any[] = [];
    for (let i = 0; i < N; i++) released.push(await raw.next(10_000));
    expect(released.map((r) => r.ok)).toEqual(Array(N).fill(true));
    expect(released.map((r) => r.id).sort()).toEqual(Array.from({ length: N }, (_, i) => 2000 + i));
    await new Promise((r) => setTimeout(r, 100));
    expect(raw.replies).toHaveLength(2 * N); // none answered twice
    const records = (await leasesOf(h)).filter((l) => /^wp:post:3\d\d/.test(l.key));
    expect(records).toHaveLength(N);
    expect(records.filter((l) => l.state === 'HELD')).toEqual([]);
  });

  it('the same over the SDK: overlapping calls each resolve with their own lease', async () => {
    const { h, url } = await listening();
    const s = await openStream(url, SEO);
    const tokens: string[] = [];
    for (let i = 0; i < 40; i++) tokens.push(await titleDecision(h, SEO, 400 + i));
    const grants: LeaseGrant[] = await Promise.all(tokens.map((t) => s.acquire([t], { ttlMs: 20_000 })));
    grants.forEach((g, i) => expect(g.keys.join(',')).toContain(`wp:post:${400 + i}`));
    expect(new Set(grants.map((g) => g.lease_id)).size).toBe(40);
    await Promise.all(grants.map((g) => s.release(g)));
  });
});

describe('the in-flight bound', () => {
  it('takes 256 requests in flight per stream; one more is OVERLOADED at once, and each request is answered exactly once', async () => {
    const { h, url } = await listening({ config: { lease: { ...loadDefaults().lease, maxWaitersPerKey: 1_000, maxWaitersPerPrincipal: 1_000 } } });
    await leaseOk(h, ALICE, [await titleDecision(h, ALICE, 61)]);
    const t = await titleDecision(h, SEO, 61);
    const raw = await rawStream(url, await h.auth(SEO));
    const N = 300;
    // Each one queues behind alice (a wait far longer than this test): none finishes on its own.
    for (let i = 0; i < N; i++) raw.send({ id: i, op: 'acquire', decisions: [t], wait_ms: 30_000 });
    const refused: any[] = [];
    for (let i = 0; i < N - 256; i++) refused.push(await raw.next());
    for (const r of refused) {
      expect(r).toMatchObject({ ok: false, problem: { code: 'OVERLOADED', status: 503 } });
      expect(r.problem.retry_after_ms).toBeGreaterThan(0);
      expect(r.problem.detail).toMatch(/in flight/);
    }
    // The refused are the last ones sent.
    expect(refused.map((r) => r.id).sort((x, y) => x - y)).toEqual(Array.from({ length: N - 256 }, (_, i) => 256 + i));
    await new Promise((r) => setTimeout(r, 300));
    expect(raw.replies).toHaveLength(N - 256);
    // Let the waits go (as serve's shutdown does): the 256 are answered, each once.
    h.ctx.leases.stopWaiting();
    for (let i = 0; i < 256; i++) await raw.next();
    await new Promise((r) => setTimeout(r, 200));
    expect(raw.replies).toHaveLength(N);
    expect(new Set(raw.replies.map((r) => r.id)).size).toBe(N);
    expect(raw.replies.every((r) => r.ok === false && r.problem.code === 'OVERLOADED')).toBe(true);
    expect(raw.ws.readyState).toBe(WebSocket.OPEN);
  });
});

describe('the stream\'s authentication', () => {
  it('ends when the principal is revoked: the next request is UNAUTHENTICATED and the stream closes with 1008', async () => {
    const { h, url } = await listening();
    const s = await openStream(url, SEO);
    const g = await s.acquire([await titleDecision(h, SEO, 31)]);
    const rev = await h.call(GOVERNANCE_ID, { method: 'DELETE', url: `/v1/principals/${SEO}`, payload: { reason: 'compromised' } });
    expect(rev.status).toBe(200);
    const err = await s.renew(g).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UnauthenticatedError);
    expect((err as WritApiError).detail).toMatch(/revoked/);
    expect(await s.closed).toMatchObject({ code: 1008 });
    expect((await s.release(g).catch((e: unknown) => e))).toBeInstanceOf(LeaseStreamClosedError);
  });

  it('asks the graph for changes once per message: a delegation revoked between two messages refuses the second', async () => {
    const { h, url } = await listening();
    const s = await openStream(url, SEO);
    const d = await titleDecision(h, SEO, 32);
    const current = vi.spyOn(h.ctx.graph, 'current');
    const g = await s.acquire([d]);
    expect(current).toHaveBeenCalledTimes(1);
    await s.release(g);
    expect(current).toHaveBeenCalledTimes(2);
    current.mockRestore();
    const rev = await h.call(GOVERNANCE_ID, { method: 'DELETE', url: '/v1/edges/d-orch-seo', payload: { reason: 'misbehaved' } });
    expect(rev.status).toBe(200);
    expect(await codeOf(s.acquire([d]))).toBe('AUTHORITY_REVOKED');
  });

  it('ends when the key that opened it is replaced, even under the same kid (a rotated compromised key); another principal\'s decision is DECISION_MISMATCH as over HTTP', async () => {
    const { h, url } = await listening();
    const s = await openStream(url, SEO);
    const aliceToken = await titleDecision(h, ALICE, 36);
    const viaHttp = await h.call(SEO, { method: 'POST', url: '/v1/leases', payload: { decisions: [aliceToken] } });
    expect(viaHttp.body.code).toBe('DECISION_MISMATCH');
    expect(await codeOf(s.acquire([aliceToken]))).toBe('DECISION_MISMATCH');
    const g = await s.acquire([await titleDecision(h, SEO, 37)]);
    const p = (await h.ctx.graph.current()).principal(SEO)!;
    const fresh = await generatePrincipalKeyPair();
    expect(p.kind).toBe('agent');
    await registerPrincipal(h.ctx, GOVERNANCE_ID, { id: SEO, kind: 'agent', priority_class: p.priority_class, attributes: p.attributes, keys: [{ ...fresh.publicJwk, kid: p.keys[0]!.kid } as PublicJwk] });
    // Over HTTP the old private key no longer authenticates; nor does the stream it opened.
    expect(await codeOf(client(url, SEO).request('GET', '/v1/leases'))).toBe('UNAUTHENTICATED');
    const err = await s.renew(g).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UnauthenticatedError);
    expect((err as WritApiError).detail).toMatch(/no longer has the key/);
    expect(await s.closed).toMatchObject({ code: 1008 });
  });

  it('raw: requests pipelined behind the one that found the revocation are all UNAUTHENTICATED, then 1008', async () => {
    const { h, url } = await listening();
    const raw = await rawStream(url, await h.auth(SEO));
    const t = await titleDecision(h, SEO, 32);
    await h.call(GOVERNANCE_ID, { method: 'DELETE', url: `/v1/principals/${SEO}` });
    for (let i = 1; i <= 3; i++) raw.send({ id: i, op: 'acquire', decisions: [t] });
    const replies = [await raw.next(), await raw.next(), await raw.next()];
    expect(replies.map((r) => [r.id, r.ok, r.problem?.code]).sort()).toEqual([[1, false, 'UNAUTHENTICATED'], [2, false, 'UNAUTHENTICATED'], [3, false, 'UNAUTHENTICATED']]);
    expect(await raw.closed).toMatchObject({ code: 1008 });
    expect(await leasesOf(h)).toEqual([]);
  });
});

describe('draining', () => {
  it('a request in flight is answered, a new one is OVERLOADED, then the socket closes with 1001', async () => {
    const { h, url } = await listening();
    const alice = await leaseOk(h, ALICE, [await titleDecision(h, ALICE, 41)]);
    const s = await openStream(url, SEO);
    const waiting = s.acquire([await titleDecision(h, SEO, 41)], { waitMs: 30_000, ttlMs: 10_000 });
    const waitingOutcome = waiting.then((g) => ({ ok: g }), (e: unknown) => ({ err: e }));
    // Queued: the wait queue has it.
    await untilQueued(h);
    const other = await titleDecision(h, SEO, 42);
    const drained = h.app.writDrain.drain(5_000);
    const refused = await s.acquire([other]).catch((e: unknown) => e);
    expect(refused).toMatchObject({ code: 'OVERLOADED', status: 503 });
    expect((refused as WritApiError).retryAfterMs).toBeGreaterThan(0);
    // Still open while the queued one is in flight.
    let closedYet = false;
    void s.closed.then(() => (closedYet = true));
    await new Promise((r) => setTimeout(r, 100));
    expect(closedYet).toBe(false);
    // The holder lets go (through the service: HTTP is draining too); the waiter is granted and answered.
    await h.ctx.leases.release(alice.lease_id, alice.token);
    const outcome = await waitingOutcome;
    expect(outcome).toMatchObject({ ok: { holder: SEO } });
    expect(await s.closed).toMatchObject({ code: 1001 });
    expect(await drained).toEqual({ drained: true, inflight: 0 });
  });

  it('a queued wait told to stop (serve\'s stopWaiting) is answered OVERLOADED, not left to the close', async () => {
    const { h, s, waiting } = await queuedBehindAlice(43);
    const drained = h.app.writDrain.drain(5_000);
    h.ctx.leases.stopWaiting();
    const e = await waiting;
    expect(e).not.toBeInstanceOf(LeaseStreamClosedError);
    expect(e).toMatchObject({ code: 'OVERLOADED' });
    expect(await s.closed).toMatchObject({ code: 1001 });
    expect((await drained).drained).toBe(true);
  });

  it('an idle stream closes with 1001 at once; a call pending at a close Writ never answered rejects with LeaseStreamClosedError', async () => {
    const { h, url } = await listening();
    const idle = await openStream(url, SEO);
    const busy = await openStream(url, ALICE);
    const t = await titleDecision(h, SEO, 44);
    const drained = h.app.writDrain.drain(5_000);
    expect(await idle.closed).toMatchObject({ code: 1001 });
    expect(await busy.closed).toMatchObject({ code: 1001 });
    expect(await drained).toEqual({ drained: true, inflight: 0 });
    const late = await idle.acquire([t]).catch((e: unknown) => e);
    expect(late).toBeInstanceOf(LeaseStreamClosedError);
    expect(await openServerSockets(h)).toBe(0);
    expect(await closesWithin(h, 3_000)).toBe(true);
  });

  /** An upgrade request over a raw socket (what `ws` would refuse, or a client that goes away). */
  const rawUpgrade = async (url: string, authorization: string, key: string | null) => {
    const socket = connect(Number(new URL(url).port), '127.0.0.1');
    await once(socket, 'connect');
    socket.write(`GET /v1/leases/stream HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n${key === null ? '' : `Sec-WebSocket-Key: ${key}\r\n`}Authorization: ${authorization}\r\n\r\n`);
    return socket;
  };

  it('an upgrade that never becomes a stream stops counting for the drain: a handshake ws refuses, a client gone during the checks', async () => {
    // Found by review: the upgrade request counted until the stream opened, for ever if it never did, and
    // every later drain waited out its timeout.
    let slow = false;
    const { h, url } = await listening({ sync: (fd, done) => setTimeout(() => fdatasync(fd, done), slow ? 300 : 0) });
    const badKey = await rawUpgrade(url, (await h.auth(SEO)).authorization!, null);
    let answer = '';
    badKey.on('data', (d) => (answer += String(d)));
    await once(badKey, 'close');
    expect(answer).toMatch(/^HTTP\/1\.1 400/);
    slow = true; // the assertion's spend now takes 300 ms: the client hangs up meanwhile
    const gone = await rawUpgrade(url, (await h.auth(SEO)).authorization!, 'dGhlIHNhbXBsZSBub25jZQ==');
    await new Promise((r) => setTimeout(r, 100));
    gone.destroy();
    // It stops counting once its checks end, not at a drain's timeout. When they end is the spend's sync: 300 ms
    // here, plus the disk's own under a full suite, or behind another sync queued before it (CI once took over 500 ms).
    await expect.poll(() => h.app.writDrain.inflight(), { timeout: 5_000, interval: 50 }).toBe(0);
    slow = false;
    expect(await h.app.writDrain.drain(1_000)).toEqual({ drained: true, inflight: 0 });
  });

  it('a client that resets the connection while its upgrade is checked is not counted against its principal\'s streams', async () => {
    // Found by review: the count was taken after the client had gone, and its socket's close had fired already.
    let slow = false;
    const { h, url } = await listening({ config: { maxLeaseStreamsPerPrincipal: 1 }, sync: (fd, done) => setTimeout(() => fdatasync(fd, done), slow ? 300 : 0) });
    slow = true; // the assertion's spend takes 300 ms: the client resets meanwhile
    const gone = await rawUpgrade(url, (await h.auth(SEO)).authorization!, 'dGhlIHNhbXBsZSBub25jZQ==');
    await new Promise((r) => setTimeout(r, 100));
    gone.resetAndDestroy();
    await expect.poll(() => h.app.writDrain.inflight(), { timeout: 5_000, interval: 50 }).toBe(0); // its checks ended
    slow = false;
    await openStream(url, SEO); // its one place is free
    expect(h.app.writDrain.inflight()).toBe(0);
  });

  it('a stream that opens while app.close() waits takes no request either', async () => {
    // Found by review: close() drained only the streams open when it was called.
    let slow = false;
    const { h, url } = await listening({ sync: (fd, done) => setTimeout(() => fdatasync(fd, done), slow ? 300 : 0) });
    const { s, waiting } = await queuedBehindAliceOn(h, url, 62);
    const other = await titleDecision(h, SEO, 63);
    slow = true; // the late stream's opening spend takes 300 ms
    const late = client(url, SEO).openLeaseStream();
    await new Promise((r) => setTimeout(r, 50));
    const closing = h.app.close();
    const s2 = await late;
    opened.push(s2);
    slow = false;
    // It is closed at once (nothing in flight on it), or refuses: never granted.
    const refused = await s2.acquire([other]).catch((e: unknown) => e);
    expect(String(refused instanceof LeaseStreamClosedError ? refused.closeCode : (refused as WritApiError).code)).toMatch(/^(1001|OVERLOADED)$/);
    h.ctx.leases.stopWaiting();
    expect(await waiting).toMatchObject({ code: 'OVERLOADED' });
    await closing;
    expect(await s.closed).toMatchObject({ code: 1001 });
    expect(await s2.closed).toMatchObject({ code: 1001 });
  });

  it('app.close() lets a request in flight finish and answers it before the stream closes', async () => {
    // Found by review: close() closed every stream at once, and the store could close under a request.
    const { h, url } = await listening();
    const alice = await leaseOk(h, ALICE, [await titleDecision(h, ALICE, 46)]);
    const s = await openStream(url, SEO);
    const other = await titleDecision(h, SEO, 47);
    const waiting = s.acquire([await titleDecision(h, SEO, 46)], { waitMs: 5_000 }).catch((e: unknown) => e);
    await untilQueued(h);
    let closed = false;
    const closing = h.app.close().then(() => (closed = true));
    expect(await codeOf(s.acquire([other]))).toBe('OVERLOADED');
    await new Promise((r) => setTimeout(r, 100));
    expect(closed).toBe(false); // close() waits for the request in flight
    await h.ctx.leases.release(alice.lease_id, alice.token);
    expect(await waiting).toMatchObject({ holder: SEO });
    await closing;
    expect(await s.closed).toMatchObject({ code: 1001 });
  });

  // Found by this test: drainGate's onRequest hook refused the upgrade before @fastify/websocket's own
  // onRequest hook had marked the request as a WebSocket one (request.ws), so the plugin's onResponse
  // hook never destroyed the upgrade's raw socket: the 503 was sent and the server kept its half of the
  // socket open for ever, so app.close() (and `writ serve` after SIGTERM) never finished. The plugin is
  // now registered before every other hook (src/http/app.ts).
  it('a stream refused while draining is OVERLOADED and leaves no socket open (app.close() finishes)', async () => {
    const { h, url } = await listening();
    await h.app.writDrain.drain(1_000);
    const again = await client(url, SEO).openLeaseStream().catch((e: unknown) => e);
    expect(again).toMatchObject({ code: 'OVERLOADED', status: 503 });
    expect(await openServerSockets(h), 'server-side sockets left open by the refused upgrade').toBe(0);
    expect(await closesWithin(h, 3_000), 'app.close() finished').toBe(true);
  });

  it('a call pending when the server cuts the connection rejects with LeaseStreamClosedError carrying the close code', async () => {
    const { h, s, waiting } = await queuedBehindAlice(45);
    // The connection is cut under the wait (as a proxy or a crash would): no answer will come.
    for (const c of h.app.websocketServer.clients) c.terminate();
    const e = await waiting;
    expect(e).toBeInstanceOf(LeaseStreamClosedError);
    expect((e as LeaseStreamClosedError).closeCode).toBe(1006);
    expect((e as LeaseStreamClosedError).requestId).toBe(1);
    // A call made after the close rejects with the same code.
    const after = await s.acquire([await titleDecision(h, SEO, 48)]).catch((x: unknown) => x);
    expect(after).toMatchObject({ closeCode: 1006, requestId: null });
    h.ctx.leases.stopWaiting();
  });
});

describe('the rate limit', () => {
  it('applies per message: past the burst a request is RATE_LIMITED with retry_after_ms, and the stream stays open', async () => {
    const clock = new ManualClock(Date.now());
    const { h, url } = await listening({ clock, config: { rateLimit: { perSecond: 1, burst: 4 } } });
    // Decisions first (they take from the same bucket), then let it refill.
    const tokens = [await titleDecision(h, SEO, 51), await titleDecision(h, SEO, 52)];
    clock.advance(10_000);
    const raw = await rawStream(url, await h.auth(SEO, { now: clock.now() })); // the upgrade takes one: 3 left
    for (let i = 1; i <= 5; i++) raw.send({ id: i, op: 'acquire', decisions: [tokens[0]], ttl_ms: 5_000 });
    const replies: any[] = [];
    for (let i = 0; i < 5; i++) replies.push(await raw.next());
    replies.sort((a, b) => a.id - b.id);
    const limited = replies.filter((r) => r.problem?.code === 'RATE_LIMITED');
    expect(limited).toHaveLength(2);
    for (const r of limited) {
      expect(r.problem.status).toBe(429);
      expect(r.problem.retry_after_ms).toBeGreaterThan(0);
    }
    // The three admitted: one granted, two busy (the same key, same holder).
    expect(replies.filter((r) => r.ok)).toHaveLength(1);
    expect(replies.filter((r) => r.problem?.code === 'RESOURCE_BUSY')).toHaveLength(2);
    expect(raw.ws.readyState).toBe(WebSocket.OPEN);
    // Other principals are not limited by it; with time, the bucket refills.
    expect((await h.call(ALICE, { method: 'GET', url: '/v1/leases' })).status).toBe(200);
    clock.advance(2_000);
    raw.send({ id: 6, op: 'acquire', decisions: [tokens[1]], ttl_ms: 5_000 });
    expect(await raw.next()).toMatchObject({ id: 6, ok: true });
    // A message that cannot be read counts too: junk does not buy answers past the rate.
    clock.advance(10_000); // full again: 4
    for (let i = 0; i < 4; i++) raw.send('not json');
    raw.send('not json either');
    const junk: any[] = [];
    for (let i = 0; i < 5; i++) junk.push(await raw.next());
    expect(junk.map((r) => r.problem.code)).toEqual(['MALFORMED_REQUEST', 'MALFORMED_REQUEST', 'MALFORMED_REQUEST', 'MALFORMED_REQUEST', 'RATE_LIMITED']);
  });

  it('bounds the streams one principal has open (WRIT_LEASE_STREAMS_PER_PRINCIPAL): one more upgrade is RATE_LIMITED; closing one frees its place; others are not counted', async () => {
    const { url } = await listening({ config: { maxLeaseStreamsPerPrincipal: 2 } });
    const first = await openStream(url, SEO);
    await openStream(url, SEO);
    const third = await client(url, SEO).openLeaseStream().catch((e: unknown) => e);
    expect(third).toMatchObject({ code: 'RATE_LIMITED', status: 429 });
    expect((third as WritApiError).detail).toMatch(/2 lease streams open/);
    expect((third as WritApiError).retryAfterMs).toBeGreaterThan(0);
    await openStream(url, ALICE); // another principal has places of its own
    await first.close();
    // Its place is free once the server sees the socket close (at once here; a loaded machine gets slack).
    await expect.poll(() => openStream(url, SEO).then(() => 'opened', (e: WritApiError) => e.code), { timeout: 5_000, interval: 50 }).toBe('opened');
  });

  it('pings every WRIT_LEASE_STREAM_PING_MS: a peer that answers keeps its stream; one that answers none is cut off after two intervals without a pong, and its place is freed', async () => {
    const { h, url } = await listening({ config: { leaseStreamPingMs: 150, maxLeaseStreamsPerPrincipal: 1 } });
    const live = await rawStream(url, await h.auth(SEO));
    let pings = 0;
    live.ws.on('ping', () => (pings += 1));
    await new Promise((r) => setTimeout(r, 800));
    expect(pings).toBeGreaterThanOrEqual(3);
    live.send({ id: 1, op: 'release', lease_id: 'no-such-lease', token: 'no-such-token' });
    expect(await live.next()).toMatchObject({ id: 1, ok: false });
    live.ws.close();
    await live.closed;

    // A silent peer: its socket is no longer read, so no ping reaches ws and no pong goes back.
    const silent = await rawStream(url, await h.auth(SEO));
    const paused = Date.now();
    (silent.ws as unknown as { _socket: Socket })._socket.pause();
    // Its place is taken (the limit is 1) until the server cuts it off.
    let next: Raw | undefined;
    while (!next) {
      next = await rawStream(url, await h.auth(SEO)).catch(() => undefined);
      if (!next) {
        expect(Date.now() - paused, 'the silent peer was not cut off within 3 s').toBeLessThan(3_000);
        await new Promise((r) => setTimeout(r, 25));
      }
    }
    // Not before two intervals passed without a pong (loaded CI gets slack above).
    expect(Date.now() - paused).toBeGreaterThanOrEqual(250);
    next.send({ id: 2, op: 'release', lease_id: 'no-such-lease', token: 'no-such-token' });
    expect(await next.next()).toMatchObject({ id: 2, ok: false });
    (silent.ws as unknown as { _socket: Socket })._socket.resume();
    expect((await silent.closed).code).toBe(1006); // cut, not closed with a close frame
  });

  it('WRIT_LEASE_STREAM_PING_MS is 30 s by default, at least 100 ms, and no longer than Node\'s longest timer', () => {
    expect(loadDefaults().leaseStreamPingMs).toBe(30_000);
    expect(loadConfig({}, { WRIT_LEASE_STREAM_PING_MS: '5000' }).leaseStreamPingMs).toBe(5_000);
    expect(() => loadConfig({}, { WRIT_LEASE_STREAM_PING_MS: '50' })).toThrow(/WRIT_LEASE_STREAM_PING_MS must be between 100 and 2147483647/);
    expect(() => loadConfig({}, { WRIT_LEASE_STREAM_PING_MS: '2147483648' })).toThrow(/WRIT_LEASE_STREAM_PING_MS must be between/);
    expect(() => loadConfig({}, { WRIT_LEASE_STREAM_PING_MS: 'soon' })).toThrow(/non-negative integer/);
  });

  it('an upgrade refused for want of credentials leaves no socket open (so does one refused earlier, below)', async () => {
    const { h, url } = await listening();
    expect(await refusedUpgrade(url, {})).toMatchObject({ status: 401 });
    expect(await openServerSockets(h)).toBe(0);
    expect(await closesWithin(h, 3_000)).toBe(true);
  });

  // Found by this test, same cause as the draining one: the rate limiter's onRequest peek refused the
  // upgrade before request.ws was set, and each refused attempt leaked one server socket.
  it('an upgrade refused RATE_LIMITED is a 429 with retry_after_ms and leaves no socket open (app.close() finishes)', async () => {
    const clock = new ManualClock(Date.now());
    const { h, url } = await listening({ clock, config: { rateLimit: { perSecond: 1, burst: 1 } } });
    const first = await rawStream(url, await h.auth(SEO, { now: clock.now() }));
    first.ws.terminate();
    const refused = await refusedUpgrade(url, await h.auth(SEO, { now: clock.now() }));
    expect(refused).toMatchObject({ status: 429, body: { code: 'RATE_LIMITED' } });
    expect(refused.body.retry_after_ms).toBeGreaterThan(0);
    expect(await client(url, SEO).openLeaseStream().catch((e: unknown) => e)).toMatchObject({ code: 'RATE_LIMITED' });
    expect(await openServerSockets(h), 'server-side sockets left open by the refused upgrades').toBe(0);
    expect(await closesWithin(h, 3_000), 'app.close() finished').toBe(true);
  });
});
