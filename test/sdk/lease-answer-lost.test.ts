import { rmSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LeaseExpiredError, LeaseOutcomeUnknownError, newLeaseToken } from '../../src/sdk/index.js';
import { createTestDatabase } from '../store/conformance/engines.js';
import { startServerProcess, type ServerProcess } from '../support/server-process.js';
import { clientFor, leasesOn } from './sdk-support.js';

/**
 * A lease acquisition whose answer is lost after Writ granted it (the connection dropped on the way
 * back). Before, the SDK's retry took a new lease request, found the key held by the lease it could not
 * see and waited for that lease to lapse (its whole TTL); now every attempt carries the same lease token,
 * and the retry is answered with the lease granted. Against a real `writ serve`, on each engine.
 */
const ENGINES = [
  { name: 'SQLite', database: async () => null },
  { name: 'PostgreSQL', database: async () => createTestDatabase('writ_lease_lost') },
];

/** A fetch that delivers the request, lets Writ answer, and loses the next answer to POST /v1/leases. */
function losingNextLeaseAnswer(): { fetch: typeof fetch; lose: () => void; lost: () => number } {
  let armed = false;
  let lost = 0;
  const lossy: typeof fetch = async (input, init) => {
    const res = await fetch(input, init);
    const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    if (!armed || init?.method !== 'POST' || !new URL(url).pathname.endsWith('/v1/leases')) return res;
    armed = false;
    lost++;
    await res.arrayBuffer();
    throw new TypeError('fetch failed', { cause: Object.assign(new Error('other side closed'), { code: 'UND_ERR_SOCKET' }) });
  };
  return { fetch: lossy, lose: () => (armed = true), lost: () => lost };
}

describe.each(ENGINES)('a lost lease answer, on $name', ({ database }) => {
  let server: ServerProcess;
  let drop: (() => Promise<void>) | undefined;
  beforeAll(async () => {
    const db = await database();
    drop = db?.drop;
    server = await startServerProcess(db ? { env: { WRIT_DATABASE_URL: db.url } } : {});
  });
  afterAll(async () => {
    await server?.stop();
    if (server) rmSync(server.dataDir, { recursive: true, force: true });
    await drop?.();
  });

  it('withLease gets the lease it was granted at once, not after its TTL: one lease, taken once', async () => {
    const losing = losingNextLeaseAnswer();
    const { client, sent } = clientFor(server, 'seo-agent-7', losing.fetch);
    const decision = await client.decide({ action: 'update_post', resource: 'wp:post:901', environment: 'production', fields: ['title'] });
    expect(decision.allow, decision.reasons.join('; ')).toBe(true);
    losing.lose();
    const started = Date.now();
    // A TTL far beyond the deadline: waiting for the lost lease to lapse would miss the deadline.
    const held = await client.withLease([decision], async ({ lease }) => ({ lease, at: Date.now(), before: sent.map((r) => `${r.method} ${r.path}`) }), { ttlMs: 60_000, deadlineMs: 10_000 });
    expect(losing.lost()).toBe(1);
    expect(held.at - started).toBeLessThan(10_000);
    expect(held.lease?.replayed).toBe(true);
    // Granted at an instant the client cannot know: renewed before the task ran, so its local expiry counts from a request it sent.
    // (The client's caller session is opened once, first.)
    expect(held.before).toEqual(['POST /v1/sessions', 'POST /v1/decisions', 'POST /v1/leases', 'POST /v1/leases', `POST /v1/leases/${held.lease!.lease_id}/renew`]);
    expect(held.lease?.epochs).toEqual({ 'wp:post:901#title': 1 });
    // Released by withLease, and taken once only (a second acquisition would have moved the epoch on).
    expect((await leasesOn(client, 'wp:post:901#title'))[0]).toMatchObject({ state: 'FREE', epoch: 1 });
  });

  it('acquireLease: LeaseOutcomeUnknownError carries the token; asked again with it, the same lease (replayed); after release, LeaseExpiredError', async () => {
    const losing = losingNextLeaseAnswer();
    const { client } = clientFor(server, 'seo-agent-7', losing.fetch);
    const decision = await client.decide({ action: 'update_post', resource: 'wp:post:902', environment: 'production', fields: ['title'] });
    losing.lose();
    const lost = await client.acquireLease([decision]).then(() => null, (e: unknown) => e);
    expect(lost).toBeInstanceOf(LeaseOutcomeUnknownError);
    const { token } = lost as LeaseOutcomeUnknownError;
    expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect((lost as Error).message).not.toContain(token);
    const again = await client.acquireLease([decision], { token });
    expect(again).toMatchObject({ token, replayed: true, holder: 'seo-agent-7' });
    const [row] = await leasesOn(client, 'wp:post:902#title');
    expect(row).toMatchObject({ state: 'HELD', leaseId: again.lease_id, holderIdentity: 'seo-agent-7' });
    await client.releaseLease(again);
    await expect(client.acquireLease([decision], { token })).rejects.toBeInstanceOf(LeaseExpiredError);
    // A new token takes a new lease, one epoch up.
    const next = await client.acquireLease([decision], { token: newLeaseToken() });
    expect(next.replayed).toBe(false);
    expect(next.epochs['wp:post:902#title']).toBe(again.epochs['wp:post:902#title']! + 1);
    await client.releaseLease(next);
  });
});
