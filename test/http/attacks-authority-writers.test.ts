/**
 * Who may change the graph, tried as an attacker: principals that are not governance creating grants,
 * principals, ownerships, approvals, preemptions; a delegate writing edges from others or revoking
 * edges that are not its own; governance itself delegating wider than the delegator holds; and the
 * same through a manifest applied as someone other than governance. Each refusal writes nothing.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { GOVERNANCE_ID } from '../../src/graph/model.js';
import { applyManifest, type GraphManifest } from '../../src/service/index.js';
import { fixtureKey, REPO, startHarness, type Harness } from '../support/harness.js';

let h: Harness;
beforeEach(async () => {
  h = await startHarness();
});
afterEach(async () => h?.close());

const revision = async () => (await h.ctx.graph.current()).revision;
const scope = { actions: ['update_post'], resources: ['wp:post:*'], environments: ['production'], fields: ['body'], risk_max: 1 };

function publicJwk(principal: string) {
  const { d: _d, ...pub } = fixtureKey(principal) as Record<string, unknown>;
  return { ...pub, kid: 'new-key' };
}

describe('governance-only writes, asked by others', () => {
  const writes: [string, string, string, Record<string, unknown>][] = [
    ['a grant', 'POST', '/v1/grants', { to: 'seo-agent-7', reason: 'self-serve', scope: { ...scope, actions: ['*'], resources: ['**'], environments: ['*'], fields: ['*'], risk_max: 9 }, max_depth: 16 }],
    ['a principal', 'POST', '/v1/principals', { id: 'sock-puppet', kind: 'agent', keys: [publicJwk('seo-agent-7')] }],
    ['new keys for another principal', 'POST', '/v1/principals', { id: 'editor-alice', kind: 'human', keys: [publicJwk('seo-agent-7')], attributes: { description: 'human editor' } }],
    ['an ownership', 'POST', '/v1/ownerships', { owner: 'seo-agent-7', resource: 'wp:post:*', fields: ['body'], reason: 'mine' }],
    ['an approval edge', 'POST', '/v1/approvals', { from: 'seo-agent-7', to: 'seo-agent-7', reason: 'self approval', scope: { actions: ['*'], resources: ['**'], risk_max: 9 } }],
    ['a preemption', 'POST', '/v1/preemptions', { from: 'seo-agent-7', to: 'class:incident', reason: 'take over' }],
    ['a principal\'s revocation', 'DELETE', '/v1/principals/editor-alice', { reason: 'rival' }],
  ];
  for (const caller of ['seo-agent-7', 'orchestrator', 'seo-control-plane']) {
    it.each(writes)(`${caller}: %s is FORBIDDEN, nothing written`, async (_name, method, url, payload) => {
      const before = await revision();
      const r = await h.call(caller, { method: method as 'POST', url, payload });
      expect([r.status, r.body.code], JSON.stringify(r.body)).toEqual([403, 'FORBIDDEN']);
      expect(await revision()).toBe(before);
    });
  }
});

describe('edges of others', () => {
  it('a delegate may not write a delegation from its delegator, nor from a third principal', async () => {
    const before = await revision();
    for (const from of ['orchestrator', 'editor-alice']) {
      const r = await h.call('seo-agent-7', { method: 'POST', url: '/v1/delegations', payload: { from, to: 'seo-agent-7', reason: 'take', max_depth: 0, scope } });
      expect([r.status, r.body.code], from).toEqual([403, 'FORBIDDEN']);
    }
    expect(await revision()).toBe(before);
  });

  it('a holder may not revoke the grant it holds, nor an edge it has nothing to do with; the delegator and governance may', async () => {
    const before = await revision();
    const own = await h.call('orchestrator', { method: 'DELETE', url: '/v1/edges/g-orchestrator', payload: { reason: 'drop the root' } });
    expect([own.status, own.body.code]).toEqual([403, 'FORBIDDEN']);
    for (const [caller, id] of [['seo-agent-7', 'g-editor-alice'], ['seo-agent-7', 'd-orch-content'], ['content-agent-3', 'o-seo-metadata'], ['publisher', 'p-incident-release']]) {
      const r = await h.call(caller!, { method: 'DELETE', url: `/v1/edges/${id}`, payload: { reason: 'rival' } });
      expect([r.status, r.body.code], `${caller} ${id}`).toEqual([404, 'UNKNOWN_EDGE']);
    }
    expect(await revision()).toBe(before);
    expect((await h.call('orchestrator', { method: 'DELETE', url: '/v1/edges/d-orch-seo', payload: { reason: 'mine to take back' } })).status).toBe(200);
  });

  it('governance writing a delegation on a principal\'s behalf is held to what that principal holds', async () => {
    const before = await revision();
    const r = await h.call('governance', {
      method: 'POST', url: '/v1/delegations',
      payload: { from: 'seo-agent-7', to: 'content-agent-3', reason: 'on its behalf', max_depth: 0, scope: { ...scope, fields: ['title'] } },
    });
    // seo-agent-7's d-orch-seo has max_depth 0: it may pass nothing on, whoever writes it.
    expect([r.status, r.body.code]).toEqual([403, 'ATTENUATION_VIOLATION']);
    expect(await revision()).toBe(before);
  });

  it('a delegation to a principal id that is not registered, revoked, reserved or governance is refused', async () => {
    await h.call('governance', { method: 'DELETE', url: '/v1/principals/publisher', payload: { reason: 'gone' } });
    const before = await revision();
    for (const to of ['nobody', 'publisher', 'state:wp:post:*', 'class:incident', GOVERNANCE_ID]) {
      const r = await h.call('orchestrator', { method: 'POST', url: '/v1/delegations', payload: { from: 'orchestrator', to, reason: 'x', max_depth: 0, scope } });
      expect(r.status, `${to}: ${JSON.stringify(r.body)}`).toBeGreaterThanOrEqual(400);
      expect(r.status).toBeLessThan(500);
    }
    expect(await revision()).toBe(before);
  });

  it('governance cannot register a second governance nor a principal under a reserved id', async () => {
    const before = await revision();
    for (const [id, kind] of [['gov2', 'governance'], ['governance', 'agent'], ['state:wp:post:1', 'agent'], ['class:incident', 'agent']]) {
      const r = await h.call('governance', { method: 'POST', url: '/v1/principals', payload: { id, kind, keys: [publicJwk('seo-agent-7')] } });
      expect(r.status, `${id}: ${JSON.stringify(r.body)}`).toBeGreaterThanOrEqual(400);
      expect(r.status).toBeLessThan(500);
    }
    expect(await revision()).toBe(before);
  });
});

describe('a manifest applied as someone other than governance', () => {
  const apply = (caller: string, manifest: GraphManifest) => applyManifest(h.ctx, caller, manifest, REPO);

  it('its grants, principals, ownerships and approvals are FORBIDDEN, and the whole manifest writes nothing', async () => {
    const before = await revision();
    const own = { id: 'm-own', from: 'orchestrator', to: 'content-agent-3', reason: 'fine on its own', max_depth: 0, scope };
    const manifests: GraphManifest[] = [
      { delegations: [own], grants: [{ id: 'm-grant', to: 'orchestrator', reason: 'more', scope: { ...scope, actions: ['*'] } }] },
      { delegations: [own], principals: [{ id: 'm-puppet', kind: 'agent', keys: [publicJwk('seo-agent-7')] as never }] },
      { delegations: [own], ownerships: [{ id: 'm-owns', owner: 'orchestrator', resource: 'deploy:site', reason: 'mine' }] },
      { delegations: [own], approvals: [{ id: 'm-appr', from: 'orchestrator', to: 'orchestrator', reason: 'self', scope: { actions: ['*'], resources: ['**'], risk_max: 9 } }] },
      { delegations: [own, { ...own, id: 'm-other', from: 'editor-alice' }] },
    ];
    for (const m of manifests) {
      await expect(apply('orchestrator', m), JSON.stringify(Object.keys(m))).rejects.toMatchObject({ code: 'FORBIDDEN' });
      expect(await revision()).toBe(before);
    }
  });

  it('even as governance, a manifest delegation wider than its delegator fails the manifest', async () => {
    const before = await revision();
    await expect(apply(GOVERNANCE_ID, {
      grants: [{ id: 'm-ok', to: 'publisher', reason: 'fine', scope: { actions: ['read_post'], resources: ['wp:post:*'], risk_max: 0 } }],
      delegations: [{ id: 'm-wide', from: 'seo-agent-7', to: 'content-agent-3', reason: 'wide', max_depth: 0, scope: { ...scope, fields: ['title'] } }],
    })).rejects.toMatchObject({ code: 'ATTENUATION_VIOLATION' });
    expect(await revision()).toBe(before);
  });
});
