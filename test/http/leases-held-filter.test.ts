import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { decideAndLease } from '../support/agent.js';
import { startHarness, type Harness } from '../support/harness.js';

let h: Harness;
beforeEach(async () => {
  h = await startHarness();
});
afterEach(async () => h?.close());

async function leasePost(post: number, ttlMs: number) {
  return (await decideAndLease(h, 'seo-agent-7', { resource: `wp:post:${post}`, fields: ['title'] }, { ttl_ms: ttlMs })).lease;
}

describe('GET /v1/leases?state=HELD', () => {
  it('lists only the keys held now, in key order; without the filter every key ever leased', async () => {
    await leasePost(2048, 60_000);
    const released = await leasePost(1024, 60_000);
    const r = await h.call('seo-agent-7', { method: 'DELETE', url: `/v1/leases/${released.lease_id}`, payload: { token: released.token } });
    expect(r.status, r.raw).toBe(200);
    await leasePost(4096, 1_000);
    await leasePost(512, 60_000);
    (h.clock as ManualClock).advance(5_000);

    const held = await h.call('governance', { method: 'GET', url: '/v1/leases?state=HELD' });
    expect(held.status, held.raw).toBe(200);
    expect(held.body.leases.map((l: any) => [l.key, l.state, l.holderIdentity])).toEqual([
      ['wp:post:2048#title', 'HELD', 'seo-agent-7'],
      ['wp:post:512#title', 'HELD', 'seo-agent-7'],
    ]);
    const all = await h.call('governance', { method: 'GET', url: '/v1/leases' });
    expect(all.body.leases.map((l: any) => [l.key, l.state])).toEqual([
      ['wp:post:1024#title', 'FREE'],
      ['wp:post:2048#title', 'HELD'],
      ['wp:post:4096#title', 'EXPIRED'],
      ['wp:post:512#title', 'HELD'],
    ]);
    // The same records as the unfiltered list gives for those keys.
    expect(held.body.leases).toEqual(all.body.leases.filter((l: any) => l.state === 'HELD'));
  });

  it('narrows to a resource and a holder like the other filters', async () => {
    await leasePost(2048, 60_000);
    await leasePost(512, 60_000);
    const one = await h.call('governance', { method: 'GET', url: '/v1/leases?state=HELD&resource=wp:post:512%23title' });
    expect(one.body.leases.map((l: any) => l.key)).toEqual(['wp:post:512#title']);
    const other = await h.call('governance', { method: 'GET', url: '/v1/leases?state=HELD&holder=editor-alice' });
    expect(other.status, other.raw).toBe(200);
    expect(other.body.leases).toEqual([]);
    const free = await h.call('governance', { method: 'GET', url: '/v1/leases?state=HELD&resource=wp:post:1024%23title' });
    expect(free.body.leases).toEqual([]);
  });

  it('any other state is refused with MALFORMED_REQUEST and changes nothing', async () => {
    const lease = await leasePost(2048, 60_000);
    for (const state of ['held', 'EXPIRED', 'FREE', '', 'HELD,FREE']) {
      const r = await h.call('governance', { method: 'GET', url: `/v1/leases?state=${encodeURIComponent(state)}` });
      expect(r.status, `${state}: ${r.raw}`).toBe(400);
      expect(r.body.code).toBe('MALFORMED_REQUEST');
    }
    const held = await h.call('governance', { method: 'GET', url: '/v1/leases?state=HELD' });
    expect(held.body.leases.map((l: any) => [l.key, l.leaseId])).toEqual([['wp:post:2048#title', lease.lease_id]]);
  });

  it('is described in the OpenAPI document', async () => {
    const doc = (await h.call('governance', { method: 'GET', url: '/openapi.json' })).body;
    const state = doc.paths['/v1/leases'].get.parameters.find((p: any) => p.name === 'state' && p.in === 'query');
    expect(state.schema.enum).toEqual(['HELD']);
  });
});
