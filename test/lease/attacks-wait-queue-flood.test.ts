/**
 * The wait queue flooded, tried as an attacker would: one principal queueing acquisitions (wait_ms) on
 * many keys at once.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { decideOk, leaseOk } from '../support/agent.js';
import { startHarness, type Harness } from '../support/harness.js';
import { WallClock } from '../support/lease-stream.js';

let h: Harness | undefined;
afterAll(async () => h?.close());

const KEYS = 6;

describe('one principal queueing on many keys', () => {
  // DESIGN QUESTION (not built): WRIT_LEASE_MAX_WAITERS bounds the waiters of one key (64), and nothing bounds
  // the waiters of one principal or of the process across keys. Every waiter polls the store every 10–50 ms
  // until its turn or its wait_ms (up to 60 s): measured here, 256 waiters from one stream (its in-flight
  // bound) took 0.38 of a core, against 0.017 idle (load average 14 on 2 shared cores). One principal may open
  // 64 streams (16 384 waiters), and over HTTP (rate limit off by default) as many as it has held keys × 64,
  // taking every core from every other caller. A per-principal (or per-process) bound on live waiters, one more
  // answered OVERLOADED as a full key's queue is, or waiters woken by the store instead of polling, would close
  // it; which (and its default) is a choice about legitimate controllers that wait on many keys.
  it.fails('the acquisitions one principal keeps waiting are bounded as one key\'s waiters are (WRIT_LEASE_MAX_WAITERS)', async () => {
    h = await startHarness({ clock: new WallClock(), config: { lease: { minTtlMs: 500, maxTtlMs: 300_000, defaultTtlMs: 15_000, maxWaitMs: 60_000, maxWaitersPerKey: 2 } } });
    const harness = h;
    for (let i = 0; i < KEYS; i++) await leaseOk(harness, 'editor-alice', [(await decideOk(harness, 'editor-alice', { resource: `wp:post:${800 + i}`, fields: ['title'] })).token], { ttl_ms: 60_000 });
    const waiting = [];
    for (let i = 0; i < KEYS; i++) {
      const d = (await decideOk(harness, 'seo-agent-7', { resource: `wp:post:${800 + i}`, fields: ['title'] })).token;
      waiting.push(harness.call('seo-agent-7', { method: 'POST', url: '/v1/leases', payload: { decisions: [d], ttl_ms: 10_000, wait_ms: 2_000 } }));
    }
    await new Promise((r) => setTimeout(r, 500));
    const queued = (await harness.ctx.leases.queues()).reduce((n, q) => n + q.waiters.filter((w) => w.holder === 'seo-agent-7').length, 0);
    await Promise.all(waiting);
    expect(queued).toBeLessThanOrEqual(2);
  });
});
