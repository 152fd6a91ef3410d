/**
 * A console session of a principal revoked on a replica whose clock is ahead (revoked_at later than
 * this replica's now) ends at once, as its caller assertions are refused (caller-auth.ts).
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ManualClock } from '../../src/clock.js';
import { issueLoginToken } from '../../src/service/index.js';
import { startHarness, type Harness } from '../support/harness.js';

let h: Harness;
beforeEach(async () => {
  h = await startHarness();
});
afterEach(async () => h?.close());

describe('console session of a principal revoked ahead of this clock', () => {
  it('is refused at the next request, and no login link is issued or taken', async () => {
    const { token } = await issueLoginToken(h.ctx, 'editor-alice');
    const { token: spare } = await issueLoginToken(h.ctx, 'editor-alice');
    const r = await h.call(null, { method: 'POST', url: '/v1/console/session', payload: { token } });
    expect(r.status, JSON.stringify(r.body)).toBeLessThan(300);
    const cookie = String(r.headers['set-cookie']).split(';')[0]!;
    expect((await h.call(null, { method: 'GET', url: '/v1/console/session', headers: { cookie } })).status).toBe(200);
    expect((await h.call('governance', { method: 'DELETE', url: '/v1/principals/editor-alice', payload: { reason: 'left' } })).status).toBe(200);
    (h.clock as ManualClock).advance(-60_000);
    expect((await h.call(null, { method: 'GET', url: '/v1/console/session', headers: { cookie } })).status).toBe(401);
    const link = await h.call(null, { method: 'POST', url: '/v1/console/session', payload: { token: spare } });
    expect(link.status).toBeGreaterThanOrEqual(400);
    await expect(issueLoginToken(h.ctx, 'editor-alice')).rejects.toMatchObject({ code: 'UNKNOWN_PRINCIPAL' });
  });
});
