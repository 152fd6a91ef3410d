/**
 * Writes tell no more than reads: a caller that may not read an edge (GET /v1/edges/:id answers it
 * UNKNOWN_EDGE) or ask about a principal must not learn of them by writing either — revoking the edge,
 * taking its id for a delegation, or delegating to the principal once it is revoked. Each answer is
 * the one a missing edge, a free id or an unknown principal gets; a caller who may read gets the precise one.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { startHarness, type Harness } from '../support/harness.js';

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
  // editor-alice may ask about seo-agent-7, so read d-orch-seo (orchestrator → seo-agent-7), but not revoke it.
  const audit = await h.call('governance', {
    method: 'POST', url: '/v1/grants',
    payload: { id: 'g-alice-reads-seo', to: 'editor-alice', reason: 'reviews the SEO agent', max_depth: 0, scope: { actions: ['audit_read'], resources: ['audit:principal:seo-agent-7'], environments: ['*'], fields: ['*'], risk_max: 0 } },
  });
  expect(audit.status).toBe(201);
  expect((await h.call('governance', { method: 'POST', url: '/v1/principals', payload: { id: 'gone-agent', kind: 'agent', keys: [] } })).status).toBe(201);
  expect((await h.call('governance', { method: 'DELETE', url: '/v1/principals/gone-agent?reason=retired' })).status).toBe(200);
}, 60_000);
afterAll(async () => h?.close());

type Answer = { status: number; body: unknown };
/** What a caller can tell of an answer, the id it named taken out. */
const seen = (r: Answer, id: string) => ({ status: r.status, body: JSON.parse(JSON.stringify(r.body).split(id).join('<id>')) as unknown });

const revoke = (principal: string, id: string) => h.call(principal, { method: 'DELETE', url: `/v1/edges/${id}?reason=cleanup` });
const delegate = (principal: string, body: object) => h.call(principal, { method: 'POST', url: '/v1/delegations', payload: body });
/** A delegation orchestrator holds what it needs for (titles of posts in production). */
const fits = (extra: object = {}) => ({
  from: 'orchestrator', to: 'seo-agent-7', reason: 'titles only', max_depth: 0,
  scope: { actions: ['update_post'], resources: ['wp:post:*'], environments: ['production'], fields: ['title'], risk_max: 1 }, ...extra,
});

describe('DELETE /v1/edges/:id by a caller who may not read the edge', () => {
  it('answers 404 UNKNOWN_EDGE, word for word as for an edge that does not exist, and revokes nothing', async () => {
    const unknown = await revoke('content-agent-3', 'no-such-edge');
    expect(unknown.status).toBe(404);
    expect((unknown.body as { code: string }).code).toBe('UNKNOWN_EDGE');
    const known = await revoke('content-agent-3', 'd-orch-seo');
    expect(seen(known, 'd-orch-seo')).toEqual(seen(unknown, 'no-such-edge'));
    expect(JSON.stringify(known.body)).not.toMatch(/orchestrator|governance|seo-agent-7/);
    expect((await h.call('governance', { method: 'GET', url: '/v1/edges/d-orch-seo' })).body.edge.revoked_at).toBeNull();
  });

  it('costs the same work for one that exists as for an unknown id', async () => {
    const current = vi.spyOn(h.ctx.graph, 'current');
    const graphReads = async (id: string) => {
      current.mockClear();
      await revoke('content-agent-3', id);
      return current.mock.calls.length;
    };
    try {
      expect(await graphReads('d-orch-seo')).toBe(await graphReads('no-such-edge'));
    } finally {
      current.mockRestore();
    }
  });

  it('a caller who may read it but not revoke it (its holder, an audit_read on its `to`) gets 403 FORBIDDEN naming who may', async () => {
    for (const reader of ['seo-agent-7', 'editor-alice']) {
      expect((await h.call(reader, { method: 'GET', url: '/v1/edges/d-orch-seo' })).status, reader).toBe(200);
      const r = await revoke(reader, 'd-orch-seo');
      expect([r.status, r.body.code], reader).toEqual([403, 'FORBIDDEN']);
      expect(r.body.detail, reader).toContain('orchestrator');
    }
    expect((await revoke('governance', 'no-such-edge')).body.code).toBe('UNKNOWN_EDGE');
  });

  it('the edge\'s `from` revokes it', async () => {
    const made = await delegate('orchestrator', fits({ id: 'd-orch-seo-revoked' }));
    expect(made.status).toBe(201);
    const r = await revoke('orchestrator', 'd-orch-seo-revoked');
    expect([r.status, r.body.revoked]).toEqual([200, true]);
  });
});

describe('POST /v1/delegations with an id taken by an edge the caller may not read', () => {
  // g-editor-alice: governance → editor-alice, which orchestrator may not read.
  const taken = 'g-editor-alice';
  const free = 'd-free-id';
  const revision = async () => (await h.ctx.graph.current()).revision;

  it('is judged as if the id were free: the same status, code and message for every refusal', async () => {
    expect((await h.call('orchestrator', { method: 'GET', url: `/v1/edges/${taken}` })).body.code).toBe('UNKNOWN_EDGE');
    const refusals: [string, string, object][] = [
      ['ATTENUATION_VIOLATION', 'orchestrator', fits({ scope: { actions: ['publish_post'], resources: ['wp:post:*'], environments: ['production'], fields: ['status'], risk_max: 1 } })],
      ['UNKNOWN_PRINCIPAL', 'orchestrator', fits({ to: 'no-such-agent' })],
      ['UNPROCESSABLE', 'orchestrator', fits({ to: 'orchestrator' })],
      ['UNPROCESSABLE', 'orchestrator', fits({ expires_at: '2020-01-01T00:00:00Z' })],
      ['FORBIDDEN', 'content-agent-3', fits()],
    ];
    for (const [code, caller, body] of refusals) {
      const before = await revision();
      const onFree = await delegate(caller, { ...body, id: free });
      const onTaken = await delegate(caller, { ...body, id: taken });
      expect(onFree.body.code, JSON.stringify(body)).toBe(code);
      expect(seen(onTaken, taken), JSON.stringify(body)).toEqual(seen(onFree, free));
      expect(await revision()).toBe(before);
    }
  });

  it('only when everything else would succeed: 409 ALREADY_EXISTS saying the id is taken, nothing of the edge, and nothing written', async () => {
    const before = await revision();
    const r = await delegate('orchestrator', fits({ id: taken }));
    expect([r.status, r.body.code]).toEqual([409, 'ALREADY_EXISTS']);
    expect(r.body.detail).toMatch(/taken/);
    expect(r.body.detail).toMatch(/omit/);
    expect(r.body.detail.split(taken).join('<id>')).not.toMatch(/different content|editor-alice|governance|revoke/);
    expect(r.body.details ?? {}).toEqual({});
    expect(await revision()).toBe(before);
  });

  it('a caller who may read the edge gets the precise answer; the idempotent retry of one\'s own edge is 200', async () => {
    const other = await delegate('governance', fits({ id: taken }));
    expect([other.status, other.body.code]).toEqual([409, 'ALREADY_EXISTS']);
    expect(other.body.detail).toMatch(/different content/);
    const first = await delegate('orchestrator', fits({ id: 'd-orch-titles' }));
    expect(first.status).toBe(201);
    const again = await delegate('orchestrator', fits({ id: 'd-orch-titles' }));
    expect([again.status, again.body.created, again.body.edge.id]).toEqual([200, false, 'd-orch-titles']);
    const changed = await delegate('orchestrator', fits({ id: 'd-orch-titles', reason: 'titles and more' }));
    expect([changed.status, changed.body.code]).toEqual([409, 'ALREADY_EXISTS']);
    expect(changed.body.detail).toMatch(/different content/);
  });

  it('POST /v1/impact of such a delegation answers alike: the same refusals as on a free id, then ALREADY_EXISTS', async () => {
    const impact = (body: object) => h.call('orchestrator', { method: 'POST', url: '/v1/impact', payload: { delegate: body } });
    const exceeding = fits({ scope: { actions: ['publish_post'], resources: ['wp:post:*'], environments: ['production'], fields: ['status'], risk_max: 1 } });
    const onFree = await impact({ ...exceeding, id: free });
    expect(onFree.body.code).toBe('ATTENUATION_VIOLATION');
    expect(seen(await impact({ ...exceeding, id: taken }), taken)).toEqual(seen(onFree, free));
    const fitting = await impact(fits({ id: taken }));
    expect([fitting.status, fitting.body.code]).toEqual([409, 'ALREADY_EXISTS']);
    expect(fitting.body.detail.split(taken).join('<id>')).not.toMatch(/editor-alice|governance/);
  });
});

describe('a delegation to a revoked principal, by a caller who may not ask about it', () => {
  // gone-agent was registered and revoked; orchestrator may not ask about it (until it is given audit_read below).
  const asUnknown = async (send: (to: string) => Promise<Answer>) => {
    const unknown = await send('never-agent');
    expect([unknown.status, (unknown.body as { code: string }).code]).toEqual([404, 'UNKNOWN_PRINCIPAL']);
    expect(seen(await send('gone-agent'), 'gone-agent')).toEqual(seen(unknown, 'never-agent'));
  };

  it('answers 404 UNKNOWN_PRINCIPAL, word for word as for a principal never registered (POST /v1/delegations and POST /v1/impact)', async () => {
    await asUnknown((to) => delegate('orchestrator', fits({ to })));
    await asUnknown((to) => h.call('orchestrator', { method: 'POST', url: '/v1/impact', payload: { delegate: fits({ to }) } }));
  });

  it('a caller who may ask about it is told it is revoked: governance, and a holder of audit_read on audit:principal:gone-agent', async () => {
    const byGovernance = await delegate('governance', fits({ to: 'gone-agent' }));
    expect([byGovernance.status, byGovernance.body.code, byGovernance.body.detail]).toEqual([422, 'UNPROCESSABLE', 'delegate "gone-agent" is revoked']);
    const audit = await h.call('governance', {
      method: 'POST', url: '/v1/grants',
      payload: { id: 'g-orch-reads-gone', to: 'orchestrator', reason: 'checks on its former worker', max_depth: 0, scope: { actions: ['audit_read'], resources: ['audit:principal:gone-agent'], environments: ['*'], fields: ['*'], risk_max: 0 } },
    });
    expect(audit.status).toBe(201);
    for (const r of [await delegate('orchestrator', fits({ to: 'gone-agent' })), await h.call('orchestrator', { method: 'POST', url: '/v1/impact', payload: { delegate: fits({ to: 'gone-agent' }) } })]) {
      expect([r.status, r.body.code, r.body.detail]).toEqual([422, 'UNPROCESSABLE', 'delegate "gone-agent" is revoked']);
    }
  });
});

describe('an auditor (audit_read on audit:principal:* in every environment) reads every edge, and is answered as a reader', () => {
  // An ownership's `to` is managed state, a preemption's may be a class, and a principal id may hold a `:`;
  // none is matched by audit:principal:* segment by segment, yet the auditor reads them (and the principal).
  beforeAll(async () => {
    const grant = (id: string, to: string, resources: string[], actions: string[]) => h.call('governance', {
      method: 'POST', url: '/v1/grants',
      payload: { id, to, reason: 'setup', max_depth: 0, scope: { actions, resources, environments: ['*'], fields: ['*'], risk_max: 0 } },
    });
    expect((await grant('g-publisher-audits', 'publisher', ['audit:principal:*'], ['audit_read'])).status).toBe(201);
    expect((await h.call('governance', { method: 'POST', url: '/v1/principals', payload: { id: 'team:blue', kind: 'agent', keys: [] } })).status).toBe(201);
    expect((await grant('g-team-blue', 'team:blue', ['wp:post:*'], ['read_post'])).status).toBe(201);
    expect((await h.call('governance', { method: 'POST', url: '/v1/preemptions', payload: { id: 'p-ic-agents', from: 'incident-commander', to: 'class:agent', reason: 'takes over agents' } })).status).toBe(201);
  });

  it('GET /v1/edges/:id answers an ownership, a preemption of a class and an edge into team:blue; revoking one is FORBIDDEN, its impact is analysed', async () => {
    expect((await h.call('publisher', { method: 'GET', url: '/v1/principals/team:blue' })).status).toBe(200);
    for (const id of ['o-seo-metadata', 'p-ic-agents', 'g-team-blue']) {
      const read = await h.call('publisher', { method: 'GET', url: `/v1/edges/${id}` });
      expect([read.status, read.body.edge?.id], id).toEqual([200, id]);
      const r = await revoke('publisher', id);
      expect([r.status, r.body.code], id).toEqual([403, 'FORBIDDEN']);
      const impact = await h.call('publisher', { method: 'POST', url: '/v1/impact', payload: { revoke: { edge: id } } });
      expect(impact.status, `${id}: ${JSON.stringify(impact.body)}`).toBe(200);
    }
  });
});

describe('a holder of audit_read on a principal reads the edges that principal gives, as its expiring edges and orphans list them', () => {
  // release-controller may ask about the orchestrator (not about seo-agent-7).
  beforeAll(async () => {
    const audit = await h.call('governance', {
      method: 'POST', url: '/v1/grants',
      payload: { id: 'g-release-reads-orch', to: 'release-controller', reason: 'reviews the orchestrator', max_depth: 0, scope: { actions: ['audit_read'], resources: ['audit:principal:orchestrator'], environments: ['*'], fields: ['*'], risk_max: 0 } },
    });
    expect(audit.status).toBe(201);
    expect((await delegate('orchestrator', fits({ id: 'd-orch-seo-week', expires_at: new Date(h.clock.now() + 86_400_000).toISOString() }))).status).toBe(201);
  });

  it('GET /v1/edges/:id answers it, DELETE is FORBIDDEN naming who may, and its id is refused as itself', async () => {
    const listed = await h.call('release-controller', { method: 'GET', url: '/v1/audit/expiring?principal=orchestrator' });
    expect(listed.body.edges.map((e: { id: string }) => e.id)).toContain('d-orch-seo-week');
    const read = await h.call('release-controller', { method: 'GET', url: '/v1/edges/d-orch-seo-week' });
    expect([read.status, read.body.edge?.id]).toEqual([200, 'd-orch-seo-week']);
    const r = await revoke('release-controller', 'd-orch-seo-week');
    expect([r.status, r.body.code]).toEqual([403, 'FORBIDDEN']);
    const taken = await delegate('release-controller', { ...fits({ id: 'd-orch-seo-week' }), from: 'release-controller' });
    expect([taken.status, taken.body.code]).toEqual([409, 'ALREADY_EXISTS']);
    expect(taken.body.detail).toMatch(/different content/);
  });
});
