import { rmSync } from 'node:fs';
import { once } from 'node:events';
import pg from 'pg';
import WebSocket from 'ws';
import { afterAll, describe, expect, it } from 'vitest';
import { createCallerAssertion, WritClient } from '../../src/sdk/index.js';
import { createTestDatabase } from '../store/conformance/engines.js';
import { fixtureKey } from '../support/harness.js';
import { startServerProcess, type ServerProcess } from '../support/server-process.js';

/**
 * SIGTERM with acquisitions whose grant is still being made when the drain times out: one over
 * POST /v1/leases, one over a lease stream, each stuck in its granting transaction (this test locks the
 * table of the leases' authority records). The drain times out, Writ closes the connection and the
 * stream (1001): no answer can go out any more. Once Writ is closing its store the lock is let go, both
 * grants commit, and each is given up (released: Writ made its token) before the store closes, instead
 * of lapsing at its TTL as after a crash. Seen as a user
 * would: the server's log, and after a restart, the keys free for the next acquirer. PostgreSQL only
 * (a transaction of SQLite's cannot be held up from outside this way).
 */
const SEO = 'seo-agent-7';
const ALICE = 'editor-alice';
const cleanups: (() => Promise<void> | void)[] = [];
afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function authorized(principal: string): Promise<Record<string, string>> {
  return { authorization: `Bearer ${await createCallerAssertion({ principal, privateJwk: fixtureKey(principal) })}` };
}

async function until(what: string, ok: () => boolean | Promise<boolean>, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await ok())) {
    if (Date.now() > end) throw new Error(`${what}: not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('SIGTERM with grants in flight when the drain times out, on PostgreSQL', () => {
  it('gives the grants made after the connections closed back before the store closes: the keys are free after a restart', { timeout: 90_000 }, async () => {
    const db = await createTestDatabase('writ_sigterm_grant');
    cleanups.push(db.drop);
    let server: ServerProcess = await startServerProcess({ env: { WRIT_LOG: 'info', WRIT_DATABASE_URL: db.url, WRIT_DRAIN_TIMEOUT_MS: '300' } });
    const first = server;
    cleanups.push(() => rmSync(first.dataDir, { recursive: true, force: true }));
    cleanups.push(() => server.stop());
    const seo = new WritClient({ baseUrl: server.url, principal: SEO, privateJwk: fixtureKey(SEO) });
    const decide = async (c: WritClient, post: number) => (await c.decide({ action: 'update_post', resource: `wp:post:${post}`, environment: 'production', fields: ['title'] })).token!;
    const [httpDecision, streamDecision] = [await decide(seo, 8_901), await decide(seo, 8_902)];
    const ws = new WebSocket(`${server.url.replace(/^http/, 'ws')}/v1/leases/stream`, { headers: await authorized(SEO), perMessageDeflate: false });
    ws.on('error', () => undefined);
    await once(ws, 'open');
    const wsClosed = new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)));

    // The lease keys locked: both acquisitions wait in their transactions (for less than the store's 5 s lock_timeout).
    const locker = new pg.Client({ connectionString: db.url });
    await locker.connect();
    cleanups.push(() => locker.end());
    await locker.query('BEGIN');
    await locker.query('LOCK TABLE lease_authority IN ACCESS EXCLUSIVE MODE');
    const posted = fetch(`${server.url}/v1/leases`, {
      method: 'POST',
      headers: { ...(await authorized(SEO)), 'content-type': 'application/json' },
      body: JSON.stringify({ decisions: [httpDecision], ttl_ms: 60_000 }),
    }).then((r) => r.status, (e: unknown) => e);
    ws.send(JSON.stringify({ id: 1, op: 'acquire', decisions: [streamDecision], ttl_ms: 60_000 }));
    const waiting = async () => Number((await locker.query(`SELECT count(*) AS n FROM pg_locks WHERE NOT granted AND relation = 'lease_authority'::regclass`)).rows[0].n);
    await until('both acquisitions waiting for the lock', async () => (await waiting()) === 2);

    first.proc.kill('SIGTERM');
    await until('the drain to time out', () => first.log().includes('drain timed out'));
    // Nothing can be answered now: the connection and the stream are closed.
    expect(await posted).not.toBe(201);
    expect(await wsClosed).toBe(1001);
    // The lock is let go once the shutdown has gone on to close the store (a few ms after the drain's timeout).
    await new Promise((r) => setTimeout(r, 1_500));
    await locker.query('COMMIT');
    expect(await first.exited).toBe(0);
    expect(first.log()).toContain('the requests still running have ended (a lease granted after their connections closed was given back)');
    // Before: the grants committed as the store was closing; giving them back failed and they lapsed at their TTL (60 s).
    for (const post of [8_901, 8_902]) {
      expect(first.log()).toContain(`an acquisition of wp:post:${post}#title by ${SEO} was answered: granted after the close and released at once`);
    }

    server = await startServerProcess({ dataDir: first.dataDir, env: { WRIT_DATABASE_URL: db.url } });
    const alice = new WritClient({ baseUrl: server.url, principal: ALICE, privateJwk: fixtureKey(ALICE) });
    for (const post of [8_901, 8_902]) {
      const lease = await alice.acquireLease([await decide(alice, post)], { ttlMs: 10_000 });
      // The given-up grant's epoch stays spent: the next holder has the one after it.
      expect(lease.epochs[`wp:post:${post}#title`]).toBe(2);
    }
  });
});
