import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AttenuationViolationError, UnknownEdgeError, type DecisionRequest, type Edge } from '../../src/sdk/index.js';
import { startServerProcess, type ServerProcess } from '../support/server-process.js';
import { clientFor, revisionOf } from './sdk-support.js';

// An orchestrator (graph/example.yaml: update_post on wp:post:* in production and staging, every field,
// risk up to 2, depth 2) hands a sub-agent (content-agent-3) the title of one post for one task.
let server: ServerProcess;
beforeAll(async () => {
  server = await startServerProcess();
});
afterAll(async () => server?.stop());

const titleOf = (post: string): DecisionRequest => ({ action: 'update_post', resource: `wp:post:${post}`, environment: 'production', fields: ['title'] });
const scopeOf = (post: string) => ({ actions: ['update_post'], resources: [`wp:post:${post}`], environments: ['production'], fields: ['title'], risk_max: 1 });

describe('SDK: an agent delegates part of its authority to a sub-agent', () => {
  it('delegate gives a narrowed scope the sub-agent decides with at once; revoke ends it at once', async () => {
    const { client: orchestrator } = clientFor(server, 'orchestrator');
    const { client: sub } = clientFor(server, 'content-agent-3');
    expect((await sub.decide(titleOf('77'))).allow).toBe(false);

    const edge: Edge = await orchestrator.delegate({ to: 'content-agent-3', scope: scopeOf('77'), reason: 'retitle post 77 for the spring campaign', ttlMs: 600_000 });
    expect(edge).toMatchObject({ kind: 'delegate', from: 'orchestrator', to: 'content-agent-3', creator: 'orchestrator', max_depth: 0, revoked_at: null });
    expect(Date.parse(edge.expires_at!) - Date.now()).toBeGreaterThan(590_000);
    const allowed = await sub.decide(titleOf('77'));
    expect(allowed.allow, allowed.reasons.join('; ')).toBe(true);
    expect(allowed.chain).toEqual(['g-orchestrator', edge.id]);
    // Only what was given: another post, or another field, stays denied.
    expect((await sub.decide(titleOf('78'))).allow).toBe(false);

    const revoked = await orchestrator.revoke(edge.id, 'campaign cancelled');
    expect(revoked).toMatchObject({ revoked: true, edge: { id: edge.id, revoked_at: expect.any(String) } });
    expect((await sub.decide(titleOf('77'))).allow).toBe(false);
    expect((await orchestrator.revoke(edge.id, 'again')).revoked).toBe(false);
  });

  it('a delegation wider than the delegator holds is AttenuationViolationError naming the dimension, and nothing is written', async () => {
    const { client: orchestrator } = clientFor(server, 'orchestrator');
    const refused = await orchestrator.delegate({
      id: 'd-too-wide', to: 'content-agent-3', reason: 'publish too', ttlMs: 60_000,
      scope: { ...scopeOf('77'), actions: ['update_post', 'publish_post'] },
    }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(AttenuationViolationError);
    expect((refused as AttenuationViolationError).problem.violations).toEqual(expect.arrayContaining([expect.stringMatching(/^actions: publish_post/)]));
    await expect(orchestrator.request('GET', '/v1/edges/d-too-wide')).rejects.toBeInstanceOf(UnknownEdgeError);
  });

  it('the same id and request is answered with the edge made before (a retry is safe)', async () => {
    const { client: orchestrator } = clientFor(server, 'orchestrator');
    const request = { id: 'd-retitle-79', to: 'content-agent-3', scope: scopeOf('79'), reason: 'retitle post 79', expires_at: new Date(Date.now() + 600_000).toISOString() };
    const first = await orchestrator.delegate(request);
    const again = await orchestrator.delegate(request);
    expect(again).toEqual(first);
    await orchestrator.revoke(first.id, 'test done');
  });

  it('withDelegation: the sub-agent writes through the gateway during the task; the delegation is revoked when it ends, also when it fails', async () => {
    const { client: orchestrator } = clientFor(server, 'orchestrator');
    const { client: sub } = clientFor(server, 'content-agent-3');
    let given: Edge | undefined;
    const receipt = await orchestrator.withDelegation({ to: 'content-agent-3', scope: scopeOf('80'), reason: 'retitle post 80', ttlMs: 60_000 }, async (edge) => {
      given = edge;
      const decision = await sub.decide(titleOf('80'));
      return sub.withLease([decision], async ({ act }) => act({ payload: { title: 'Spring' }, expected_version: await revisionOf(server, '80') }));
    });
    expect(receipt).toMatchObject({ status: 'COMPLETED', principal: 'content-agent-3', chain: ['g-orchestrator', given!.id] });
    expect((await orchestrator.request<{ edge: Edge }>('GET', `/v1/edges/${given!.id}`)).edge.revoked_at).not.toBeNull();
    expect((await sub.decide(titleOf('80'))).allow).toBe(false);

    const failure = new Error('the sub-agent gave up');
    let failed: Edge | undefined;
    await expect(orchestrator.withDelegation({ to: 'content-agent-3', scope: scopeOf('81'), reason: 'retitle post 81', ttlMs: 60_000 }, async (edge) => {
      failed = edge;
      throw failure;
    })).rejects.toBe(failure);
    expect((await orchestrator.request<{ edge: Edge }>('GET', `/v1/edges/${failed!.id}`)).edge.revoked_at).not.toBeNull();
  });

  it('withDelegation wants an end (ttlMs or expires_at), and delegate one of them: a TypeError before anything is sent', async () => {
    const { client: orchestrator, sent } = clientFor(server, 'orchestrator');
    let ran = false;
    await expect(orchestrator.withDelegation({ to: 'content-agent-3', scope: scopeOf('82'), reason: 'no end' }, async () => void (ran = true)))
      .rejects.toThrow(new TypeError('withDelegation: give ttlMs or expires_at, so that the delegation ends by itself if it cannot be revoked'));
    await expect(orchestrator.delegate({ to: 'content-agent-3', scope: scopeOf('82'), reason: 'both', ttlMs: 1_000, expires_at: Date.now() + 1_000 }))
      .rejects.toThrow(new TypeError('delegate: give ttlMs or expires_at, not both'));
    await expect(orchestrator.delegate({ to: 'content-agent-3', scope: scopeOf('82'), reason: 'negative', ttlMs: -5 }))
      .rejects.toThrow(/^delegate: ttlMs must be a positive number of ms, got -5$/);
    expect(ran).toBe(false);
    expect(sent).toEqual([]);
  });

  it('a delegation ends by itself at its expiry', async () => {
    const { client: orchestrator } = clientFor(server, 'orchestrator');
    const { client: sub } = clientFor(server, 'content-agent-3');
    const edge = await orchestrator.delegate({ to: 'content-agent-3', scope: scopeOf('83'), reason: 'a short task', ttlMs: 1_500 });
    expect((await sub.decide(titleOf('83'))).allow).toBe(true);
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, Date.parse(edge.expires_at!) - Date.now()) + 100));
    const after = await sub.decide(titleOf('83'));
    expect(after.allow).toBe(false);
    expect(after.reasons.join('\n')).toMatch(/expired/);
  });
});
