import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AlreadyExistsError, AttenuationViolationError, DelegationNotRevokedError, ForbiddenError, MalformedRequestError, UnknownEdgeError, UnprocessableError, WritClient, type DecisionRequest, type Edge } from '../../src/sdk/index.js';
import { readAdminCredential } from '../../src/service/index.js';
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

  it('capabilities: what an agent holds (the scope to narrow and give), now and at a past instant; another\'s only for governance or an auditor', async () => {
    const { client: orchestrator } = clientFor(server, 'orchestrator');
    const { client: sub } = clientFor(server, 'content-agent-3');
    const own = await orchestrator.capabilities();
    expect(own.principal).toBe('orchestrator');
    const grant = own.capabilities.find((c) => c.valid && c.chain.map((e) => e.id).join() === 'g-orchestrator')!;
    expect(grant.scope).toMatchObject({ actions: ['read_post', 'update_post'], resources: ['wp:post:*'], environments: ['production', 'staging'], fields: ['*'], constraints: { risk_max: 2 } });
    const before = new Date();
    await new Promise((resolve) => setTimeout(resolve, 5));
    // Give a sub-agent the grant's scope narrowed to one post and one field.
    const edge = await orchestrator.delegate({ to: 'content-agent-3', reason: 'retitle post 88', ttlMs: 60_000, scope: { ...grant.scope, resources: ['wp:post:88'], environments: ['production'], fields: ['title'] } });
    const now = await sub.capabilities();
    expect(now.capabilities.find((c) => c.chain.at(-1)!.id === edge.id)).toMatchObject({ valid: true, problems: [], scope: { resources: ['wp:post:88'], fields: ['title'] } });
    const then = await sub.capabilities({ at: before });
    expect(then.at).toBe(before.toISOString());
    expect(then.capabilities.some((c) => c.chain.some((e) => e.id === edge.id))).toBe(false);
    await expect(orchestrator.capabilities({ principal: 'content-agent-3' })).rejects.toBeInstanceOf(ForbiddenError);
    await orchestrator.revoke(edge.id, 'test done');
  });

  it('a delegation wider than the delegator holds is AttenuationViolationError naming the dimension, and nothing is written', async () => {
    const { client: orchestrator } = clientFor(server, 'orchestrator');
    const refused = await orchestrator.delegate({
      id: 'd-too-wide', to: 'content-agent-3', reason: 'publish too', ttlMs: 60_000,
      scope: { ...scopeOf('77'), actions: ['update_post', 'publish_post'], environments: ['*'], risk_max: 3 },
    }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(AttenuationViolationError);
    expect((refused as AttenuationViolationError).problem.violations).toEqual([
      expect.stringMatching(/^actions: publish_post is not in the delegator's/),
      expect.stringMatching(/^environments: \* is not in the delegator's/),
      expect.stringMatching(/^risk: 3 exceeds the delegator's risk_max 2/),
    ]);
    await expect(orchestrator.request('GET', '/v1/edges/d-too-wide')).rejects.toBeInstanceOf(UnknownEdgeError);
  });

  it('the same id and request is answered with the edge made before (a retry is safe)', async () => {
    const { client: orchestrator } = clientFor(server, 'orchestrator');
    const request = { id: 'd-retitle-79', to: 'content-agent-3', scope: scopeOf('79'), reason: 'retitle post 79', expires_at: new Date(Date.now() + 600_000).toISOString() };
    const first = await orchestrator.delegate(request);
    const again = await orchestrator.delegate(request);
    expect(again).toEqual(first);
    // A ttlMs counts from each call: the retry asks for another end, under an id already taken.
    const { expires_at: _end, ...counted } = request;
    await orchestrator.delegate({ ...counted, id: 'd-retitle-79b', ttlMs: 600_000 });
    await new Promise((resolve) => setTimeout(resolve, 5));
    await expect(orchestrator.delegate({ ...counted, id: 'd-retitle-79b', ttlMs: 600_000 })).rejects.toBeInstanceOf(AlreadyExistsError);
    // An edge's own scope (constraints.risk_max) is a scope to give again.
    const copy = await orchestrator.delegate({ to: 'content-agent-3', scope: first.scope, reason: 'the same again', ttlMs: 60_000 });
    expect(copy.scope).toEqual(first.scope);
    for (const id of [first.id, 'd-retitle-79b', copy.id]) await orchestrator.revoke(id, 'test done');
    await expect(orchestrator.revoke(first.id, '')).rejects.toBeInstanceOf(MalformedRequestError);
  });

  it('it dies with any edge above it: revoking the delegator\'s grant ends the sub-agent\'s authority too', async () => {
    const admin = readAdminCredential(server.dataDir);
    const governance = new WritClient({ baseUrl: server.url, principal: 'governance', privateJwk: admin.privateJwk as never });
    await governance.request('POST', '/v1/grants', {
      id: 'g-publisher-delegable', to: 'publisher', reason: 'the publisher may hand publishing of post 90 on', max_depth: 1,
      scope: { actions: ['publish_post'], resources: ['wp:post:90'], environments: ['production'], fields: ['status'], risk_max: 2 },
    });
    const { client: publisher } = clientFor(server, 'publisher');
    const { client: sub } = clientFor(server, 'content-agent-3');
    await publisher.delegate({ to: 'content-agent-3', reason: 'publish post 90', ttlMs: 600_000, scope: { actions: ['publish_post'], resources: ['wp:post:90'], environments: ['production'], fields: ['status'], risk_max: 2 } });
    const publish: DecisionRequest = { action: 'publish_post', resource: 'wp:post:90', environment: 'production', fields: ['status'] };
    const before = await sub.decide(publish);
    expect(before.allow, before.reasons.join('; ')).toBe(true);
    await governance.revoke('g-publisher-delegable', 'publishing of post 90 moves elsewhere');
    const after = await sub.decide(publish);
    expect(after.allow).toBe(false);
    expect(after.reasons.join('\n')).toMatch(/g-publisher-delegable.*revoked/);
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

  it('withDelegation refuses, before the task runs, an id already revoked and an edge that ended before Writ made it', async () => {
    const { client: orchestrator } = clientFor(server, 'orchestrator');
    let runs = 0;
    const request = { id: 'd-task-84', to: 'content-agent-3', scope: scopeOf('84'), reason: 'retitle post 84', expires_at: new Date(Date.now() + 600_000).toISOString() };
    await orchestrator.withDelegation(request, async () => void runs++);
    expect(runs).toBe(1);
    const again = await orchestrator.withDelegation(request, async () => void runs++).catch((e: unknown) => e);
    expect(again).toBeInstanceOf(AlreadyExistsError);
    expect((again as AlreadyExistsError).detail).toMatch(/^edge d-task-84 was revoked at .+: a revoked edge stays revoked; make a new one under a new id$/);
    expect((again as AlreadyExistsError).problem).toMatchObject({ code: 'ALREADY_EXISTS', edge_id: 'd-task-84' });
    // An expiry already past: Writ refuses to make the edge at all (it would never count).
    const past = new Date(Date.now() - 1_000).toISOString();
    const ended = await orchestrator.withDelegation({ ...request, id: 'd-task-85', expires_at: past }, async () => void runs++).catch((e: unknown) => e);
    expect(ended).toBeInstanceOf(UnprocessableError);
    expect((ended as UnprocessableError).detail).toMatch(/^expires_at .+ is not after now \(.+\): the edge would never count$/);
    await expect(orchestrator.request('GET', '/v1/edges/d-task-85')).rejects.toMatchObject({ status: 404 });
    // A retry under the id of an edge made before, that has ended since: refused all the same, by the SDK.
    const soon = { ...request, id: 'd-task-87', expires_at: new Date(Date.now() + 300).toISOString() };
    await orchestrator.delegate(soon);
    await new Promise((resolve) => setTimeout(resolve, 400));
    const retried = await orchestrator.withDelegation(soon, async () => void runs++).catch((e: unknown) => e);
    expect(retried).toBeInstanceOf(UnprocessableError);
    expect((retried as UnprocessableError).detail).toMatch(/^delegation d-task-87 ended at .+ \(made at .+\): give a later expires_at or a longer ttlMs$/);
    expect((retried as UnprocessableError).problem).toEqual({ edge_id: 'd-task-87' });
    await expect(orchestrator.withDelegation({ ...request, id: 'd-task-86', not_before: new Date(Date.now() + 60_000).toISOString() }, async () => void runs++))
      .rejects.toThrow(new TypeError('withDelegation: the task runs now, so the delegation has no not_before (delegate() takes one)'));
    expect(runs).toBe(1);
  });

  it('an id names one task: two tasks at once under one id share its edge, and the first to end revokes it under the other', async () => {
    const { client: orchestrator } = clientFor(server, 'orchestrator');
    const { client: sub } = clientFor(server, 'content-agent-3');
    const request = { id: 'd-shared-89', to: 'content-agent-3', scope: scopeOf('89'), reason: 'retitle post 89', expires_at: new Date(Date.now() + 600_000).toISOString() };
    let firstEnded!: () => void;
    const ended = new Promise<void>((resolve) => (firstEnded = resolve));
    let secondRunning!: () => void;
    const running = new Promise<void>((resolve) => (secondRunning = resolve));
    const [, second] = await Promise.all([
      // The first task ends (and revokes) only once the second runs on the same edge.
      orchestrator.withDelegation(request, async () => running).finally(() => firstEnded()),
      orchestrator.withDelegation(request, async () => {
        expect((await sub.decide(titleOf('89'))).allow).toBe(true);
        secondRunning();
        await ended;
        return (await sub.decide(titleOf('89'))).allow;
      }),
    ]);
    expect(second).toBe(false);
  });

  it('withDelegation says when it could not revoke: DelegationNotRevokedError with the task\'s value or error, and the edge still live', async () => {
    // Writ unreachable for the revocation only.
    const unreachable: typeof fetch = (input, init) => (init?.method === 'DELETE' ? Promise.reject(new TypeError('fetch failed')) : fetch(input, init));
    const { client: orchestrator } = clientFor(server, 'orchestrator', unreachable);
    const { client: sub } = clientFor(server, 'content-agent-3');
    const done = await orchestrator.withDelegation({ to: 'content-agent-3', scope: scopeOf('86'), reason: 'retitle post 86', ttlMs: 60_000 }, async () => 'retitled').catch((e: unknown) => e);
    expect(done).toBeInstanceOf(DelegationNotRevokedError);
    const notRevoked = done as DelegationNotRevokedError;
    expect(notRevoked).toMatchObject({ taskSucceeded: true, value: 'retitled', taskError: undefined, cause: new TypeError('fetch failed') });
    expect(notRevoked.message).toMatch(new RegExp(`^delegation ${notRevoked.edge.id} to content-agent-3 may still be live until .+: revoking it after its task \\(done\\) failed: fetch failed$`));
    expect((await sub.decide(titleOf('86'))).allow).toBe(true);
    const { client: reachable } = clientFor(server, 'orchestrator');
    await reachable.revoke(notRevoked.edge.id, 'revoked by hand');
    expect((await sub.decide(titleOf('86'))).allow).toBe(false);

    const failure = new Error('the sub-agent gave up');
    const failed = await orchestrator.withDelegation({ to: 'content-agent-3', scope: scopeOf('87'), reason: 'retitle post 87', ttlMs: 60_000 }, async () => {
      throw failure;
    }).catch((e: unknown) => e);
    expect(failed).toBeInstanceOf(DelegationNotRevokedError);
    expect(failed).toMatchObject({ taskSucceeded: false, value: undefined, taskError: failure });
    await reachable.revoke((failed as DelegationNotRevokedError).edge.id, 'revoked by hand');
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
    // Its id sorts first: a denial explains at most 8 chains, and this file leaves revoked ones behind.
    const edge = await orchestrator.delegate({ id: 'a-short-task-83', to: 'content-agent-3', scope: scopeOf('83'), reason: 'a short task', ttlMs: 1_500 });
    expect((await sub.decide(titleOf('83'))).allow).toBe(true);
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, Date.parse(edge.expires_at!) - Date.now()) + 100));
    const after = await sub.decide(titleOf('83'));
    expect(after.allow).toBe(false);
    expect(after.reasons.join('\n')).toMatch(/expired/);
  });
});
