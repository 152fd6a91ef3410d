import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { startHarness, type Harness } from '../support/harness.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

const SEO = 'seo-agent-7';
const REQUEST = { action: 'update_post', resource: 'wp:post:1024', environment: 'production', fields: ['title'] };

/** A decision signed by this Writ while its clock said `at` (a replica whose clock is that far ahead). */
async function decisionSignedAt(hh: Harness, clock: ManualClock, at: number): Promise<string> {
  const then = clock.now();
  clock.set(at);
  const d = await hh.call(SEO, { method: 'POST', url: '/v1/decisions', payload: REQUEST });
  clock.set(then);
  expect(d.status, d.raw).toBe(200);
  return d.body.token as string;
}

const ISSUED_AHEAD = /^decision \S+ is issued in the future: its iat \S+ is 90\.0 s after Writ's time \S+, more than the 5 s of clock skew tolerated; the clock of the Writ replica that signed it is probably ahead: set it right \(NTP\) and decide again$/;

/**
 * A replica whose clock is 90 s ahead signs decisions dated 90 s after the others' time. Before, every
 * other replica accepted such a decision for its 30 s TTL plus those 90 s: 2 minutes. Now POST
 * /v1/leases and POST /v1/actions refuse it (DECISION_INVALID), saying why; one dated within the 5 s
 * tolerated is accepted.
 */
describe('a decision signed by a clock 90 s ahead', () => {
  it('is refused on PostgreSQL by POST /v1/leases and POST /v1/actions with the clocks in the message, and nothing is held or written', { timeout: 60_000 }, async () => {
    // On PostgreSQL, as replicas are: one process stands for both, its clock set 90 s ahead to decide and
    // back to the database's to use the decision (SQLite's single-use ids keep the latest clock they saw).
    const clock = new ManualClock(Date.now());
    h = await startHarness({ engine: 'postgres', clock });
    const ahead = await decisionSignedAt(h, clock, clock.now() + 90_000);

    const lease = await h.call(SEO, { method: 'POST', url: '/v1/leases', payload: { decisions: [ahead], ttl_ms: 10_000 } });
    expect(lease.status, lease.raw).toBe(403);
    expect(lease.body.code).toBe('DECISION_INVALID');
    expect(lease.body.detail).toMatch(ISSUED_AHEAD);
    expect(await h.ctx.leases.describe('wp:post:1024#title')).toBeUndefined();

    const write = await h.call(SEO, {
      method: 'POST', url: '/v1/actions', headers: { 'writ-decision': ahead, 'idempotency-key': 'ahead-1' },
      payload: { action: 'update_post', resource: 'wp:post:1024', fields: ['title'], payload: { title: 'x' }, expected_version: 0 },
    });
    expect(write.status, write.raw).toBe(403);
    expect(write.body.code).toBe('DECISION_INVALID');
    expect(write.body.detail).toMatch(ISSUED_AHEAD);

    // Within the skew tolerated (4 s ahead): taken as ever.
    const near = await decisionSignedAt(h, clock, clock.now() + 4_000);
    const held = await h.call(SEO, { method: 'POST', url: '/v1/leases', payload: { decisions: [near], ttl_ms: 10_000 } });
    expect(held.status, held.raw).toBe(201);
  });
});
