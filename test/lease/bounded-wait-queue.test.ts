import { afterAll, describe, expect, it } from 'vitest';
import { decideOk, leaseOk } from '../support/agent.js';
import { startHarness, type Harness } from '../support/harness.js';

let h: Harness | undefined;
afterAll(async () => h?.close());

const KEY = 'wp:post:70#title';

describe('bounded lease wait queues (WRIT_LEASE_MAX_WAITERS)', () => {
  it('past N live waiters on a key a new waiter gets 503 OVERLOADED with Retry-After and is not queued; a place freed is taken again', async () => {
    h = await startHarness({ config: { lease: { minTtlMs: 500, maxTtlMs: 300_000, defaultTtlMs: 15_000, maxWaitMs: 60_000, maxWaitersPerKey: 2, maxWaitersPerPrincipal: 16 } } });
    const harness = h;
    const decision = async () => (await decideOk(harness, 'seo-agent-7', { resource: 'wp:post:70', fields: ['title'] })).token;
    const waitFor = async (n: number) => {
      for (let i = 0; i < 200 && (await harness.ctx.leases.waiters(KEY)).length !== n; i++) await new Promise((r) => setTimeout(r, 10));
      expect((await harness.ctx.leases.waiters(KEY)).length).toBe(n);
    };
    const wait = async () => harness.call('seo-agent-7', { method: 'POST', url: '/v1/leases', payload: { decisions: [await decision()], ttl_ms: 10_000, wait_ms: 30_000 } });
    const release = (l: { lease_id: string; token: string }) => harness.call('seo-agent-7', { method: 'DELETE', url: `/v1/leases/${l.lease_id}`, payload: { token: l.token } });

    const holder = await leaseOk(harness, 'seo-agent-7', [await decision()]);
    const first = wait();
    await waitFor(1);
    const second = wait();
    await waitFor(2);

    const refused = await wait();
    expect(refused.status).toBe(503);
    expect(refused.body.code).toBe('OVERLOADED');
    expect(refused.body).toMatchObject({ key: KEY, waiters: 2, max_waiters: 2 });
    // The holder's lease has ~10 s left: that is when a place could open.
    expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(Number(refused.headers['retry-after'])).toBeLessThanOrEqual(10);
    await waitFor(2);

    // The holder releases: the first waiter is served and leaves the queue, so a new waiter fits again.
    expect((await release(holder)).status).toBe(200);
    const firstGrant = await first;
    expect(firstGrant.status).toBe(201);
    await waitFor(1);
    const third = wait();
    await waitFor(2);
    expect((await wait()).status).toBe(503);

    // Everyone queued is served in turn.
    expect((await release(firstGrant.body)).status).toBe(200);
    const secondGrant = await second;
    expect(secondGrant.status).toBe(201);
    expect((await release(secondGrant.body)).status).toBe(200);
    const thirdGrant = await third;
    expect(thirdGrant.status).toBe(201);
    expect(thirdGrant.body.epochs[KEY]).toBe(holder.epochs[KEY]! + 3);
    await waitFor(0);
  });
});
