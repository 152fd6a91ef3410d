import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generatePrincipalKeyPair, UnauthenticatedError, WritClient } from '../../src/sdk/index.js';
import { fixtureKey } from '../support/harness.js';
import { startServerProcess, type ServerProcess } from '../support/server-process.js';
import { governanceOf, leasesOn } from './sdk-support.js';

/**
 * The SDK's caller sessions against a real `writ serve`: a decision and a lease pair over a session; a
 * session the server no longer knows re-opened once, transparently; a revoked principal refused, once.
 */
let server: ServerProcess;
beforeAll(async () => {
  server = await startServerProcess();
});
afterAll(async () => server?.stop());

const titleOf = (resource: string) => ({ action: 'update_post', resource, environment: 'production', fields: ['title'] });

interface Sent { method: string; path: string; scheme: 'session' | 'assertion'; status: number }

/** A client with sessions on, recording each request's method, path, how it was signed and its status. */
function sessionClient(url: string, principal: string): { client: WritClient; sent: Sent[] } {
  const sent: Sent[] = [];
  const recording: typeof fetch = async (input, init) => {
    const u = new URL(String(input));
    const bearer = String((init?.headers as Record<string, string>).authorization ?? '');
    const alg = (JSON.parse(Buffer.from(bearer.replace(/^Bearer /, '').split('.')[0]!, 'base64url').toString()) as { alg: string }).alg;
    const res = await fetch(input, init);
    sent.push({ method: init?.method ?? 'GET', path: u.pathname, scheme: alg === 'HS256' ? 'session' : 'assertion', status: res.status });
    return res;
  };
  return { client: new WritClient({ baseUrl: url, principal, privateJwk: fixtureKey(principal), fetch: recording, sessions: true }), sent };
}

describe('WritClient with sessions, against writ serve', () => {
  it('decides and takes and releases a lease over one session (one assertion, to open it)', async () => {
    const { client, sent } = sessionClient(server.url, 'seo-agent-7');
    const [d1, d2] = await Promise.all([client.decide(titleOf('wp:post:8101')), client.decide(titleOf('wp:post:8102'))]);
    expect([d1.allow, d2.allow]).toEqual([true, true]);
    const lease = await client.acquireLease([d1], { ttlMs: 5_000 });
    expect((await leasesOn(client, 'wp:post:8101#title'))[0]).toMatchObject({ state: 'HELD', leaseId: lease.lease_id });
    await client.releaseLease(lease);
    const ran = await client.withLease([d2], async ({ lease: held }) => held!.lease_id, { ttlMs: 5_000 });
    expect(ran).toMatch(/./);
    expect(sent.filter((s) => s.path === '/v1/sessions')).toEqual([{ method: 'POST', path: '/v1/sessions', scheme: 'assertion', status: 201 }]);
    const rest = sent.filter((s) => s.path !== '/v1/sessions');
    expect(rest.length).toBeGreaterThanOrEqual(7);
    expect(rest.every((s) => s.scheme === 'session' && s.status < 300)).toBe(true);
  });

  it('a path the caller left unencoded is signed as fetch sends it (htu percent-encoded): the answer is the route\'s, not 401', async () => {
    const { client, sent } = sessionClient(server.url, 'seo-agent-7');
    // No such principal: the route answers for it; a token bound to the raw path would be refused first (htu).
    const refused = await client.request('GET', '/v1/principals/no such agent é/capabilities').catch((e: unknown) => e);
    expect(refused).not.toBeInstanceOf(UnauthenticatedError);
    const last = sent.at(-1)!;
    expect(last).toMatchObject({ scheme: 'session', path: '/v1/principals/no%20such%20agent%20%C3%A9/capabilities' });
    expect(last.status).not.toBe(401);
  });

  it('a session the server no longer knows (restarted with other keys) is re-opened once, and the request sent again', async () => {
    const first = await startServerProcess();
    let second: ServerProcess | null = null;
    try {
      const { client, sent } = sessionClient(first.url, 'seo-agent-7');
      expect((await client.decide(titleOf('wp:post:8111'))).allow).toBe(true);
      const firstPort = Number(new URL(first.url).port);
      await first.stop();
      // Another deployment (its own data directory, so its own signing keys) on the same address.
      second = await startServerProcess({ port: firstPort });
      expect((await client.decide(titleOf('wp:post:8112'))).allow).toBe(true);
      expect(sent.map((s) => `${s.method} ${s.path} ${s.scheme} ${s.status}`)).toEqual([
        'POST /v1/sessions assertion 201',
        'POST /v1/decisions session 200',
        'POST /v1/decisions session 401',
        'POST /v1/sessions assertion 201',
        'POST /v1/decisions session 200',
      ]);
    } finally {
      await first.stop().catch(() => undefined);
      await second?.stop();
    }
  });

  it('a revoked principal: the session is refused, a new one cannot be opened: UNAUTHENTICATED, with no loop', async () => {
    const { client, sent } = sessionClient(server.url, 'content-agent-3');
    await client.request('GET', '/v1/leases?resource=wp%3Apost%3A8121%23title');
    await governanceOf(server).request('DELETE', '/v1/principals/content-agent-3', { reason: 'decommissioned (caller-sessions test)' });
    const refused = await client.request('GET', '/v1/leases?resource=wp%3Apost%3A8121%23title').catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(UnauthenticatedError);
    // At most: the refused request, one open (refused), nothing more.
    const after = sent.slice(2);
    expect(after.length).toBeLessThanOrEqual(2);
    expect(after.every((s) => s.status === 401)).toBe(true);
    const again = await client.request('GET', '/v1/leases?resource=wp%3Apost%3A8121%23title').catch((e: unknown) => e);
    expect(again).toBeInstanceOf(UnauthenticatedError);
  });

  it('the principal\'s key rotated: the session is re-opened once with the old key, which is refused (UNAUTHENTICATED); the new key opens one', async () => {
    const { client, sent } = sessionClient(server.url, 'editor-alice');
    await client.request('GET', '/v1/leases?resource=wp%3Apost%3A8131%23title');
    const governance = governanceOf(server);
    const { principal } = await governance.request<{ principal: { kind: string; priority_class: string; attributes: Record<string, unknown> } }>('GET', '/v1/principals/editor-alice');
    const next = await generatePrincipalKeyPair('editor-alice-2');
    await governance.request('POST', '/v1/principals', { id: 'editor-alice', kind: principal.kind, priority_class: principal.priority_class, attributes: principal.attributes, keys: [next.publicJwk] });
    const refused = await client.request('GET', '/v1/leases?resource=wp%3Apost%3A8131%23title').catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(UnauthenticatedError);
    expect(sent.slice(2).map((s) => `${s.method} ${s.path} ${s.scheme} ${s.status}`)).toEqual([
      'GET /v1/leases session 401',
      'POST /v1/sessions assertion 401',
    ]);
    const rotated = new WritClient({ baseUrl: server.url, principal: 'editor-alice', privateJwk: next.privateJwk, sessions: true });
    await expect(rotated.request('GET', '/v1/leases?resource=wp%3Apost%3A8131%23title')).resolves.toBeDefined();
  });
});
