import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { WritError } from '../../src/errors.js';
import { decide, exchangeLoginToken, issueLoginToken, performAction } from '../../src/service/index.js';
import { startHarness, type Harness } from '../support/harness.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

const decideOver = (hh: Harness) => hh.call('seo-agent-7', {
  method: 'POST', url: '/v1/decisions',
  payload: { action: 'update_post', resource: 'wp:post:1024', environment: 'production', fields: ['meta_description'] },
});

const refusal = async (p: Promise<unknown>): Promise<WritError> => {
  const e = await p.then(() => undefined, (err: unknown) => err);
  expect(e).toBeInstanceOf(WritError);
  return e as WritError;
};

/**
 * On PostgreSQL single-use ids (caller assertions, decisions, console login links) are spent by the later
 * of the replica's clock and the database's. A replica whose clock is behind the database's by more than
 * such an id's lifetime refuses what was made to its own clock: refusing is right (the id is expired by
 * the database's clock), but until now the answer said the assertion was replayed, the decision already
 * used and the login link already used. Now it says the clock is behind, by how much, and what to do.
 */
describe('PostgreSQL: a replica whose clock is behind the database\'s', () => {
  it('says so when it refuses a caller assertion, a decision or a login link, and a real replay is still a replay', { timeout: 60_000 }, async () => {
    const clock = new ManualClock(Date.now());
    h = await startHarness({ engine: 'postgres', clock });

    // Clocks agree: an assertion presented twice is a replay, and says so.
    const headers = await h.auth('seo-agent-7');
    const first = await h.call(null, { method: 'POST', url: '/v1/decisions', headers, payload: { action: 'update_post', resource: 'wp:post:1024', environment: 'production', fields: ['meta_description'] } });
    expect(first.status, first.raw).toBe(200);
    const again = await h.call(null, { method: 'POST', url: '/v1/decisions', headers, payload: { action: 'update_post', resource: 'wp:post:1024', environment: 'production', fields: ['meta_description'] } });
    expect(again.body).toMatchObject({ code: 'UNAUTHENTICATED', detail: 'assertion jti was already used (replayed)' });
    expect(again.body.clock_offset_ms).toBeUndefined();

    // Two minutes behind: an assertion made by a caller whose clock follows the replica's (60 s) is expired by the database's.
    // (A ManualClock stands still: the gap grows with the test's own time, so the bounds are loose.)
    clock.set(Date.now() - 120_000);
    const behind = await decideOver(h);
    expect(behind.status, behind.raw).toBe(401);
    expect(behind.body.code).toBe('UNAUTHENTICATED');
    expect(behind.body.detail).toMatch(/^assertion expired by the database's clock: .* this replica's clock said .*, 1\d\d\.\d s behind the database's\. .*set this replica's clock right \(NTP\)/);
    expect(behind.body.detail).not.toMatch(/replayed/);
    expect(behind.body.clock_offset_ms).toBeLessThan(-110_000);
    expect(behind.body.clock_offset_ms).toBeGreaterThan(-200_000);

    // A decision made by this replica (30 s) is expired by the database's clock when the write spends it: DECISION_EXPIRED, not DECISION_REPLAYED.
    const d = await decide(h.ctx, 'seo-agent-7', { action: 'update_post', resource: 'wp:post:1024', environment: 'production', fields: ['meta_description'] });
    expect(d.allow).toBe(true);
    const write = await refusal(performAction(h.ctx, 'seo-agent-7', { action: 'update_post', resource: 'wp:post:1024', fields: ['meta_description'], payload: { meta_description: 'x' }, expected_version: 0 }, { decision: d.token! }));
    expect(write.code).toBe('DECISION_EXPIRED');
    expect(write.message).toMatch(/^decision \S+ expired by the database's clock: .* 1\d\d\.\d s behind the database's/);
    expect(write.details).toMatchObject({ decision_id: expect.any(String), clock_offset_ms: expect.any(Number) });

    // Fifteen minutes behind: a console login link (10 min) is expired by the database's clock: LOGIN_LINK_INVALID, not LOGIN_LINK_SPENT.
    clock.set(Date.now() - 15 * 60_000);
    const link = await issueLoginToken(h.ctx, 'governance');
    const login = await refusal(exchangeLoginToken(h.ctx, link.token));
    expect(login.code).toBe('LOGIN_LINK_INVALID');
    expect(login.message).toMatch(/^console login link expired by the database's clock: .* 9\d\d\.\d s behind the database's/);
  });

  it('GET /readyz and /metrics show the offset: 503 CLOCK_SKEW past WRIT_CLOCK_OFFSET_MAX_MS, a warning past WRIT_CLOCK_OFFSET_WARN_MS', { timeout: 60_000 }, async () => {
    const clock = new ManualClock(Date.now() - 120_000);
    h = await startHarness({ engine: 'postgres', clock });
    const skewed = await h.call(null, { method: 'GET', url: '/readyz' });
    expect(skewed.status).toBe(503);
    expect(skewed.body).toMatchObject({ status: 'not ready', code: 'CLOCK_SKEW' });
    expect(skewed.body.error).toMatch(/^this replica's clock is 1\d\d\.\d s behind the database's, more than WRIT_CLOCK_OFFSET_MAX_MS \(60000 ms\)/);
    expect(skewed.body.clock_offset_ms).toBeLessThan(-110_000);
    const metrics = await h.call(null, { method: 'GET', url: '/metrics' });
    expect(Number(/^writ_clock_offset_seconds\{peer="database"\} (\S+)$/m.exec(metrics.raw)?.[1])).toBeLessThan(-110);
    expect(metrics.raw).toMatch(/^writ_clock_offset_uncertainty_seconds\{peer="database"\} \d/m);

    // The clock set right: ready again once the measurement is 10 s old (it is measured again then).
    clock.set(Date.now() + 10_000);
    const ready = await h.call(null, { method: 'GET', url: '/readyz' });
    expect(ready.status, ready.raw).toBe(200);
    expect(ready.body.clock).toMatchObject({ peer: 'database', uncertainty_ms: expect.any(Number), measured_at: expect.any(String) });
    expect(ready.body.clock.warning).toMatch(/^this replica's clock is \d+\.\d s (\(± \d+\.\d s\) )?ahead of the database's, more than WRIT_CLOCK_OFFSET_WARN_MS/);
  });

  it('SQLite has one clock: no clock in GET /readyz, no offset metric', async () => {
    h = await startHarness();
    const ready = await h.call(null, { method: 'GET', url: '/readyz' });
    expect(ready.status).toBe(200);
    expect(ready.body.clock).toBeUndefined();
    expect((await h.call(null, { method: 'GET', url: '/metrics' })).raw).not.toMatch(/^writ_clock_offset_seconds\{/m);
  });
});
