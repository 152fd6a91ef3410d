import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { act, decideAndLease, decideLeaseWrite, decideOk } from '../support/agent.js';
import { startHarness, type Harness } from '../support/harness.js';
import { misplacedTimes, WIRE_TIME } from '../support/wire-times.js';

/**
 * Instants on the wire are RFC 3339 strings (UTC, ms precision) wherever an answer carries them; the
 * domain and the stored receipt chain keep ms numbers. These are the answers that carried ms numbers
 * before: chain edges, receipts and their entries, incidents, and the busy / expired lease problems.
 */
const T0 = Date.UTC(2026, 5, 1, 12, 0, 0);
let h: Harness;
let clock: ManualClock;
beforeEach(async () => {
  clock = new ManualClock(T0);
  h = await startHarness({ clock, upstream: true });
});
afterEach(async () => h?.close());

const iso = (ms: number) => new Date(ms).toISOString();

describe('times on the wire', () => {
  it('a decision\'s chain edges carry the same RFC 3339 times as GET /v1/edges, and so does an explanation', async () => {
    const d = await decideOk(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['title'] });
    expect(d.body.chain_edges.length).toBeGreaterThan(0);
    for (const e of d.body.chain_edges) {
      const edge = (await h.call('governance', { method: 'GET', url: `/v1/edges/${e.id}` })).body.edge;
      expect({ created_at: e.created_at, not_before: e.not_before, expires_at: e.expires_at, revoked_at: e.revoked_at })
        .toEqual({ created_at: edge.created_at, not_before: edge.not_before, expires_at: edge.expires_at, revoked_at: edge.revoked_at });
      expect(e.created_at).toMatch(WIRE_TIME);
    }
    expect(d.body.issued_at).toBe(iso(T0));
    expect(d.body.expires_at).toBe(iso(T0 + h.config.decisionTtlMs));

    const x = await h.call('governance', { method: 'POST', url: '/v1/explain', payload: { action: 'update_post', resource: 'wp:post:1024', environment: 'production', fields: ['title'], principal: 'seo-agent-7' } });
    expect(x.status, x.raw).toBe(200);
    expect(x.body.chains.flatMap((c: { edges: unknown[] }) => c.edges).length).toBeGreaterThan(0);
    expect(misplacedTimes(x.body)).toEqual([]);
  });

  it('a receipt shows RFC 3339 times while its stored, hash-chained entries keep their ms times and still verify', async () => {
    const { answer: w } = await decideLeaseWrite(h, 'seo-agent-7', { resource: 'wp:post:1024', payload: { title: 'T' }, expected_version: 0 });
    expect(w.status, w.raw).toBe(201);
    const wire = w.body.receipt;
    expect(wire.created_at).toBe(iso(T0));
    expect(wire.completed_at).toBe(iso(T0));
    expect(wire.entries.map((e: { at: string }) => e.at)).toEqual([iso(T0), iso(T0)]);

    // Stored as written: the entry bodies (which the hashes cover) hold `at` in ms.
    const bodies = h.db.prepare('SELECT body FROM receipt_entries WHERE receipt_id = ? ORDER BY seq').pluck().all(wire.receipt_id) as string[];
    expect(bodies.map((b) => JSON.parse(b).at)).toEqual([T0, T0]);
    const domain = await h.ctx.receipts.get(wire.receipt_id);
    expect(domain?.created_at).toBe(T0);
    expect(domain?.hash).toBe(wire.hash);

    for (const url of [`/v1/receipts/${wire.receipt_id}`, '/v1/receipts']) {
      const r = await h.call('governance', { method: 'GET', url });
      expect(misplacedTimes(r.body)).toEqual([]);
    }
    expect((await h.call('governance', { method: 'GET', url: `/v1/receipts/${wire.receipt_id}` })).body.receipt).toEqual(wire);
    expect((await h.call('governance', { method: 'GET', url: '/v1/audit/verify' })).body.ok).toBe(true);
  });

  it('an incident\'s declared_at, ends_at and resolved_at are RFC 3339; its length is the ttl_ms asked for', async () => {
    const d = await decideOk(h, 'incident-commander', { action: 'declare_incident', resource: 'incident:cdn', fields: [] });
    const declared = await h.call('incident-commander', { method: 'POST', url: '/v1/incidents', payload: { id: 'cdn', reason: 'cdn down', ttl_ms: 600_000, decision: d.token } });
    expect(declared.status, declared.raw).toBe(201);
    expect(declared.body.incident).toMatchObject({ declared_at: iso(T0), ends_at: iso(T0 + 600_000), resolved_at: null });
    expect((await h.call('governance', { method: 'GET', url: '/v1/incidents' })).body.incidents).toEqual([declared.body.incident]);
    clock.advance(1_000);
    const resolved = await h.call('incident-commander', { method: 'DELETE', url: '/v1/incidents/cdn' });
    expect(resolved.body.incident.resolved_at).toBe(iso(T0 + 1_000));
  });

  it('RESOURCE_BUSY names when the holder\'s lease expires, and LEASE_EXPIRED when the lease expired, as RFC 3339', async () => {
    const { lease } = await decideAndLease(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['title'] }, { ttl_ms: 5_000 });
    await h.call('governance', { method: 'POST', url: '/v1/delegations', payload: { id: 'd-content-title', from: 'orchestrator', to: 'content-agent-3', reason: 'test', max_depth: 0, scope: { actions: ['update_post'], resources: ['wp:post:*'], environments: ['production'], fields: ['title'], risk_max: 1 } } });
    const other = await decideOk(h, 'content-agent-3', { resource: 'wp:post:1024', fields: ['title'] });
    const busy = await h.call('content-agent-3', { method: 'POST', url: '/v1/leases', payload: { decisions: [other.token] } });
    expect(busy.status, busy.raw).toBe(423);
    expect(busy.body).toMatchObject({ code: 'RESOURCE_BUSY', holder: 'seo-agent-7', expires_at: iso(T0 + 5_000), retry_after_ms: 5_000 });

    clock.advance(6_000);
    const d2 = await decideOk(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['title'] });
    const late = await act(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['title'], payload: { title: 'late' }, expected_version: 0 }, { decision: d2.token, lease });
    expect(late.status, late.raw).toBe(423);
    expect(late.body).toMatchObject({ code: 'LEASE_EXPIRED', expires_at: iso(T0 + 5_000) });
  });
});
