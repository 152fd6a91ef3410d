import { SignJWT, importJWK } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCallerAssertion } from '../../src/sdk/assertion.js';
import { fixtureKey, startHarness, type Harness } from '../support/harness.js';

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => h?.close());

const decisionBody = { action: 'update_post', resource: 'wp:post:1', environment: 'production', fields: ['title'] };
const post = (headers: Record<string, string>, payload: unknown = decisionBody) => h.app.inject({ method: 'POST', url: '/v1/decisions', headers, payload: payload as object });

async function expect401(headers: Record<string, string>, detail: RegExp) {
  const r = await post(headers);
  expect(r.statusCode).toBe(401);
  const body = r.json();
  expect(body.code).toBe('UNAUTHENTICATED');
  expect(body.detail).toMatch(detail);
}

describe('callers authenticate with a short-lived assertion signed by their own key', () => {
  it('a valid assertion works', async () => {
    const r = await post(await h.auth('seo-agent-7'));
    expect(r.statusCode).toBe(200);
  });
  it('missing header → 401', async () => expect401({}, /missing/i));
  it('malformed token → 401', async () => expect401({ authorization: 'Bearer not.a.jwt' }, /malformed|invalid/i));
  it('wrong scheme → 401', async () => expect401({ authorization: 'Basic abc' }, /bearer|missing|malformed/i));
  it('expired assertion → 401', async () => {
    const token = await createCallerAssertion({ principal: 'seo-agent-7', privateJwk: fixtureKey('seo-agent-7'), now: h.clock.now() - 120_000, ttlSeconds: 60 });
    await expect401({ authorization: `Bearer ${token}` }, /expired/i);
  });
  it('replayed assertion → 401 the second time', async () => {
    const headers = await h.auth('seo-agent-7');
    expect((await post(headers)).statusCode).toBe(200);
    await expect401(headers, /replay|already/i);
  });
  it('signed with another principal\'s key (foreign key) → 401', async () => {
    const impostorKey = { ...fixtureKey('content-agent-3'), kid: 'seo-agent-7-k1' };
    const token = await createCallerAssertion({ principal: 'seo-agent-7', privateJwk: impostorKey, now: h.clock.now() });
    await expect401({ authorization: `Bearer ${token}` }, /signature/i);
  });
  it('a kid that belongs to another principal → 401', async () => {
    const token = await createCallerAssertion({ principal: 'seo-agent-7', privateJwk: fixtureKey('content-agent-3'), now: h.clock.now() });
    await expect401({ authorization: `Bearer ${token}` }, /kid|key/i);
  });
  it('an unregistered principal → 401', async () => {
    const token = await createCallerAssertion({ principal: 'impostor-agent', privateJwk: fixtureKey('impostor-agent'), now: h.clock.now() });
    await expect401({ authorization: `Bearer ${token}` }, /unknown principal|not registered|no principal/i);
  });
  it('a lifetime longer than 5 minutes → 401', async () => {
    const token = await createCallerAssertion({ principal: 'seo-agent-7', privateJwk: fixtureKey('seo-agent-7'), now: h.clock.now(), ttlSeconds: 3600 });
    await expect401({ authorization: `Bearer ${token}` }, /lifetime|too long|5 minutes|300/i);
  });
  it('iss different from sub → 401', async () => {
    const jwk = fixtureKey('seo-agent-7');
    const key = await importJWK(jwk, 'EdDSA');
    const iat = Math.floor(h.clock.now() / 1000);
    const token = await new SignJWT({}).setProtectedHeader({ alg: 'EdDSA', kid: jwk.kid! }).setIssuer('seo-agent-7').setSubject('editor-alice')
      .setAudience('writ').setIssuedAt(iat).setExpirationTime(iat + 60).setJti(crypto.randomUUID()).sign(key);
    await expect401({ authorization: `Bearer ${token}` }, /iss|sub/i);
  });
});

describe('no one can ask for a decision as another principal', () => {
  it('a decision request cannot name another principal', async () => {
    const r = await post(await h.auth('seo-agent-7'), { ...decisionBody, principal: 'editor-alice' });
    expect(r.statusCode).toBe(400);
    expect(r.json().code).toBe('MALFORMED_REQUEST');
  });
  it('the decision is always for the authenticated caller', async () => {
    const r = await post(await h.auth('content-agent-3'), decisionBody);
    expect(r.json().principal).toBe('content-agent-3');
    expect(r.json().allow).toBe(false);
  });
  it('explain for another principal is only for governance', async () => {
    const r = await h.app.inject({ method: 'POST', url: '/v1/explain', headers: await h.auth('seo-agent-7'), payload: { ...decisionBody, principal: 'editor-alice' } });
    expect(r.statusCode).toBe(403);
    expect(r.json().code).toBe('FORBIDDEN');
    const ok = await h.app.inject({ method: 'POST', url: '/v1/explain', headers: await h.auth('governance'), payload: { ...decisionBody, principal: 'editor-alice' } });
    expect(ok.statusCode).toBe(200);
    expect(ok.json().allow).toBe(true);
  });
});
