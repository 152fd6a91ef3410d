import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PolicyEngine } from '../../src/policy/index.js';
import { buildShippedPolicy, decisionInput, delegation, grant, MS_DAY, NOW } from './support.js';

let engine: PolicyEngine;
let cleanup: () => Promise<void>;

beforeAll(async () => {
  ({ engine, remove: cleanup } = await buildShippedPolicy('policy-decision'));
});
afterAll(() => cleanup());

describe('decision entrypoint (real opa build, evaluated through opa-wasm)', () => {
  it('allows a valid chain and names the obligations of the field', () => {
    const r = engine.decide(decisionInput());
    expect(r).toMatchObject({ allow: true, reasons: [], chain_index: 0, risk: 1 });
    expect(r.obligations).toEqual({
      lease_required: true,
      version_required: true,
      approval_required: false,
      resource_class: 'WRITE_EXCLUSIVE',
      field_classes: { title: 'WRITE_EXCLUSIVE' },
      conflict_domain: null,
    });
    expect(r.chains).toEqual([
      { index: 0, ok: true, problems: [], edges: [{ id: 'g-orch', ok: true, problems: [] }, { id: 'd-orch-seo', ok: true, problems: [] }] },
    ]);
  });

  it('denies a key no resource class matches, as the service refuses it (UNKNOWN_RESOURCE)', () => {
    const everything = grant({ scope: { ...grant().scope, resources: ['**'] } });
    const r = engine.decide(decisionInput({ chains: [{ edges: [everything, delegation({ scope: { ...delegation().scope, resources: ['**'] } })] }], owners: [] }, { resource: 'misc:thing' }));
    expect(r.allow).toBe(false);
    expect(r.reasons).toContain('resource misc:thing matches no resource class in data.writ.resource_classes');
  });

  it('runs the domain rules below writ.authz.domain on the properties a caller sends (owner_only, in wasm)', () => {
    const editor = (ownerID: unknown) =>
      engine.decide(
        decisionInput(
          { chains: [{ edges: [grant({ to: 'editor' })] }], properties: { subject: {}, action: {}, resource: ownerID === undefined ? {} : { ownerID } } },
          { principal: 'editor' },
        ),
      );
    expect(editor(undefined).allow).toBe(true);
    expect(editor('editor').allow).toBe(true);
    const other = editor('someone-else');
    expect(other.allow).toBe(false);
    expect(other.reasons).toEqual(['domain rule owner_only: editor may update_post only items whose ownerID is its own id; wp:post:1024 has ownerID someone-else']);
  });

  it('denies through a revoked edge and names the edge and the instant', () => {
    const r = engine.decide(decisionInput({ chains: [{ edges: [grant(), delegation({ revoked_at: NOW - 1 })] }] }));
    expect(r.allow).toBe(false);
    expect(r.chain_index).toBeNull();
    expect(r.reasons).toEqual(['chain 0: edge d-orch-seo (orchestrator → seo-agent-7) was revoked at 2025-12-31T23:59:59.999Z']);
    expect(r.chains[0]?.edges[1]).toEqual({ id: 'd-orch-seo', ok: false, problems: ['edge d-orch-seo (orchestrator → seo-agent-7) was revoked at 2025-12-31T23:59:59.999Z'] });
  });

  it('still allows through an independent chain when one is revoked', () => {
    const throughRevoked = { edges: [grant({ revoked_at: NOW }), delegation()] };
    const direct = { edges: [grant({ id: 'g-seo', to: 'seo-agent-7' })] };
    const r = engine.decide(decisionInput({ chains: [throughRevoked, direct] }));
    expect(r).toMatchObject({ allow: true, chain_index: 1 });
  });

  it('treats the window as [not_before, expires_at): boundary instants', () => {
    const at = (edge: Parameters<typeof delegation>[0]) => engine.decide(decisionInput({ chains: [{ edges: [grant(), delegation(edge)] }] }));
    expect(at({ not_before: NOW }).allow).toBe(true);
    expect(at({ not_before: NOW + 1 }).reasons).toEqual(['chain 0: edge d-orch-seo (orchestrator → seo-agent-7) is not valid before 2026-01-01T00:00:00.001Z']);
    expect(at({ expires_at: NOW + 1 }).allow).toBe(true);
    expect(at({ expires_at: NOW }).reasons).toEqual(['chain 0: edge d-orch-seo (orchestrator → seo-agent-7) expired at 2026-01-01T00:00:00Z']);
  });

  it('narrows a child whose parent was narrowed after the delegation was written', () => {
    const narrowed = grant({ scope: { ...grant().scope, fields: ['meta_description'] } });
    const r = engine.decide(decisionInput({ chains: [{ edges: [narrowed, delegation()] }] }));
    expect(r.reasons).toEqual([
      "chain 0: edge d-orch-seo (orchestrator → seo-agent-7) is wider than its parent: fields: title is not in edge g-orch's [meta_description]",
    ]);
  });

  it('denies fields outside the final scope, naming them', () => {
    const r = engine.decide(decisionInput({}, { fields: ['body', 'title'] }));
    expect(r.reasons).toEqual(['chain 0: fields: body is not in the scope of edge d-orch-seo [meta_description, title]']);
  });

  it('denies a write to managed state without an owner', () => {
    const r = engine.decide(decisionInput({ owners: [{ field: 'title', owner: null, edge_id: null }] }));
    expect(r).toMatchObject({ allow: false, chain_index: 0, reasons: ['no owner for field title of managed resource wp:post:1024'] });
  });

  it('requires an approval above the environment threshold and accepts a covering one', () => {
    const strong = grant({ to: 'seo-agent-7', scope: { ...grant().scope, constraints: { risk_max: 3 } } });
    const ask = decisionInput({ chains: [{ edges: [strong] }] }, { action: 'publish_post', risk: 3 });
    const denied = engine.decide(ask);
    expect(denied.allow).toBe(false);
    expect(denied.obligations.approval_required).toBe(true);
    expect(denied.reasons).toEqual([
      'approval required: risk 3 of publish_post on wp:post:1024 is above the production threshold 2; an approval by a principal with an approves edge to seo-agent-7 is needed',
    ]);
    const approves = grant({ id: 'a-editor', kind: 'approves', from: 'editor', to: 'seo-agent-7', max_depth: null, scope: { actions: ['publish_post'], resources: ['wp:**'], environments: ['production'], fields: ['*'], constraints: { risk_max: 3 } } });
    expect(engine.decide({ ...ask, approval: { by: 'editor', edges: [approves] } }).allow).toBe(true);
    const expired = { ...approves, expires_at: NOW - MS_DAY };
    expect(engine.decide({ ...ask, approval: { by: 'editor', edges: [expired] } }).reasons[0]).toMatch(/^approval by editor does not cover publish_post/);
  });

  it('denies an action that is not in the catalogue', () => {
    const any = grant({ to: 'seo-agent-7', scope: { ...grant().scope, actions: ['*'] } });
    const r = engine.decide(decisionInput({ chains: [{ edges: [any] }] }, { action: 'drop_database' }));
    expect(r.reasons).toEqual(['action drop_database is not in the action catalogue']);
  });

  it('says when there is no candidate chain at all', () => {
    expect(engine.decide(decisionInput({ chains: [] })).reasons).toEqual(['no candidate chain from governance to seo-agent-7']);
  });

  it('exposes the policy data and a content revision', () => {
    expect(engine.revision).toMatch(/^sha256:[0-9a-f]{16}$/);
    expect(engine.data.writ.actions.update_post).toMatchObject({ risk: 1, write: true });
    expect(engine.data.writ.approval_threshold).toEqual({ production: 2 });
  });
});
