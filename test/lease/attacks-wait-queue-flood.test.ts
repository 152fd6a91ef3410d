/**
 * The wait queue flooded, tried as an attacker would: one principal queueing acquisitions (wait_ms) on
 * many keys at once. WRIT_LEASE_MAX_WAITERS bounds one key's queue; WRIT_LEASE_MAX_WAITERS_PER_PRINCIPAL
 * bounds the acquisitions one principal keeps waiting across keys (every waiter polls the store: measured,
 * 256 waiters from one stream took 0.38 of a core), over HTTP and over the lease stream alike.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { decideOk, leaseOk } from '../support/agent.js';
import type { Harness } from '../support/harness.js';
import { closeOpened, listening, rawStream } from '../support/lease-stream.js';
import { until } from '../support/wait.js';

afterEach(closeOpened);

const KEYS = 6;
const BOUND = 2;
const LEASE = { minTtlMs: 500, maxTtlMs: 300_000, defaultTtlMs: 15_000, maxWaitMs: 60_000, maxWaitersPerKey: 64, maxWaitersPerPrincipal: BOUND };

const waitingOf = async (h: Harness, holder: string) => (await h.ctx.leases.queues()).reduce((n, q) => n + q.waiters.filter((w) => w.holder === holder).length, 0);

/** editor-alice holds wp:post:800.. (one key each); seo-agent-7's decisions for the same keys. */
async function heldKeys(h: Harness): Promise<string[]> {
  const decisions: string[] = [];
  for (let i = 0; i < KEYS; i++) {
    await leaseOk(h, 'editor-alice', [(await decideOk(h, 'editor-alice', { resource: `wp:post:${800 + i}`, fields: ['title'] })).token], { ttl_ms: 60_000 });
    decisions.push((await decideOk(h, 'seo-agent-7', { resource: `wp:post:${800 + i}`, fields: ['title'] })).token);
  }
  return decisions;
}

describe('one principal queueing on many keys', () => {
  it('over HTTP: past WRIT_LEASE_MAX_WAITERS_PER_PRINCIPAL waiting acquisitions one more is 503 OVERLOADED with Retry-After, not queued; another principal still queues', async () => {
    const { h } = await listening({ config: { lease: LEASE } });
    const decisions = await heldKeys(h);
    const waiting = [];
    for (let i = 0; i < BOUND; i++) {
      waiting.push(h.call('seo-agent-7', { method: 'POST', url: '/v1/leases', payload: { decisions: [decisions[i]], ttl_ms: 10_000, wait_ms: 3_000 } }));
      await until(`waiter ${i + 1} queued`, async () => (await waitingOf(h, 'seo-agent-7')) === i + 1);
    }
    for (let i = BOUND; i < KEYS; i++) {
      const refused = await h.call('seo-agent-7', { method: 'POST', url: '/v1/leases', payload: { decisions: [decisions[i]], ttl_ms: 10_000, wait_ms: 3_000 } });
      expect(refused.status).toBe(503);
      expect(refused.body).toMatchObject({ code: 'OVERLOADED', holder: 'seo-agent-7', waiting: BOUND, max_waiters_per_principal: BOUND });
      expect(refused.body.detail).toMatch(/WRIT_LEASE_MAX_WAITERS_PER_PRINCIPAL/);
      // A place frees at the latest when the first of its waits reaches its deadline (3 s).
      expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      expect(Number(refused.headers['retry-after'])).toBeLessThanOrEqual(3);
    }
    expect(await waitingOf(h, 'seo-agent-7')).toBe(BOUND);
    // The bound is the principal's: another one queues on the same key as before.
    const other = h.call('orchestrator', { method: 'POST', url: '/v1/leases', payload: { decisions: [(await decideOk(h, 'orchestrator', { resource: 'wp:post:805', fields: ['title'] })).token], ttl_ms: 10_000, wait_ms: 3_000 } });
    await until('the other principal queued', async () => (await waitingOf(h, 'orchestrator')) === 1);
    // The waits end (timeout), freeing the places: the principal queues again.
    for (const w of await Promise.all(waiting)) expect(w.body.code).toBe('LEASE_WAIT_TIMEOUT');
    expect((await other).body.code).toBe('LEASE_WAIT_TIMEOUT');
    const again = h.call('seo-agent-7', { method: 'POST', url: '/v1/leases', payload: { decisions: [decisions[KEYS - 1]], ttl_ms: 10_000, wait_ms: 500 } });
    await until('queued again', async () => (await waitingOf(h, 'seo-agent-7')) === 1);
    expect((await again).body.code).toBe('LEASE_WAIT_TIMEOUT');
  });

  it('over the lease stream: the same bound, whatever the stream\'s in-flight bound; the refused are answered at once', async () => {
    const { h, url } = await listening({ config: { lease: LEASE } });
    const decisions = await heldKeys(h);
    const raw = await rawStream(url, await h.auth('seo-agent-7'));
    for (let i = 0; i < KEYS; i++) raw.send({ id: i, op: 'acquire', decisions: [decisions[i]], ttl_ms: 10_000, wait_ms: 30_000 });
    const refused = [];
    for (let i = 0; i < KEYS - BOUND; i++) refused.push(await raw.next());
    for (const r of refused) {
      expect(r).toMatchObject({ ok: false, problem: { code: 'OVERLOADED', status: 503, holder: 'seo-agent-7', max_waiters_per_principal: BOUND } });
      expect(r.problem.retry_after_ms).toBeGreaterThan(0);
    }
    expect(await waitingOf(h, 'seo-agent-7')).toBe(BOUND);
    h.ctx.leases.stopWaiting();
    for (let i = 0; i < BOUND; i++) await raw.next();
  });
});
