import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { act, decideAndLease, decideOk, snapshot, upstreamGet } from '../support/agent.js';
import { startHarness, type Harness } from '../support/harness.js';

let h: Harness;
beforeEach(async () => {
  h = await startHarness({ upstream: true });
});
afterEach(async () => h?.close());

const title = (v: string, expected = 0) => ({ resource: 'wp:post:1024', fields: ['title'], payload: { title: v }, expected_version: expected });

describe('the environment of a decision is enforced at the write', () => {
  it('a staging-only delegation cannot write production state, nor lease it', async () => {
    await h.call('orchestrator', {
      method: 'POST', url: '/v1/delegations',
      payload: { id: 'd-stg', from: 'orchestrator', to: 'content-agent-3', reason: 'staging only', max_depth: 0, scope: { actions: ['update_post'], resources: ['wp:post:*'], environments: ['staging'], fields: ['meta_description', 'title'], risk_max: 1 } },
    });
    const prod = await h.call('content-agent-3', { method: 'POST', url: '/v1/decisions', payload: { action: 'update_post', resource: 'wp:post:1024', environment: 'production', fields: ['title'] } });
    expect(prod.body.allow).toBe(false);
    const stg = await decideOk(h, 'content-agent-3', { resource: 'wp:post:1024', fields: ['title'], environment: 'staging' });
    const before = await snapshot(h);
    const lease = await h.call('content-agent-3', { method: 'POST', url: '/v1/leases', payload: { decisions: [stg.token], ttl_ms: 5000 } });
    expect(lease.status).toBe(502);
    expect(lease.body.code).toBe('NO_UPSTREAM');
    const w = await act(h, 'content-agent-3', title('from staging'), { decision: stg.token });
    expect(w.body.code).toBe('LEASE_REQUIRED');
    // An optimistic field needs no lease: the route check is what refuses it.
    const meta = await decideOk(h, 'content-agent-3', { resource: 'wp:post:1024', fields: ['meta_description'], environment: 'staging' });
    const m = await act(h, 'content-agent-3', { resource: 'wp:post:1024', fields: ['meta_description'], payload: { meta_description: 'from staging' }, expected_version: 0 }, { decision: meta.token });
    expect(m.status).toBe(502);
    expect(m.body.code).toBe('NO_UPSTREAM');
    expect(await snapshot(h)).toEqual(before);
  });
});

describe('the fencing header carries exactly the keys the write coordinates on', () => {
  it('an extra key is refused and never reaches the upstream', async () => {
    const { decision: d, lease } = await decideAndLease(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['title'] });
    const n = lease.epochs['wp:post:1024#title'];
    const bad = await act(h, 'seo-agent-7', title('x'), { decision: d.token, lease, fencing: `wp:post:1024#title=${n}, wp:post:1024#body=999999999` });
    expect(bad.status).toBe(400);
    expect(bad.body.code).toBe('MALFORMED_REQUEST');
    const dup = await act(h, 'seo-agent-7', title('x'), { decision: d.token, lease, fencing: `wp:post:1024#title=${n}, wp:post:1024#title=${n}` });
    expect(dup.body.code).toBe('MALFORMED_REQUEST');
    const ok = await act(h, 'seo-agent-7', title('x'), { decision: d.token, lease });
    expect(ok.status).toBe(201);
    expect((await upstreamGet(h, '/posts/1024')).fences).toEqual({ 'wp:post:1024#title': n });
  });
});

describe('a key the upstream cannot address is a refusal, not a PENDING receipt', () => {
  it('wp:post:a@b: the lease is refused, and a lease-free write is REJECTED before any intent or upstream call', async () => {
    const d = await decideOk(h, 'seo-agent-7', { resource: 'wp:post:a@b', fields: ['title'] });
    const lease = await h.call('seo-agent-7', { method: 'POST', url: '/v1/leases', payload: { decisions: [d.token], ttl_ms: 5000 } });
    expect(lease.body.code).toBe('UNKNOWN_RESOURCE');
    const before = await snapshot(h);
    const meta = await decideOk(h, 'seo-agent-7', { resource: 'wp:post:a@b', fields: ['meta_description'] });
    const w = await act(h, 'seo-agent-7', { resource: 'wp:post:a@b', fields: ['meta_description'], payload: { meta_description: 'm' }, expected_version: 0 }, { decision: meta.token });
    expect(w.status).toBe(404);
    expect(w.body.code).toBe('UNKNOWN_RESOURCE');
    const rejected = await h.call('governance', { method: 'GET', url: `/v1/receipts/${w.body.receipt_id}` });
    expect(rejected.body.receipt.status).toBe('REJECTED');
    const pending = await h.call('governance', { method: 'GET', url: '/v1/receipts?status=PENDING' });
    expect(pending.body.receipts).toEqual([]);
    expect(await snapshot(h)).toEqual(before);
  });
});

describe('authority is re-checked where a decision or lease outlives it', () => {
  it('an incident cannot be declared with a decision whose chain was revoked since, nor twice with one decision', async () => {
    const d = await decideOk(h, 'incident-commander', { action: 'declare_incident', resource: 'incident:x1', fields: [] });
    await h.call('governance', { method: 'DELETE', url: '/v1/edges/g-incident-commander' });
    const r = await h.call('incident-commander', { method: 'POST', url: '/v1/incidents', payload: { id: 'x1', reason: 'r', decision: d.token } });
    expect(r.body.code).toBe('AUTHORITY_REVOKED');
    expect((await h.call('governance', { method: 'GET', url: '/v1/incidents' })).body.incidents).toEqual([]);
  });

  it('renewing a lease after the holder\'s chain was revoked ends the lease', async () => {
    const { decision: d, lease } = await decideAndLease(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['title'] });
    const other = await h.call('content-agent-3', { method: 'POST', url: `/v1/leases/${lease.lease_id}/renew`, payload: { token: lease.token } });
    expect(other.body.code).toBe('LEASE_TOKEN_MISMATCH');
    await h.call('governance', { method: 'DELETE', url: '/v1/edges/d-orch-seo' });
    const r = await h.call('seo-agent-7', { method: 'POST', url: `/v1/leases/${lease.lease_id}/renew`, payload: { token: lease.token, ttl_ms: 300_000 } });
    expect(r.status).toBe(403);
    expect(r.body.code).toBe('AUTHORITY_REVOKED');
    const ls = await h.call('governance', { method: 'GET', url: '/v1/leases?resource=wp%3Apost%3A1024%23title' });
    expect(ls.body.leases[0].state).toBe('FREE');
  });
});

describe('an idempotent retry answers as the first attempt did', () => {
  it('a retry of a write that failed with VERSION_CONFLICT is the same refusal, not a 200', async () => {
    const d = await decideOk(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['meta_description'] });
    const body = { resource: 'wp:post:1024', fields: ['meta_description'], payload: { meta_description: 'm' }, expected_version: 7 };
    const first = await act(h, 'seo-agent-7', body, { decision: d.token, idempotencyKey: 'k-fail' });
    expect(first.body.code).toBe('VERSION_CONFLICT');
    const again = await act(h, 'seo-agent-7', body, { idempotencyKey: 'k-fail' });
    expect(again.status).toBe(409);
    expect(again.body.code).toBe('VERSION_CONFLICT');
    expect(again.body.receipt_id).toBe(first.body.receipt_id);
  });
});
