import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createCallerAssertion } from '../../src/sdk/index.js';
import { CLI, onFreePort, requireDist, spawnListening } from '../../scripts/server-process.js';
import { createTestDatabase } from '../store/conformance/engines.js';
import { bearer, clientKeyPair, openingClaims, requestToken, sessionOf, sessionRequest, type ClientSession } from '../support/caller-session.js';
import { fixtureKey } from '../support/harness.js';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const A = 'seo-agent-7';

describe('caller sessions across two writ serve processes on one PostgreSQL, sharing a keys directory', () => {
  it('a session opened on one is accepted by the other, and its request tokens are single-use across both', { timeout: 120_000 }, async () => {
    requireDist();
    const dir = mkdtempSync(join(tmpdir(), 'writ-sessions-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const db = await createTestDatabase('writ_sessions');
    cleanups.push(db.drop);
    const env = { ...process.env, WRIT_DATABASE_URL: db.url };
    const start = (i: number) => onFreePort((port) => spawnListening(`replica ${i}`, [CLI, 'serve', '--data-dir', dir, '--port', String(port), '--no-upstream', ...(i === 0 ? ['--graph', 'graph/example.yaml'] : [])], env));
    const one = await start(0);
    cleanups.push(() => void one.proc.kill('SIGKILL'));
    const two = await start(1);
    cleanups.push(() => void two.proc.kill('SIGKILL'));
    const base = (r: { port: number }) => `http://127.0.0.1:${r.port}`;

    const pair = clientKeyPair();
    const assertion = await createCallerAssertion({ principal: A, privateJwk: fixtureKey(A), now: Date.now(), claims: openingClaims(pair.x) });
    const opened = await fetch(`${base(one)}/v1/sessions`, { method: 'POST', headers: { ...bearer(assertion), 'content-type': 'application/json' }, body: JSON.stringify(sessionRequest(pair.x)) });
    expect(opened.status).toBe(201);
    const session: ClientSession = sessionOf((await opened.json()) as Parameters<typeof sessionOf>[0], pair);

    const send = (replica: { port: number }, method: string, path: string, body?: unknown, token = requestToken(session, { method, path, now: Date.now() })) =>
      fetch(`${base(replica)}${path}`, { method, headers: { ...bearer(token), ...(body === undefined ? {} : { 'content-type': 'application/json' }) }, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });

    const decision = await send(two, 'POST', '/v1/decisions', { action: 'update_post', resource: 'wp:post:1', environment: 'production', fields: ['title'] });
    expect(decision.status).toBe(200);
    const { token: decisionToken } = (await decision.json()) as { token: string };
    const lease = await send(two, 'POST', '/v1/leases', { decisions: [decisionToken], ttl_ms: 10_000 });
    expect(lease.status).toBe(201);
    const granted = (await lease.json()) as { lease_id: string; token: string };
    const release = await send(one, 'DELETE', `/v1/leases/${granted.lease_id}`, { token: granted.token });
    expect(release.status).toBe(200);

    // A request token used on one replica is refused on the other (the jti is spent in the shared store).
    const token = requestToken(session, { method: 'GET', path: '/v1/leases', now: Date.now() });
    expect((await send(one, 'GET', '/v1/leases', undefined, token)).status).toBe(200);
    const replayed = await send(two, 'GET', '/v1/leases', undefined, token);
    expect(replayed.status).toBe(401);
    expect(((await replayed.json()) as { detail: string }).detail).toMatch(/replayed/);
  });
});
