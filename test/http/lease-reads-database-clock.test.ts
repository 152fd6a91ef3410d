import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { act, decideOk, fencing, leaseOk } from '../support/agent.js';
import { startHarness, type Harness } from '../support/harness.js';

let h: Harness | undefined;
afterEach(async () => h?.close());

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * On PostgreSQL lease time is the database's clock. A replica whose own clock is off (here Writ's
 * injected clock, ahead of the database's or behind it) answers every lease read by the database's
 * clock: the list, one key, the held read and the lease a REJECTED receipt records say the same state
 * for the same lease at the same moment.
 */
describe('PostgreSQL: lease reads on a replica whose clock is off judge by the database\'s clock', () => {
  const states = async (hh: Harness, key: string) => {
    const all = await hh.call('governance', { method: 'GET', url: '/v1/leases' });
    const one = await hh.call('governance', { method: 'GET', url: `/v1/leases?resource=${encodeURIComponent(key)}` });
    const held = await hh.call('governance', { method: 'GET', url: '/v1/leases?state=HELD' });
    expect(all.status, all.raw).toBe(200);
    return {
      list: all.body.leases.find((l: any) => l.key === key)?.state,
      one: one.body.leases[0]?.state,
      held: held.body.leases.some((l: any) => l.key === key),
      describe: (await hh.ctx.leases.describe(key))?.state,
    };
  };

  it('ten minutes ahead: a live lease is HELD everywhere, also in the lease a refused write records', async () => {
    h = await startHarness({ engine: 'postgres', clock: new ManualClock(Date.now() + 10 * 60_000) });
    const d = await decideOk(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['title'] });
    const lease = await leaseOk(h, 'seo-agent-7', [d.token], { ttl_ms: 60_000 });
    const [key] = lease.keys;
    const stale = Object.fromEntries(Object.entries(lease.epochs).map(([k, e]) => [k, e - 1]));
    const r = await act(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['title'], payload: { title: 'x' }, expected_version: 0 }, { decision: d.token, lease, fencing: fencing(stale) });
    expect(r.status, r.raw).toBe(409);
    const receipt = await h.call('seo-agent-7', { method: 'GET', url: `/v1/receipts/${r.body.receipt_id}` });
    expect(receipt.body.receipt.presented_lease.keys.map((k: any) => [k.key, k.holder, k.state])).toEqual([[key, 'seo-agent-7', 'HELD']]);
    expect(await states(h, key!)).toEqual({ list: 'HELD', one: 'HELD', held: true, describe: 'HELD' });
  });

  it('thirty seconds behind (less than an assertion lives): a lease that lapsed without a release is EXPIRED everywhere', async () => {
    h = await startHarness({ engine: 'postgres', clock: new ManualClock(Date.now() - 30_000) });
    const d = await decideOk(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['title'] });
    const lease = await leaseOk(h, 'seo-agent-7', [d.token], { ttl_ms: 1_000 });
    await sleep(1_500);
    expect(await states(h, lease.keys[0]!)).toEqual({ list: 'EXPIRED', one: 'EXPIRED', held: false, describe: 'EXPIRED' });
  });
});
