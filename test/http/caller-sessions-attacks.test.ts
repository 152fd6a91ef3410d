import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { createCallerAssertion, generatePrincipalKeyPair } from '../../src/sdk/index.js';
import { bearer, clientKeyPair, requestToken, sessionOf, sessionRequest, type ClientSession, type RequestTokenOptions } from '../support/caller-session.js';
import { startHarness, type Harness } from '../support/harness.js';

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

function refused(r: LightMyRequestResponse, status: number, code: string, detail?: RegExp) {
  expect(r.statusCode, r.body).toBe(status);
  expect(r.json().code, r.body).toBe(code);
  if (detail) expect(r.json().detail).toMatch(detail);
}

const token = (s: ClientSession, o: Partial<RequestTokenOptions> & Pick<RequestTokenOptions, 'method' | 'path'>) => requestToken(s, { now: clock.now(), ...o });
const inject = (method: 'GET' | 'POST' | 'DELETE', url: string, t: string, payload?: object) =>
  h.app.inject({ method, url, headers: bearer(t), ...(payload === undefined ? {} : { payload }) });

/** A principal of its own with a fresh key, and a session it opened. */
async function newPrincipal(id: string) {
  const pair = await generatePrincipalKeyPair(`${id}-k1`);
  const r = await h.call('governance', { method: 'POST', url: '/v1/principals', payload: { id, kind: 'agent', keys: [pair.publicJwk] } });
  expect(r.status, r.raw).toBe(201);
  const x = clientKeyPair();
  const assertion = await createCallerAssertion({ principal: id, privateJwk: pair.privateJwk, now: clock.now() });
  const opened = await h.app.inject({ method: 'POST', url: '/v1/sessions', headers: bearer(assertion), payload: sessionRequest(x.x) });
  expect(opened.statusCode, opened.body).toBe(201);
  return { pair, session: sessionOf(opened.json(), x) };
}

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
