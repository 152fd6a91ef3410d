import { createHmac, createPublicKey, diffieHellman, generateKeyPairSync } from 'node:crypto';
import { describe, expect, it, vi } from 'vitest';
import { CallerSessionInvalidError, WritClient, WritApiError, generatePrincipalKeyPair } from '../../src/sdk/index.js';
import { callerSessionKey } from '../../src/wire/caller-session.js';

/**
 * The SDK's caller sessions against a fake Writ (a fetch stub that plays the protocol's server side):
 * when it opens a session, how it signs, renews, re-opens and falls back. The real server is in
 * caller-sessions.test.ts.
 */

interface Seen { method: string; path: string; alg: string; session: string | null; jti: string }

function fakeWrit(behaviour: {
  /** The status of POST /v1/sessions (201 by default) and its problem code. */
  open?: () => { status: number; code?: string } | null;
  /** A request signed with a session: answer this refusal instead (once per call of the function). */
  refuse?: (seen: Seen) => { status: number; code: string } | null;
  ttlMs?: number;
  openDelayMs?: number;
  /** Awaited by POST /v1/sessions before it answers (a probe held pending). */
  openWait?: () => Promise<void>;
} = {}) {
  const keys = new Map<string, Buffer>();
  const seen: Seen[] = [];
  let opens = 0;
  const problem = (status: number, code: string) => new Response(JSON.stringify({ code, detail: code.toLowerCase() }), { status, headers: { 'content-type': 'application/problem+json' } });
  const fetchStub: typeof fetch = async (input, init) => {
    const url = new URL(String(input));
    const method = init?.method ?? 'GET';
    const bearer = String((init?.headers as Record<string, string>).authorization).replace(/^Bearer /, '');
    const [h, p, mac] = bearer.split('.');
    const header = JSON.parse(Buffer.from(h!, 'base64url').toString()) as { alg: string; kid: string };
    const claims = JSON.parse(Buffer.from(p!, 'base64url').toString()) as Record<string, unknown>;
    if (url.pathname === '/v1/sessions') {
      opens++;
      expect(header.alg).toBe('EdDSA');
      if (behaviour.openDelayMs) await new Promise((r) => setTimeout(r, behaviour.openDelayMs));
      if (behaviour.openWait) await behaviour.openWait();
      const refusal = behaviour.open?.();
      if (refusal) return refusal.code ? problem(refusal.status, refusal.code) : new Response('{"message":"Route POST:/v1/sessions not found"}', { status: refusal.status });
      const body = JSON.parse(String(init!.body)) as { public_key: { x: string }; ttl_ms?: number };
      // The opening assertion is bound to the body's key and to this request (README "Caller sessions" step 1).
      expect(claims).toMatchObject({ cnf: { jwk: { kty: 'OKP', crv: 'X25519', x: body.public_key.x } }, htm: 'POST', htu: url.pathname });
      const server = generateKeyPairSync('x25519');
      const serverX = server.publicKey.export({ format: 'jwk' }).x!;
      const shared = diffieHellman({ privateKey: server.privateKey, publicKey: createPublicKey({ key: { kty: 'OKP', crv: 'X25519', x: body.public_key.x }, format: 'jwk' }) });
      const token = `ws1.fake.${opens}`;
      keys.set(token, callerSessionKey(shared, body.public_key.x, serverX));
      const ttl = body.ttl_ms ?? behaviour.ttlMs ?? 3_600_000;
      return new Response(JSON.stringify({ session: token, public_key: { kty: 'OKP', crv: 'X25519', x: serverX }, principal: claims.sub, kid: header.kid, expires_at: new Date(Date.now() + ttl).toISOString() }), { status: 201 });
    }
    const s: Seen = { method, path: url.pathname, alg: header.alg, session: header.alg === 'HS256' ? header.kid : null, jti: String(claims.jti) };
    seen.push(s);
    if (header.alg === 'HS256') {
      const k = keys.get(header.kid);
      expect(k, 'a session this fake opened').toBeDefined();
      expect(createHmac('sha256', k!).update(`${h}.${p}`).digest('base64url')).toBe(mac);
      expect(claims).toMatchObject({ htm: method, htu: url.pathname, aud: 'writ' });
      const refusal = behaviour.refuse?.(s);
      if (refusal) return problem(refusal.status, refusal.code);
    }
    return new Response(JSON.stringify({ allow: true, path: url.pathname }), { status: 200 });
  };
  return { fetch: fetchStub, seen, opens: () => opens };
}

async function clientOn(fake: ReturnType<typeof fakeWrit>, sessions: boolean | { ttlMs?: number } = true) {
  const { privateJwk } = await generatePrincipalKeyPair('k-1');
  return new WritClient({ baseUrl: 'http://writ.test', principal: 'seo-agent-7', privateJwk, fetch: fake.fetch, sessions });
}

describe('WritClient with sessions (against a fake Writ)', () => {
  it('opens one session for many concurrent calls and signs each with HS256, a fresh jti, its method and path', async () => {
    const fake = fakeWrit();
    const client = await clientOn(fake);
    await Promise.all(Array.from({ length: 20 }, (_, i) => client.request(i % 2 ? 'GET' : 'DELETE', `/v1/leases/l-${i}?x=1`)));
    expect(fake.opens()).toBe(1);
    expect(fake.seen.every((s) => s.alg === 'HS256' && s.session === 'ws1.fake.1')).toBe(true);
    expect(new Set(fake.seen.map((s) => s.jti)).size).toBe(20);
  });

  it('refuses a session ttlMs Writ would refuse (below 1 s, or not whole ms) when the client is made', async () => {
    const { privateJwk } = await generatePrincipalKeyPair('k-1');
    for (const ttlMs of [999, 1500.5, Number.NaN]) {
      expect(() => new WritClient({ baseUrl: 'http://writ.test', principal: 'p', privateJwk, sessions: { ttlMs } })).toThrow(/sessions.ttlMs/);
    }
  });

  it('is on by default; sessions: false signs an assertion for every request and opens none', async () => {
    const { privateJwk } = await generatePrincipalKeyPair('k-1');
    const fake = fakeWrit();
    const byDefault = new WritClient({ baseUrl: 'http://writ.test', principal: 'seo-agent-7', privateJwk, fetch: fake.fetch });
    await byDefault.request('GET', '/v1/leases');
    expect(fake.opens()).toBe(1);
    expect(fake.seen[0]!.alg).toBe('HS256');
    const off = fakeWrit();
    const client = await clientOn(off, false);
    await client.request('GET', '/v1/leases');
    expect(off.opens()).toBe(0);
    expect(off.seen[0]!.alg).toBe('EdDSA');
  });

  it('a session Writ no longer knows (CALLER_SESSION_INVALID): opens a new one and sends that request once more', async () => {
    let refusals = 0;
    const fake = fakeWrit({ refuse: (s) => (s.session === 'ws1.fake.1' ? (refusals++, { status: 401, code: 'CALLER_SESSION_INVALID' }) : null) });
    const client = await clientOn(fake);
    await expect(client.request('GET', '/v1/a')).resolves.toMatchObject({ path: '/v1/a' });
    expect(fake.opens()).toBe(2);
    expect(fake.seen.map((s) => s.session)).toEqual(['ws1.fake.1', 'ws1.fake.2']);
    // Concurrent refusals of the one old session open one new session between them.
    const fake2 = fakeWrit({ refuse: (s) => (s.session === 'ws1.fake.1' ? { status: 401, code: 'CALLER_SESSION_INVALID' } : null) });
    const client2 = await clientOn(fake2);
    await client2.request('GET', '/v1/warm');
    // (the warm-up was retried once: opens 2 now)
    await Promise.all(Array.from({ length: 10 }, () => client2.request('GET', '/v1/b')));
    expect(fake2.opens()).toBe(2);
    expect(refusals).toBe(1);
  });

  it('refused again after re-opening: the error, not a loop (one retry per request)', async () => {
    const fake = fakeWrit({ refuse: () => ({ status: 401, code: 'CALLER_SESSION_INVALID' }) });
    const client = await clientOn(fake);
    const error = await client.request('GET', '/v1/a').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CallerSessionInvalidError);
    expect(fake.seen).toHaveLength(2);
    expect(fake.opens()).toBe(2);
  });

  it('an open refused (a revoked principal: UNAUTHENTICATED) is that call\'s error; nothing is retried in a loop', async () => {
    const fake = fakeWrit({ open: () => ({ status: 401, code: 'UNAUTHENTICATED' }) });
    const client = await clientOn(fake);
    const error = await client.request('GET', '/v1/a').catch((e: unknown) => e);
    expect((error as WritApiError).code).toBe('UNAUTHENTICATED');
    expect(fake.opens()).toBe(1);
    expect(fake.seen).toHaveLength(0);
  });

  it('a Writ without sessions (404) is not asked again before the back-off: assertions meanwhile', async () => {
    const fake = fakeWrit({ open: () => ({ status: 404 }) });
    const client = await clientOn(fake);
    await Promise.all(Array.from({ length: 5 }, () => client.request('GET', '/v1/a')));
    await client.request('GET', '/v1/b');
    expect(fake.opens()).toBe(1);
    expect(fake.seen.map((s) => s.alg)).toEqual(Array(6).fill('EdDSA'));
  });

  it('sessions turned off after the open (CALLER_SESSIONS_DISABLED on a request): that request once more with an assertion, assertions until the back-off', async () => {
    const fake = fakeWrit({ refuse: () => ({ status: 403, code: 'CALLER_SESSIONS_DISABLED' }) });
    const client = await clientOn(fake);
    await client.request('GET', '/v1/a');
    await client.request('GET', '/v1/b');
    expect(fake.seen.map((s) => s.alg)).toEqual(['HS256', 'EdDSA', 'EdDSA']);
    expect(fake.opens()).toBe(1);
  });

  it('opens the next session in the background when a fifth of its life is left, one open at a time', async () => {
    // Only the clock is faked (the open's delay is a real timer).
    vi.useFakeTimers({ toFake: ['Date'] });
    try {
      const fake = fakeWrit({ openDelayMs: 50 });
      const client = await clientOn(fake, { ttlMs: 10_000 });
      await client.request('GET', '/v1/a');
      expect(fake.opens()).toBe(1);
      vi.setSystemTime(Date.now() + 7_000);
      // Three tenths left: still this session, no new open.
      await client.request('GET', '/v1/b');
      expect(fake.opens()).toBe(1);
      vi.setSystemTime(Date.now() + 1_500);
      // Less than a fifth left: these calls go with the current session while the next one opens (once).
      await Promise.all([client.request('GET', '/v1/c'), client.request('GET', '/v1/d')]);
      expect(fake.seen.map((s) => s.session)).toEqual(['ws1.fake.1', 'ws1.fake.1', 'ws1.fake.1', 'ws1.fake.1']);
      await new Promise((r) => setTimeout(r, 150));
      expect(fake.opens()).toBe(2);
      await client.request('GET', '/v1/e');
      expect(fake.seen.at(-1)!.session).toBe('ws1.fake.2');
      // Past the old session's end with no new one ready: the call waits for the open.
      vi.setSystemTime(Date.now() + 10_000);
      await client.request('GET', '/v1/f');
      expect(fake.opens()).toBe(3);
      expect(fake.seen.at(-1)!.session).toBe('ws1.fake.3');
    } finally {
      vi.useRealTimers();
    }
  });

  describe('a Writ that had no sessions is asked again after a back-off (5 min, doubling to 1 h, reset on success)', () => {
    const MIN = 60_000;
    /** Lets a probe sent in the background finish (the fake answers on the next turns of the event loop). */
    const settle = () => new Promise((r) => setTimeout(r, 20));

    it('404, then (upgraded) 201: assertions until the probe after 5 min, sessions from then on', async () => {
      vi.useFakeTimers({ toFake: ['Date'] });
      try {
        let upgraded = false;
        const fake = fakeWrit({ open: () => (upgraded ? null : { status: 404 }) });
        const client = await clientOn(fake);
        await client.request('GET', '/v1/a');
        expect(fake.opens()).toBe(1);
        upgraded = true;
        vi.setSystemTime(Date.now() + 4 * MIN);
        await client.request('GET', '/v1/b');
        await settle();
        expect(fake.opens()).toBe(1);
        vi.setSystemTime(Date.now() + MIN + 1);
        // The probe goes in the background: this request is signed with an assertion, not held for it.
        await client.request('GET', '/v1/c');
        await settle();
        expect(fake.opens()).toBe(2);
        await client.request('GET', '/v1/d');
        await client.request('GET', '/v1/e');
        expect(fake.seen.map((s) => s.alg)).toEqual(['EdDSA', 'EdDSA', 'EdDSA', 'HS256', 'HS256']);
        expect(fake.opens()).toBe(2);
      } finally {
        vi.useRealTimers();
      }
    });

    it('repeated 404s: probes 5, 10, 20, 40, 60, 60 min apart; a success resets the back-off', async () => {
      vi.useFakeTimers({ toFake: ['Date'] });
      try {
        let upgraded = false;
        const openedAt: number[] = [];
        const fake = fakeWrit({ open: () => (openedAt.push(Date.now()), upgraded ? null : { status: 404 }) });
        const client = await clientOn(fake);
        const start = Date.now();
        // A request every 5 minutes (the probes fall on these), for four hours.
        for (let m = 0; m <= 240; m += 5) {
          vi.setSystemTime(start + m * MIN);
          await client.request('GET', '/v1/a');
          await settle();
        }
        const gaps = openedAt.slice(1).map((t, i) => (t - openedAt[i]!) / MIN);
        expect(gaps).toEqual([5, 10, 20, 40, 60, 60]);
        expect(fake.seen.every((s) => s.alg === 'EdDSA')).toBe(true);
        // Upgraded: the next probe opens a session; turned off again later, the back-off starts over at 5 min.
        upgraded = true;
        vi.setSystemTime(openedAt.at(-1)! + 60 * MIN);
        await client.request('GET', '/v1/b');
        await settle();
        await client.request('GET', '/v1/c');
        expect(fake.seen.at(-1)!.alg).toBe('HS256');
        const opens = fake.opens();
        upgraded = false;
        // The session's renewal (a fifth of its life left) finds sessions off: assertions, asked again 5 min later.
        vi.setSystemTime(Date.now() + 50 * MIN);
        await client.request('GET', '/v1/d');
        await settle();
        expect(fake.opens()).toBe(opens + 1);
        vi.setSystemTime(Date.now() + 4 * MIN);
        await client.request('GET', '/v1/e');
        await settle();
        expect(fake.seen.at(-1)!.alg).toBe('EdDSA');
        expect(fake.opens()).toBe(opens + 1);
        vi.setSystemTime(Date.now() + MIN);
        await client.request('GET', '/v1/f');
        await settle();
        expect(fake.opens()).toBe(opens + 2);
        expect(openedAt.at(-1)! - openedAt.at(-2)!).toBe(5 * MIN);
      } finally {
        vi.useRealTimers();
      }
    });

    it('many calls while a probe is pending: one probe, and none of them waits for it', async () => {
      vi.useFakeTimers({ toFake: ['Date'] });
      try {
        let upgraded = false;
        let answer: () => void = () => undefined;
        const held = new Promise<void>((r) => (answer = r));
        const fake = fakeWrit({ open: () => (upgraded ? null : { status: 404 }), openWait: () => (upgraded ? held : Promise.resolve()) });
        const client = await clientOn(fake);
        await client.request('GET', '/v1/a');
        upgraded = true;
        vi.setSystemTime(Date.now() + 5 * MIN);
        // The probe's answer is held: all 20 calls are answered meanwhile, with assertions.
        await Promise.all(Array.from({ length: 20 }, () => client.request('GET', '/v1/b')));
        await settle();
        await Promise.all(Array.from({ length: 5 }, () => client.request('GET', '/v1/c')));
        expect(fake.opens()).toBe(2);
        expect(fake.seen.map((s) => s.alg)).toEqual(Array(26).fill('EdDSA'));
        answer();
        await settle();
        await client.request('GET', '/v1/d');
        expect(fake.seen.at(-1)!.alg).toBe('HS256');
        expect(fake.opens()).toBe(2);
      } finally {
        vi.useRealTimers();
      }
    });

    it('CALLER_SESSIONS_DISABLED on a request (turned off, later on again): assertions, then a session after 5 min', async () => {
      vi.useFakeTimers({ toFake: ['Date'] });
      try {
        let off = true;
        const fake = fakeWrit({ refuse: () => (off ? { status: 403, code: 'CALLER_SESSIONS_DISABLED' } : null) });
        const client = await clientOn(fake);
        await Promise.all([client.request('GET', '/v1/a'), client.request('GET', '/v1/b')]);
        expect(fake.opens()).toBe(1);
        off = false;
        vi.setSystemTime(Date.now() + 5 * MIN - 1);
        await client.request('GET', '/v1/c');
        await settle();
        expect(fake.opens()).toBe(1);
        vi.setSystemTime(Date.now() + 1);
        await client.request('GET', '/v1/d');
        await settle();
        expect(fake.opens()).toBe(2);
        await client.request('GET', '/v1/e');
        expect(fake.seen.at(-1)).toMatchObject({ alg: 'HS256', session: 'ws1.fake.2' });
      } finally {
        vi.useRealTimers();
      }
    });
  });
});
