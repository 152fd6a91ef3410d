import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from '../support/harness.js';

let h: Harness;
beforeEach(async () => {
  h = await startHarness();
});
afterEach(async () => h?.close());

const base = {
  from: 'orchestrator',
  to: 'content-agent-3',
  reason: 'test delegation',
  max_depth: 0,
  scope: { actions: ['update_post'], resources: ['wp:post:*'], environments: ['production'], fields: ['title'], risk_max: 1 },
};

async function delegate(overrides: Record<string, unknown>, scope: Record<string, unknown> = {}) {
  const before = (await h.ctx.graph.current()).revision;
  const r = await h.call('orchestrator', { method: 'POST', url: '/v1/delegations', payload: { ...base, ...overrides, scope: { ...base.scope, ...scope } } });
  return { ...r, revisionMoved: (await h.ctx.graph.current()).revision !== before };
}

describe('a delegation wider than its parent is refused at write time', () => {
  it('accepts a delegation inside the delegator scope', async () => {
    const r = await delegate({ id: 'd-ok' });
    expect(r.status).toBe(201);
    expect(r.body.edge.creator).toBe('orchestrator');
  });

  const cases: [string, Record<string, unknown>, Record<string, unknown>, RegExp][] = [
    ['action', {}, { actions: ['update_post', 'publish_post'] }, /actions: publish_post is not in the delegator's/],
    ['resource', {}, { resources: ['site:example.com:template:canonical'] }, /resources: site:example.com:template:canonical /],
    ['environment', {}, { environments: ['production', 'development'] }, /environments: development is not in the delegator's/],
    ['field (via a narrower middle edge)', {}, {}, /./],
    ['risk', {}, { risk_max: 3 }, /risk: 3 exceeds the delegator's risk_max 2/],
    ['time window', { expires_at: '2027-01-01T00:00:00Z' }, {}, /./],
    ['depth', { max_depth: 2 }, {}, /depth: /],
  ];

  it.each(cases.filter(([n]) => !n.startsWith('field') && n !== 'time window'))('%s', async (_name, overrides, scope, message) => {
    const r = await delegate(overrides, scope);
    expect(r.status).toBe(403);
    expect(r.body.code).toBe('ATTENUATION_VIOLATION');
    expect(r.body.detail).toMatch(message);
    expect(r.revisionMoved).toBe(false);
  });

  it('field: seo-agent-7 cannot pass on body when it holds only title and meta_description', async () => {
    // Give seo-agent-7 depth so only the field dimension is wrong.
    await h.call('governance', { method: 'DELETE', url: '/v1/edges/d-orch-seo', payload: { reason: 'replace with a re-delegable edge' } });
    const ok = await h.call('orchestrator', {
      method: 'POST', url: '/v1/delegations',
      payload: { id: 'd-orch-seo-2', from: 'orchestrator', to: 'seo-agent-7', reason: 're-delegable', max_depth: 1, scope: { actions: ['update_post'], resources: ['wp:post:*'], environments: ['production'], fields: ['title', 'meta_description'], risk_max: 1 } },
    });
    expect(ok.status).toBe(201);
    const before = (await h.ctx.graph.current()).revision;
    const r = await h.call('seo-agent-7', {
      method: 'POST', url: '/v1/delegations',
      payload: { from: 'seo-agent-7', to: 'content-agent-3', reason: 'widen', max_depth: 0, scope: { actions: ['update_post'], resources: ['wp:post:*'], environments: ['production'], fields: ['title', 'body'], risk_max: 1 } },
    });
    expect(r.status).toBe(403);
    expect(r.body.code).toBe('ATTENUATION_VIOLATION');
    expect(r.body.detail).toContain("fields: body is not in the delegator's [meta_description, title]");
    expect((await h.ctx.graph.current()).revision).toBe(before);
  });

  it('time window: a delegation may not outlive its parent', async () => {
    await h.call('governance', {
      method: 'POST', url: '/v1/grants',
      payload: { id: 'g-temp', to: 'editor-alice', reason: 'temporary', max_depth: 1, expires_at: '2026-07-01T00:00:00Z', scope: { actions: ['read_post'], resources: ['wp:post:*'], risk_max: 0 } },
    });
    await h.call('governance', { method: 'DELETE', url: '/v1/edges/g-editor-alice' });
    const r = await h.call('editor-alice', {
      method: 'POST', url: '/v1/delegations',
      payload: { from: 'editor-alice', to: 'content-agent-3', reason: 'too long', max_depth: 0, expires_at: '2026-08-01T00:00:00Z', scope: { actions: ['read_post'], resources: ['wp:post:*'], risk_max: 0 } },
    });
    expect(r.status).toBe(403);
    expect(r.body.code).toBe('ATTENUATION_VIOLATION');
    expect(r.body.detail).toMatch(/time window: /);
    const open = await h.call('editor-alice', {
      method: 'POST', url: '/v1/delegations',
      payload: { from: 'editor-alice', to: 'content-agent-3', reason: 'unbounded', max_depth: 0, scope: { actions: ['read_post'], resources: ['wp:post:*'], risk_max: 0 } },
    });
    expect(open.status).toBe(403);
    expect(open.body.detail).toMatch(/time window: /);
  });

  it('only the holder may delegate its scope', async () => {
    const r = await h.call('seo-agent-7', { method: 'POST', url: '/v1/delegations', payload: { ...base } });
    expect(r.status).toBe(403);
    expect(r.body.code).toBe('FORBIDDEN');
  });
});

describe('narrowing a parent later narrows the child at decision time', () => {
  it('revoking and re-granting the orchestrator without title denies seo-agent-7 on title', async () => {
    const ask = () => h.call('seo-agent-7', { method: 'POST', url: '/v1/decisions', payload: { action: 'update_post', resource: 'wp:post:1', environment: 'production', fields: ['title'] } });
    expect((await ask()).body.allow).toBe(true);
    // The parent is replaced by a narrower grant (edges are immutable: narrowing = revoke + new grant).
    await h.call('governance', {
      method: 'POST', url: '/v1/grants',
      payload: { id: 'g-orchestrator-narrow', to: 'orchestrator', reason: 'body only now', max_depth: 2, scope: { actions: ['update_post'], resources: ['wp:post:*'], environments: ['production'], fields: ['body', 'tags', 'meta_description'], risk_max: 2 } },
    });
    await h.call('governance', { method: 'DELETE', url: '/v1/edges/g-orchestrator', payload: { reason: 'narrowed' } });
    const r = await ask();
    expect(r.body.allow).toBe(false);
    expect(r.body.reasons.join('\n')).toMatch(/title/);
    // The delegation as a whole is now wider than its parent (title), so it is worth nothing, even
    // for meta_description which both still name: a chain must narrow at every step.
    const meta = await h.call('seo-agent-7', { method: 'POST', url: '/v1/decisions', payload: { action: 'update_post', resource: 'wp:post:1', environment: 'production', fields: ['meta_description'] } });
    expect(meta.body.allow).toBe(false);
    expect(meta.body.reasons.join('\n')).toMatch(/d-orch-seo/);
    // The content agent's delegation (body, tags) is inside the new parent and keeps working through it.
    const body = await h.call('content-agent-3', { method: 'POST', url: '/v1/decisions', payload: { action: 'update_post', resource: 'wp:post:1', environment: 'production', fields: ['body'] } });
    expect(body.body.allow).toBe(true);
    expect(body.body.chain).toEqual(['g-orchestrator-narrow', 'd-orch-content']);
  });
});
