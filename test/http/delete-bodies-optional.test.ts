import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { RecordedGraphEvent } from '../../src/graph/model.js';
import { decideAndLease, decideOk } from '../support/agent.js';
import { startHarness, type Harness } from '../support/harness.js';

let h: Harness;
beforeEach(async () => {
  h = await startHarness();
});
afterEach(async () => h?.close());

async function lastRevocationReason(): Promise<string | undefined> {
  const events: RecordedGraphEvent[] = await h.ctx.store.read((tx) => tx.graph.read(0));
  const last = events.filter((e) => e.event.type === 'edge.revoked' || e.event.type === 'principal.revoked').pop();
  return last && 'reason' in last.event ? last.event.reason : undefined;
}

describe('every DELETE takes an optional body', () => {
  it('revoking an edge needs no body; the reason may come as a query parameter or in the body', async () => {
    const bare = await h.call('governance', { method: 'DELETE', url: '/v1/edges/d-orch-content' });
    expect(bare.status, bare.raw).toBe(200);
    expect(bare.body.edge.revoked_at).not.toBeNull();
    expect(await lastRevocationReason()).toBe('revoked');

    const query = await h.call('governance', { method: 'DELETE', url: '/v1/edges/d-orch-seo?reason=agent%20misbehaved' });
    expect(query.status, query.raw).toBe(200);
    expect(await lastRevocationReason()).toBe('agent misbehaved');

    const body = await h.call('governance', { method: 'DELETE', url: '/v1/edges/g-publisher', payload: { reason: 'publisher retired' } });
    expect(body.status, body.raw).toBe(200);
    expect(await lastRevocationReason()).toBe('publisher retired');
  });

  it('revoking a principal takes the reason from the query too', async () => {
    const r = await h.call('governance', { method: 'DELETE', url: '/v1/principals/content-agent-3?reason=decommissioned' });
    expect(r.status, r.raw).toBe(200);
    expect(r.body.principal.revoked_at).not.toBeNull();
    expect(await lastRevocationReason()).toBe('decommissioned');
  });

  it('an unknown body field or query parameter is refused and revokes nothing', async () => {
    const before = (await h.ctx.graph.current()).revision;
    for (const req of [{ url: '/v1/edges/d-orch-seo', payload: { why: 'x' } }, { url: '/v1/edges/d-orch-seo?why=x' }]) {
      const r = await h.call('governance', { method: 'DELETE', ...req });
      expect(r.status).toBe(400);
      expect(r.body.code).toBe('MALFORMED_REQUEST');
    }
    expect((await h.ctx.graph.current()).revision).toBe(before);
    expect((await h.ctx.graph.current()).edge('d-orch-seo')?.revoked_at).toBeNull();
  });

  it('resolving an incident accepts a body (it refused one before)', async () => {
    const d = await decideOk(h, 'incident-commander', { action: 'declare_incident', resource: 'incident:cdn', fields: [] });
    expect((await h.call('incident-commander', { method: 'POST', url: '/v1/incidents', payload: { id: 'cdn', reason: 'cdn down', decision: d.token } })).status).toBe(201);
    const r = await h.call('incident-commander', { method: 'DELETE', url: '/v1/incidents/cdn', payload: { reason: 'cdn back' } });
    expect(r.status, r.raw).toBe(200);
    expect(r.body.incident.resolved_at).not.toBeNull();
  });

  it('releasing a lease takes its token in the body or the Writ-Lease-Token header; without either it is refused and the lease stays', async () => {
    const { lease } = await decideAndLease(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['title'] });
    const missing = await h.call('seo-agent-7', { method: 'DELETE', url: `/v1/leases/${lease.lease_id}` });
    expect(missing.status).toBe(400);
    expect(missing.body.code).toBe('MALFORMED_REQUEST');
    expect(missing.body.detail).toContain('Writ-Lease-Token');
    const held = await h.call('governance', { method: 'GET', url: '/v1/leases?resource=wp:post:1024%23title' });
    expect(held.body.leases[0]).toMatchObject({ state: 'HELD', leaseId: lease.lease_id });

    const released = await h.call('seo-agent-7', { method: 'DELETE', url: `/v1/leases/${lease.lease_id}`, headers: { 'writ-lease-token': lease.token } });
    expect(released.status, released.raw).toBe(200);
    expect(released.body).toEqual({ lease_id: lease.lease_id, epochs: lease.epochs });
  });
});
