import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { startHarness, type Harness } from '../support/harness.js';

let h: Harness;
let clock: ManualClock;
beforeAll(async () => {
  clock = new ManualClock(Date.UTC(2026, 5, 1, 12, 0, 0));
  h = await startHarness({ clock });
});
afterAll(async () => h?.close());

describe('graph export, now and as it was', () => {
  it('shows the graph as it was at an earlier revision and time', async () => {
    const before = await h.call('governance', { method: 'GET', url: '/v1/graph' });
    expect(before.status).toBe(200);
    const rev = before.body.revision as number;
    const liveEdge = before.body.edges.find((e: { id: string }) => e.id === 'd-orch-seo');
    expect(liveEdge.revoked_at).toBeNull();
    const timeBefore = new Date(clock.now()).toISOString();

    clock.advance(60_000);
    await h.call('governance', { method: 'DELETE', url: '/v1/edges/d-orch-seo', payload: { reason: 'audit test' } });
    await h.call('governance', { method: 'POST', url: '/v1/principals', payload: { id: 'late-agent', kind: 'agent', keys: [] } });

    const now = await h.call('governance', { method: 'GET', url: '/v1/graph' });
    expect(now.body.revision).toBe(rev + 2);
    expect(now.body.edges.find((e: { id: string }) => e.id === 'd-orch-seo').revoked_at).not.toBeNull();
    expect(now.body.principals.some((p: { id: string }) => p.id === 'late-agent')).toBe(true);

    const then = await h.call('governance', { method: 'GET', url: `/v1/graph?at=${rev}` });
    expect(then.status).toBe(200);
    expect(then.body.revision).toBe(rev);
    expect(then.body.edges.find((e: { id: string }) => e.id === 'd-orch-seo').revoked_at).toBeNull();
    expect(then.body.principals.some((p: { id: string }) => p.id === 'late-agent')).toBe(false);

    const byTime = await h.call('governance', { method: 'GET', url: `/v1/graph?at=${encodeURIComponent(timeBefore)}` });
    expect(byTime.body.revision).toBe(rev);
  });

  it('exports DOT for Graphviz', async () => {
    const r = await h.call('governance', { method: 'GET', url: '/v1/graph', headers: { accept: 'text/vnd.graphviz' } });
    expect(r.status).toBe(200);
    expect(String(r.headers['content-type'])).toMatch(/text\/vnd\.graphviz/);
    expect(r.raw).toMatch(/^digraph/);
    expect(r.raw).toContain('seo-agent-7');
  });

  it('a revision ahead of the head (422) or a malformed at (400) is refused', async () => {
    const r = await h.call('governance', { method: 'GET', url: '/v1/graph?at=999999' });
    expect(r.status).toBe(422);
    const t = await h.call('governance', { method: 'GET', url: '/v1/graph?at=yesterday' });
    expect(t.status).toBe(400);
    expect(t.body.code).toBe('MALFORMED_REQUEST');
  });
});
