/**
 * Attacks on attenuation: a delegation wider than what its delegator holds, in every dimension, tried
 * at write time (POST /v1/delegations) and, for edges that reached the log without the write-time check
 * (an older Writ, a hand-made event), at decision time. Every refusal changes nothing.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ManualClock } from '../../src/clock.js';
import type { Edge } from '../../src/graph/model.js';
import { commitGraphChange } from '../../src/service/graph-changes.js';
import { applyManifest } from '../../src/service/index.js';
import { REPO, startHarness, type Harness } from '../support/harness.js';

let h: Harness;
beforeEach(async () => {
  h = await startHarness();
});
afterEach(async () => h?.close());

const HOUR = 3_600_000;
const revision = async () => (await h.ctx.graph.current()).revision;

/** orchestrator holds g-orchestrator: update_post, read_post on wp:post:* in production, staging; fields *; risk 2; depth 2. */
const inside = { actions: ['update_post'], resources: ['wp:post:*'], environments: ['production'], fields: ['body'], risk_max: 1 };

async function delegate(principal: string, payload: Record<string, unknown>) {
  const before = await revision();
  const r = await h.call(principal, { method: 'POST', url: '/v1/delegations', payload: { reason: 'attack', max_depth: 0, ...payload } });
  return { ...r, moved: (await revision()) !== before };
}

describe('write time: resource patterns that match more than they look', () => {
  const wider: [string, string[]][] = [
    ['a final ** under a one-segment *', ['wp:post:**']],
    ['** alone', ['**']],
    ['a wildcard prefix', ['*:post:*']],
    ['a wildcard type', ['wp:*:*']],
    ['one pattern inside, one outside', ['wp:post:1', 'deploy:site']],
    ['a deeper pattern whose first segments match', ['wp:post:*:**']],
    ['wp:** (zero or more after wp)', ['wp:**']],
  ];
  it.each(wider)('%s is refused, nothing written', async (_name, resources) => {
    const r = await delegate('orchestrator', { from: 'orchestrator', to: 'content-agent-3', scope: { ...inside, resources } });
    expect(r.status, JSON.stringify(r.body)).toBeGreaterThanOrEqual(400);
    expect(['ATTENUATION_VIOLATION', 'UNPROCESSABLE']).toContain(r.body.code);
    expect(r.moved).toBe(false);
  });

  it('the patterns that are wider are refused by the attenuation check itself (not only by the registry)', async () => {
    for (const resources of [['wp:post:**'], ['**'], ['*:post:*'], ['wp:*:*'], ['wp:**']]) {
      const r = await delegate('orchestrator', { from: 'orchestrator', to: 'content-agent-3', scope: { ...inside, resources } });
      expect([r.status, r.body.code], `${resources[0]}: ${JSON.stringify(r.body)}`).toEqual([403, 'ATTENUATION_VIOLATION']);
      expect(r.body.detail).toMatch(/resources: /);
    }
  });

  it('narrower patterns are accepted: a literal key, and * where the parent has *', async () => {
    expect((await delegate('orchestrator', { id: 'd-lit', from: 'orchestrator', to: 'content-agent-3', scope: { ...inside, resources: ['wp:post:1'] } })).status).toBe(201);
    expect((await delegate('orchestrator', { id: 'd-star', from: 'orchestrator', to: 'content-agent-3', scope: { ...inside, resources: ['wp:post:*'] } })).status).toBe(201);
  });
});

describe('write time: every other dimension', () => {
  const cases: [string, string, Record<string, unknown>, RegExp][] = [
    ['actions *', 'orchestrator', { scope: { ...inside, actions: ['*'] } }, /actions: \*/],
    ['environments * (parent lists two)', 'orchestrator', { scope: { ...inside, environments: ['*'] } }, /environments: \*/],
    ['environments left out (defaults to *)', 'orchestrator', { scope: { actions: ['update_post'], resources: ['wp:post:*'], fields: ['body'], risk_max: 1 } }, /environments: \*/],
    ['fields * under [title, meta_description]', 'seo-agent-7', { scope: { ...inside, fields: ['*'] } }, /./],
    ['risk_max in constraints above the parent', 'orchestrator', { scope: { actions: ['update_post'], resources: ['wp:post:*'], environments: ['production'], fields: ['body'], constraints: { risk_max: 3 } } }, /risk: 3/],
    ['max_depth equal to the parent\'s (2)', 'orchestrator', { max_depth: 2, scope: inside }, /depth: /],
  ];
  it.each(cases)('%s', async (_name, who, payload, detail) => {
    const r = await delegate(who, { from: who, to: 'content-agent-3', ...payload });
    expect([r.status, r.body.code], JSON.stringify(r.body)).toEqual([403, 'ATTENUATION_VIOLATION']);
    expect(r.body.detail).toMatch(detail);
    expect(r.moved).toBe(false);
  });

  const malformed: [string, Record<string, unknown>][] = [
    ['max_depth -1', { max_depth: -1 }],
    ['max_depth 1.5', { max_depth: 1.5 }],
    ['max_depth 17', { max_depth: 17 }],
    ['max_depth as a string', { max_depth: '1' }],
    ['risk_max as a string', { scope: { ...inside, risk_max: '0' } }],
    ['risk_max negative', { scope: { ...inside, risk_max: -1 } }],
    ['risk_max and constraints.risk_max disagreeing', { scope: { ...inside, risk_max: 0, constraints: { risk_max: 5 } } }],
    ['an empty actions list', { scope: { ...inside, actions: [] } }],
  ];
  it.each(malformed)('%s is refused before anything is written', async (_name, payload) => {
    const r = await delegate('orchestrator', { from: 'orchestrator', to: 'content-agent-3', scope: inside, ...payload });
    expect(r.status, JSON.stringify(r.body)).toBeGreaterThanOrEqual(400);
    expect(r.status).toBeLessThan(500);
    expect(r.moved).toBe(false);
  });

  it('a re-delegation uses up the depth: depth 1 below a depth-2 grant may not pass on depth 1', async () => {
    expect((await delegate('orchestrator', { id: 'd-1', from: 'orchestrator', to: 'editor-alice', max_depth: 1, scope: inside })).status).toBe(201);
    // editor-alice holds it twice now, through d-1 (depth 1) and its own grant (depth 1): each leaves 0 below.
    const r = await delegate('editor-alice', { from: 'editor-alice', to: 'content-agent-3', max_depth: 1, scope: inside });
    expect([r.status, r.body.code]).toEqual([403, 'ATTENUATION_VIOLATION']);
    expect(r.moved).toBe(false);
  });

  it('a window outliving the parent: unbounded expiry, or a not_before before the parent\'s', async () => {
    const start = h.clock.now() + HOUR;
    const end = h.clock.now() + 10 * HOUR;
    const g = await h.call('governance', {
      method: 'POST', url: '/v1/grants',
      payload: { id: 'g-window', to: 'publisher', reason: 'window', max_depth: 1, not_before: new Date(h.clock.now() - HOUR).toISOString(), expires_at: new Date(end).toISOString(), scope: { actions: ['read_post'], resources: ['wp:post:*'], risk_max: 0 } },
    });
    expect(g.status, JSON.stringify(g.body)).toBe(201);
    const read = { actions: ['read_post'], resources: ['wp:post:*'], risk_max: 0 };
    const tries: Record<string, unknown>[] = [
      { expires_at: null },
      { expires_at: new Date(end + 1).toISOString() },
      { not_before: new Date(h.clock.now() - 2 * HOUR).toISOString(), expires_at: new Date(end).toISOString() },
    ];
    for (const t of tries) {
      const r = await delegate('publisher', { from: 'publisher', to: 'content-agent-3', scope: read, ...t });
      expect([r.status, r.body.code], JSON.stringify(t)).toEqual([403, 'ATTENUATION_VIOLATION']);
      expect(r.body.detail).toMatch(/time window: /);
      expect(r.moved).toBe(false);
    }
    const ok = await delegate('publisher', { from: 'publisher', to: 'content-agent-3', scope: read, not_before: new Date(start).toISOString(), expires_at: new Date(end).toISOString() });
    expect(ok.status, JSON.stringify(ok.body)).toBe(201);
  });

  it('self-delegation and delegation to governance are refused', async () => {
    const self = await delegate('orchestrator', { from: 'orchestrator', to: 'orchestrator', scope: inside });
    expect([self.status, self.body.code]).toEqual([422, 'UNPROCESSABLE']);
    const gov = await delegate('orchestrator', { from: 'orchestrator', to: 'governance', scope: inside });
    expect(gov.status).toBeGreaterThanOrEqual(400);
    expect(gov.moved || self.moved).toBe(false);
  });
});

describe('write time: constraints other than risk_max', () => {
  // The narrowing rules compare only risk_max among constraints, so a constraint a delegation could
  // leave out would be stepped round. None gets in: the wire and a manifest take risk_max alone.
  it('a grant or delegation carrying another constraint is refused, by HTTP and by a manifest', async () => {
    const before = await revision();
    const g = await h.call('governance', {
      method: 'POST', url: '/v1/grants',
      payload: { id: 'g-hours', to: 'publisher', reason: 'office hours only', max_depth: 1, scope: { actions: ['read_post'], resources: ['wp:post:*'], constraints: { risk_max: 0, business_hours: true } } },
    });
    expect([g.status, g.body.code]).toEqual([400, 'MALFORMED_REQUEST']);
    const d = await delegate('orchestrator', { from: 'orchestrator', to: 'content-agent-3', scope: { ...inside, constraints: { business_hours: true } } });
    expect(d.status).toBe(400);
    await expect(applyManifest(h.ctx, 'governance', { grants: [{ id: 'm-hours', to: 'publisher', reason: 'hours', scope: { actions: ['read_post'], resources: ['wp:post:*'], constraints: { risk_max: 0, business_hours: true } } as never }] }, REPO)).rejects.toThrow(/business_hours|constraints/);
    expect(await revision()).toBe(before);
  });
});

/** An edge put straight into the graph log, as an older Writ or a hand-made event could have: no write-time check. */
async function plant(edge: Partial<Edge> & Pick<Edge, 'id' | 'from' | 'to' | 'scope'>): Promise<void> {
  const now = h.clock.now();
  await commitGraphChange(h.ctx, 'governance', () => [{
    type: 'edge.created',
    edge: { kind: 'delegate', max_depth: 0, creator: edge.from, reason: 'planted', created_at: now, not_before: null, expires_at: null, ...edge },
  }]);
}

const ask = (principal: string, body: Record<string, unknown>) => h.call(principal, { method: 'POST', url: '/v1/decisions', payload: body });

describe('decision time: an edge wider than its parent that got into the log is not honoured', () => {
  // seo-agent-7 holds d-orch-seo (update_post; wp:post:*; production; title, meta_description; risk 1; depth 0).
  // Planted edges go seo-agent-7 → content-agent-3, so their only parent is d-orch-seo.
  const wide = { actions: ['update_post'], resources: ['wp:post:*'], environments: ['production'], fields: ['title'], constraints: { risk_max: 1 } };
  const cases: [string, Partial<Edge>, Record<string, unknown>, RegExp][] = [
    ['below a depth-0 parent', { scope: wide }, { action: 'update_post', resource: 'wp:post:1', environment: 'production', fields: ['title'] }, /depth/],
    ['action', { scope: { ...wide, actions: ['publish_post'] } }, { action: 'publish_post', resource: 'wp:post:1', environment: 'staging', fields: ['title'] }, /wider than its parent: actions/],
    ['environment', { scope: { ...wide, environments: ['staging'] } }, { action: 'update_post', resource: 'wp:post:1', environment: 'staging', fields: ['title'] }, /wider than its parent: environments/],
    // canonical: neither of content-agent-3's own fields (body, tags through d-orch-content) nor the parent's.
    ['field', { scope: { ...wide, fields: ['canonical'] } }, { action: 'update_post', resource: 'wp:post:1', environment: 'production', fields: ['canonical'] }, /wider than its parent: fields/],
    ['whole resource', { scope: { ...wide, fields: ['*'] } }, { action: 'update_post', resource: 'wp:post:1', environment: 'production' }, /wider than its parent: fields/],
    ['resource', { scope: { ...wide, resources: ['**'] } }, { action: 'update_post', resource: 'wp:post:1', environment: 'production', fields: ['title'] }, /wider than its parent: resources/],
    ['risk', { scope: { ...wide, constraints: { risk_max: 2 } } }, { action: 'update_post', resource: 'wp:post:1', environment: 'production', fields: ['title'] }, /wider than its parent: risk/],
  ];
  it.each(cases)('%s', async (_name, edge, request, reason) => {
    await plant({ id: 'planted', from: 'seo-agent-7', to: 'content-agent-3', scope: wide as Edge['scope'], ...edge });
    const r = await ask('content-agent-3', request);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.allow).toBe(false);
    expect(r.body.token).toBeNull();
    expect(r.body.reasons.join('\n')).toMatch(reason);
  });

  it('a planted grant not from governance, or a delegate edge first, is no chain', async () => {
    await plant({ id: 'fake-grant', kind: 'grant', from: 'orchestrator', to: 'content-agent-3', scope: { ...wide, fields: ['*'], actions: ['publish_post'] } as Edge['scope'] });
    await plant({ id: 'fake-root', kind: 'delegate', from: 'governance', to: 'content-agent-3', scope: { ...wide, fields: ['*'], actions: ['publish_post'] } as Edge['scope'] });
    const r = await ask('content-agent-3', { action: 'publish_post', resource: 'wp:post:1', environment: 'production' });
    expect(r.body.allow).toBe(false);
  });

  it('a planted delegation that outlives its parent stops counting when the parent ends', async () => {
    const clock = h.clock as ManualClock;
    const g = await h.call('governance', {
      method: 'POST', url: '/v1/grants',
      payload: { id: 'g-short', to: 'publisher', reason: 'short', max_depth: 1, expires_at: new Date(clock.now() + HOUR).toISOString(), scope: { actions: ['read_post'], resources: ['wp:post:*'], risk_max: 0 } },
    });
    expect(g.status).toBe(201);
    await plant({ id: 'long', from: 'publisher', to: 'content-agent-3', expires_at: clock.now() + 100 * HOUR, scope: { actions: ['read_post'], resources: ['wp:post:*'], environments: ['*'], fields: ['*'], constraints: { risk_max: 0 } } });
    const read = { action: 'read_post', resource: 'wp:post:1', environment: 'production' };
    // While both are live the planted edge is still wider (its window): refused already.
    expect((await ask('content-agent-3', read)).body.allow).toBe(false);
    clock.advance(2 * HOUR);
    const r = await ask('content-agent-3', read);
    expect(r.body.allow).toBe(false);
    expect(r.body.reasons.join('\n')).toMatch(/g-short.*expired/);
  });
});
