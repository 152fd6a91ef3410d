import { createHmac } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { JWK } from 'jose';
import { describe, expect, it } from 'vitest';
import { createCallerAssertion } from '../../src/wire/assertions.js';
import { callerSessionKey, createSessionRequestToken, sessionKeyExchange, sessionOpeningClaims } from '../../src/wire/caller-session.js';
import { VECTOR } from '../support/caller-session-vector.js';

// The protocol's test vector (README, "Caller sessions").
const { CLIENT_D, SERVER_D, CLIENT_X, SERVER_X, SHARED, K, TOKEN } = VECTOR;

describe('caller sessions, the client side (test vector)', () => {
  it('derives the public keys, and K from the shared secret by HKDF-SHA256 with the protocol\'s info', () => {
    const client = sessionKeyExchange(CLIENT_D);
    const server = sessionKeyExchange(SERVER_D);
    expect(client.x).toBe(CLIENT_X);
    expect(server.x).toBe(SERVER_X);
    expect(callerSessionKey(Buffer.from(SHARED, 'base64url'), CLIENT_X, SERVER_X).toString('base64url')).toBe(K);
    expect(client.agree(SERVER_X).export().toString('base64url')).toBe(K);
  });

  it('signs the vector\'s request token (HS256 over K; method upper-cased, query left out of htu)', () => {
    const key = sessionKeyExchange(CLIENT_D).agree(SERVER_X);
    const token = createSessionRequestToken({ session: 'ws1.example-kid.AAAA', key, principal: 'seo-agent-7', method: 'post', path: '/v1/leases?ignored=1#frag', now: 1_796_000_000_000, jti: 'j-1' });
    expect(token).toBe(TOKEN);
    const [header, payload, mac] = token.split('.');
    expect(createHmac('sha256', Buffer.from(K, 'base64url')).update(`${header}.${payload}`).digest('base64url')).toBe(mac);
  });

  it('makes the vector\'s opening assertion: bound to the client key (cnf.jwk) and to POST /v1/sessions (htm, htu)', async () => {
    const privateJwk = JSON.parse(readFileSync(new URL('../../fixtures/keys/seo-agent-7.jwk', import.meta.url), 'utf8')) as JWK;
    const assertion = await createCallerAssertion({ principal: 'seo-agent-7', privateJwk, now: 1_796_000_000_000, jti: 'j-0', claims: sessionOpeningClaims(CLIENT_X) });
    expect(JSON.parse(Buffer.from(assertion.split('.')[1]!, 'base64url').toString())).toEqual(JSON.parse(VECTOR.OPENING_CLAIMS));
  });

  it('makes a fresh jti and a 60 s life by default', () => {
    const key = sessionKeyExchange().agree(SERVER_X);
    const claims = (t: string) => JSON.parse(Buffer.from(t.split('.')[1]!, 'base64url').toString()) as Record<string, unknown>;
    const a = claims(createSessionRequestToken({ session: 'ws1.k.x', key, principal: 'p', method: 'GET', path: '/v1/leases' }));
    const b = claims(createSessionRequestToken({ session: 'ws1.k.x', key, principal: 'p', method: 'GET', path: '/v1/leases' }));
    expect(a.jti).not.toBe(b.jti);
    expect((a.exp as number) - (a.iat as number)).toBe(60);
    expect(a).toMatchObject({ iss: 'p', sub: 'p', aud: 'writ', htm: 'GET', htu: '/v1/leases' });
  });

  it('refuses a server public key that is not 32 bytes or is a low-order point', () => {
    const client = sessionKeyExchange();
    expect(() => client.agree(Buffer.alloc(31).toString('base64url'))).toThrow(/32 bytes/);
    // The all-zero u-coordinate is of small order: X25519 gives all zeros (or Node refuses it).
    expect(() => client.agree(Buffer.alloc(32).toString('base64url'))).toThrow(/low-order|refused/);
    // u = 1 is of order 1.
    const one = Buffer.alloc(32);
    one[0] = 1;
    expect(() => client.agree(one.toString('base64url'))).toThrow(/low-order|refused/);
  });
});

describe('the README\'s test vector', () => {
  it('is the one the tests check (every value of it appears in the "Caller sessions" section, and its MAC)', async () => {
    const { readFileSync } = await import('node:fs');
    const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
    const section = readme.slice(readme.indexOf('### Caller sessions'), readme.indexOf('### The lease stream'));
    for (const value of [CLIENT_D, SERVER_D, CLIENT_X, SERVER_X, SHARED, K, TOKEN.split('.')[2]!, VECTOR.OPENING_CLAIMS]) expect(section).toContain(value);
  });
});
