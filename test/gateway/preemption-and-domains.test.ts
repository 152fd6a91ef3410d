import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { act, decideAndLease, decideOk, leaseOk, snapshot } from '../support/agent.js';
import { startHarness, type Harness } from '../support/harness.js';

let h: Harness;
beforeEach(async () => {
  h = await startHarness({ upstream: true });
});
afterEach(async () => h?.close());

const release = { action: 'deploy', resource: 'deploy:site:www', fields: [] as string[] };

async function declareIncident(id: string) {
  const d = await decideOk(h, 'incident-commander', { action: 'declare_incident', resource: `incident:${id}`, fields: [] });
  const r = await h.call('incident-commander', { method: 'POST', url: '/v1/incidents', payload: { id, reason: 'checkout is down', decision: d.token } });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
}

describe('preemption during an incident', () => {
  it('the incident commander takes over the release lease; the epoch moves on and the old holder is fenced out', async () => {
    const { decision: rd, lease: held } = await decideAndLease(h, 'release-controller', release);
    const n = held.epochs['deploy:site:www']!;

    const cd = await decideOk(h, 'incident-commander', release);
    const noIncident = await h.call('incident-commander', { method: 'POST', url: '/v1/leases', payload: { decisions: [cd.token], ttl_ms: 10_000, preempt: true } });
    expect(noIncident.status).toBe(403);
    expect(noIncident.body.code).toBe('NO_INCIDENT');

    await declareIncident('inc-1');
    const taken = await leaseOk(h, 'incident-commander', [cd.token], { preempt: true });
    expect(taken.epochs['deploy:site:www']).toBe(n + 1);

    const renew = await h.call('release-controller', { method: 'POST', url: `/v1/leases/${held.lease_id}/renew`, payload: { token: held.token } });
    expect(renew.body.code).toBe('LEASE_PREEMPTED');
    const before = await snapshot(h);
    const w = await act(h, 'release-controller', { ...release, payload: {}, expected_version: 0 }, { decision: rd.token, lease: held });
    expect(w.status).toBe(409);
    expect(w.body.code).toBe('STALE_FENCING_EPOCH');
    expect(await snapshot(h)).toEqual(before);
  });

  it('without a preempts edge over the holder, preemption is refused even during an incident', async () => {
    await declareIncident('inc-2');
    const ed = await decideOk(h, 'editor-alice', { resource: 'wp:post:5', fields: ['title'] });
    await leaseOk(h, 'editor-alice', [ed.token]);
    // The commander has no authority over posts at all; give seo-agent-7 a try instead: it has authority but no preempts edge.
    const sd = await decideOk(h, 'seo-agent-7', { resource: 'wp:post:5', fields: ['title'] });
    const r = await h.call('seo-agent-7', { method: 'POST', url: '/v1/leases', payload: { decisions: [sd.token], ttl_ms: 10_000, preempt: true } });
    expect(r.status).toBe(403);
    expect(r.body.code).toBe('FORBIDDEN');
  });
});

describe('conflict domains', () => {
  it('a canonical template edit and a bulk canonical edit of one site are different keys but coordinate through its SEO_METADATA domain', async () => {
    const { lease: held } = await decideAndLease(h, 'seo-control-plane', { action: 'update_template', resource: 'site:example.com:template:canonical', fields: [] });
    expect(held.keys).toEqual(['domain:SEO_METADATA:example.com', 'site:example.com:template:canonical']);
    const bulk = await decideOk(h, 'seo-control-plane', { action: 'bulk_update_canonical', resource: 'site:example.com:canonical-bulk', fields: [] });
    const busy = await h.call('seo-control-plane', { method: 'POST', url: '/v1/leases', payload: { decisions: [bulk.token], ttl_ms: 10_000 } });
    expect(busy.status).toBe(423);
    expect(busy.body.code).toBe('RESOURCE_BUSY');
    // A post's canonical field is in the same domain; its title is not.
    const canonical = await decideOk(h, 'editor-alice', { resource: 'wp:post:9', fields: ['canonical'] });
    const c = await h.call('editor-alice', { method: 'POST', url: '/v1/leases', payload: { decisions: [canonical.token], ttl_ms: 10_000 } });
    expect(c.body.code).toBe('RESOURCE_BUSY');
    const title = await decideOk(h, 'editor-alice', { resource: 'wp:post:9', fields: ['title'] });
    await leaseOk(h, 'editor-alice', [title.token]);
    // After release, the bulk edit goes through.
    await h.call('seo-control-plane', { method: 'DELETE', url: `/v1/leases/${held.lease_id}`, payload: { token: held.token } });
    await leaseOk(h, 'seo-control-plane', [bulk.token]);
  });

  it('a domain is scoped per site: canonical work on site:other.org runs while example.com is held', async () => {
    await decideAndLease(h, 'seo-control-plane', { action: 'update_template', resource: 'site:example.com:template:canonical', fields: [] });
    const other = await decideOk(h, 'seo-control-plane', { action: 'bulk_update_canonical', resource: 'site:other.org:canonical-bulk', fields: [] });
    expect(other.body.obligations.conflict_domain).toBe('SEO_METADATA:other.org');
    const held = await leaseOk(h, 'seo-control-plane', [other.token]);
    expect(held.keys).toEqual(['domain:SEO_METADATA:other.org', 'site:other.org:canonical-bulk']);
  });
});
