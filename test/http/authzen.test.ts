/**
 * The AuthZEN Authorization API 1.0 front door, driven with the request and response shapes of the
 * specification's own examples (openid/authzen api/authorization-api-1_0.md), with Writ's principals
 * and keys in place of `alice@example.com` and `account 123`.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { leaseOk } from '../support/agent.js';
import { startHarness, type Harness } from '../support/harness.js';

let h: Harness;
beforeEach(async () => {
  h = await startHarness();
});
afterEach(async () => h?.close());

const seo = { type: 'agent', id: 'seo-agent-7' };
const post = (id: number, fields: string[] = ['title']) => ({ type: 'wp:post', id: `wp:post:${id}`, properties: { environment: 'production', fields } });

const evaluation = (principal: string, payload: unknown, headers: Record<string, string> = {}) =>
  h.call(principal, { method: 'POST', url: '/access/v1/evaluation', payload: payload as Record<string, unknown>, headers });
const evaluations = (principal: string, payload: unknown) => h.call(principal, { method: 'POST', url: '/access/v1/evaluations', payload: payload as Record<string, unknown> });
const search = (principal: string, what: 'subject' | 'resource' | 'action', payload: unknown) =>
  h.call(principal, { method: 'POST', url: `/access/v1/search/${what}`, payload: payload as Record<string, unknown> });

describe('PDP metadata', () => {
  it('GET /.well-known/authzen-configuration names every endpoint under the PDP identifier, without credentials', async () => {
    const r = await h.call(null, { method: 'GET', url: '/.well-known/authzen-configuration', headers: { host: 'pdp.example.com' } });
    expect(r.status).toBe(200);
    expect(r.body).toEqual({
      policy_decision_point: 'http://pdp.example.com',
      access_evaluation_endpoint: 'http://pdp.example.com/access/v1/evaluation',
      access_evaluations_endpoint: 'http://pdp.example.com/access/v1/evaluations',
      search_subject_endpoint: 'http://pdp.example.com/access/v1/search/subject',
      search_resource_endpoint: 'http://pdp.example.com/access/v1/search/resource',
      search_action_endpoint: 'http://pdp.example.com/access/v1/search/action',
    });
  });
});

describe('OpenAPI', () => {
  it('describes the AuthZEN routes', async () => {
    const api = await h.call(null, { method: 'GET', url: '/openapi.json' });
    for (const path of ['/access/v1/evaluation', '/access/v1/evaluations', '/access/v1/search/subject', '/access/v1/search/resource', '/access/v1/search/action', '/.well-known/authzen-configuration']) {
      expect(Object.keys(api.body.paths)).toContain(path);
    }
    expect(api.body.paths['/access/v1/evaluation'].post.requestBody.content['application/json'].schema.required).toEqual(['subject', 'action', 'resource']);
  });
});

describe('POST /access/v1/evaluation', () => {
  it('answers the specification example (action properties, a context time, X-Request-ID) with a decision and a token the gateway accepts', async () => {
    const r = await evaluation(
      'seo-agent-7',
      { subject: seo, resource: post(1024), action: { name: 'update_post', properties: { method: 'PATCH' } }, context: { time: '1985-10-26T01:22-07:00' } },
      { 'x-request-id': 'bfe9eb29-ab87-4ca3-be83-a1d5d8305716' },
    );
    expect(r.status).toBe(200);
    expect(r.headers['x-request-id']).toBe('bfe9eb29-ab87-4ca3-be83-a1d5d8305716');
    expect(r.body.decision).toBe(true);
    expect(r.body.context).toMatchObject({ chain: ['g-orchestrator', 'd-orch-seo'], obligations: { lease_required: true }, policy_revision: expect.stringMatching(/^sha256:/) });
    // The same decision use case as POST /v1/decisions: its signed decision takes the lease.
    const held = await leaseOk(h, 'seo-agent-7', [r.body.context.token]);
    expect(held.keys).toEqual(['wp:post:1024#title']);
    const metrics = await h.call(null, { method: 'GET', url: '/metrics' });
    expect(metrics.raw).toMatch(/writ_decisions_total\{result="allow"\} 1/);
  });

  it('a deny is 200 with decision false, reason_admin and a short reason_user (as in the specification example 1)', async () => {
    const r = await evaluation('seo-agent-7', { subject: seo, resource: post(1024, ['body']), action: { name: 'update_post' } });
    expect(r.status).toBe(200);
    expect(r.body.decision).toBe(false);
    expect(r.body.context.reason_admin['403']).toContain('fields: body is not in the scope of edge d-orch-seo');
    expect(r.body.context.reason_user['403']).toMatch(/^Not allowed: update_post on wp:post:1024\./);
    expect(r.body.context.token).toBeUndefined();
  });

  it('takes a registered alias with its own type, and decides for the canonical key', async () => {
    const r = await evaluation('seo-agent-7', { subject: seo, resource: { type: 'wordpress:article', id: 'wordpress:article:7', properties: { environment: 'production', fields: ['title'] } }, action: { name: 'update_post' } });
    expect(r.body.decision).toBe(true);
    const held = await leaseOk(h, 'seo-agent-7', [r.body.context.token]);
    expect(held.keys).toEqual(['wp:post:7#title']);
  });

  it('refuses a type that is not the key’s prefix, a subject type that is not its kind, and a missing environment (400, nothing decided)', async () => {
    const wrongType = await evaluation('seo-agent-7', { subject: seo, resource: { ...post(1), type: 'wp:page' }, action: { name: 'update_post' } });
    expect(wrongType.status).toBe(400);
    expect(wrongType.body.code).toBe('MALFORMED_REQUEST');
    expect(wrongType.body.detail).toContain('resource.type "wp:page" is not the type of wp:post:1 (expected "wp:post")');
    const wrongKind = await evaluation('seo-agent-7', { subject: { type: 'user', id: 'seo-agent-7' }, resource: post(1), action: { name: 'update_post' } });
    expect(wrongKind.status).toBe(400);
    expect(wrongKind.body.detail).toContain('is not the kind of seo-agent-7 ("agent")');
    const noEnvironment = await evaluation('seo-agent-7', { subject: seo, resource: { type: 'wp:post', id: 'wp:post:1' }, action: { name: 'update_post' } });
    expect(noEnvironment.status).toBe(400);
    expect(noEnvironment.body.detail).toContain('resource.properties.environment is required');
    const missing = await evaluation('seo-agent-7', { subject: seo, action: { name: 'update_post' } });
    expect(missing.status).toBe(400);
    const metrics = await h.call(null, { method: 'GET', url: '/metrics' });
    expect(metrics.raw).not.toMatch(/writ_decisions_total\{result="(allow|deny)"\}/);
  });

  it('ignores unknown members, as the specification requires', async () => {
    const r = await evaluation('seo-agent-7', { subject: { ...seo, nickname: 'seo' }, resource: post(1), action: { name: 'update_post' }, extension: { anything: true } });
    expect(r.status).toBe(200);
    expect(r.body.decision).toBe(true);
  });

  it('authenticates with the caller assertion: none is 401 with WWW-Authenticate: Bearer', async () => {
    const r = await evaluation(null as unknown as string, { subject: seo, resource: post(1), action: { name: 'update_post' } });
    expect(r.status).toBe(401);
    expect(r.headers['www-authenticate']).toBe('Bearer realm="writ"');
  });

  it('the specification’s own example subject is unknown to Writ: governance gets 404, an agent asking about it gets 403', async () => {
    const example = { subject: { type: 'user', id: 'alice@example.com' }, resource: { type: 'account', id: '123' }, action: { name: 'can_read', properties: { method: 'GET' } }, context: { time: '1985-10-26T01:22-07:00' } };
    const asGovernance = await evaluation('governance', example);
    expect(asGovernance.status).toBe(404);
    expect(asGovernance.body.code).toBe('UNKNOWN_PRINCIPAL');
    const asAgent = await evaluation('seo-agent-7', example);
    expect(asAgent.status).toBe(403);
    expect(asAgent.body.code).toBe('FORBIDDEN');
  });
});

describe('asking about another subject', () => {
  const aboutEditor = { subject: { type: 'human', id: 'editor-alice' }, resource: post(3), action: { name: 'update_post' } };

  it('an agent may not; governance may; a principal holding audit_read on audit:principal:* may', async () => {
    const agent = await evaluation('seo-agent-7', aboutEditor);
    expect(agent.status).toBe(403);
    expect(agent.body.detail).toContain('audit_read on audit:principal:editor-alice');
    const governance = await evaluation('governance', aboutEditor);
    expect(governance.body.decision).toBe(true);

    const before = await evaluation('orchestrator', aboutEditor);
    expect(before.status).toBe(403);
    const grant = await h.call('governance', {
      method: 'POST', url: '/v1/grants',
      payload: { id: 'g-orchestrator-audit', to: 'orchestrator', reason: 'the orchestrator checks what its workers may do', max_depth: 0, scope: { actions: ['audit_read'], resources: ['audit:principal:*'], environments: ['*'], fields: ['*'], risk_max: 0 } },
    });
    expect(grant.status, JSON.stringify(grant.body)).toBe(201);
    const auditor = await evaluation('orchestrator', aboutEditor);
    expect(auditor.status).toBe(200);
    expect(auditor.body.decision).toBe(true);

    // Also about a principal whose id has a `:`, which audit:principal:* does not match segment by
    // segment: the auditor reads it everywhere else (whomMayAsk), so it may ask about it too.
    expect((await h.call('governance', { method: 'POST', url: '/v1/principals', payload: { id: 'team:night-bot', kind: 'agent', keys: [] } })).status).toBe(201);
    const aboutBot = await evaluation('orchestrator', { ...aboutEditor, subject: { type: 'agent', id: 'team:night-bot' } });
    expect(aboutBot.status, JSON.stringify(aboutBot.body)).toBe(200);
    expect(aboutBot.body.decision).toBe(false);
    const capabilities = await h.call('orchestrator', { method: 'GET', url: '/v1/principals/team:night-bot/capabilities' });
    expect(capabilities.status, JSON.stringify(capabilities.body)).toBe(200);
    expect(capabilities.body.capabilities).toEqual([]);
    // The agent, which audits no one, still may not.
    expect((await evaluation('seo-agent-7', { ...aboutEditor, subject: { type: 'agent', id: 'team:night-bot' } })).status).toBe(403);
  });
});

describe('properties reach the policy (the owner_only domain rule)', () => {
  const editorUpdate = (ownerID?: string) => ({
    subject: { type: 'human', id: 'editor-alice', properties: { department: 'Editorial' } },
    resource: { type: 'wp:post', id: 'wp:post:12', properties: { environment: 'production', fields: ['title'], ...(ownerID ? { ownerID } : {}) } },
    action: { name: 'update_post' },
  });

  it('an editor may update an item whose ownerID is her own id, not another’s; without ownerID nothing changes', async () => {
    expect((await evaluation('editor-alice', editorUpdate('editor-alice'))).body.decision).toBe(true);
    const other = await evaluation('editor-alice', editorUpdate('editor-bob'));
    expect(other.body.decision).toBe(false);
    expect(other.body.context.reasons).toEqual(['domain rule owner_only: editor-alice may update_post only items whose ownerID is its own id; wp:post:12 has ownerID editor-bob']);
    expect((await evaluation('editor-alice', editorUpdate())).body.decision).toBe(true);
  });
});

describe('POST /access/v1/evaluations', () => {
  // The specification's "Evaluate read action for three documents using all three semantics":
  // documents 1 and 3 allowed, 2 denied. Here: the title of posts 1 and 3, the body of post 2.
  const three = (semantic: string) => ({
    subject: seo,
    action: { name: 'update_post' },
    options: { evaluations_semantic: semantic },
    evaluations: [{ resource: post(1) }, { resource: post(2, ['body']) }, { resource: post(3) }],
  });

  it('execute_all answers every item in order: true, false, true', async () => {
    const r = await evaluations('seo-agent-7', three('execute_all'));
    expect(r.status).toBe(200);
    expect(r.body.evaluations.map((e: { decision: boolean }) => e.decision)).toEqual([true, false, true]);
  });

  it('deny_on_first_deny stops at the first false: true, false', async () => {
    const r = await evaluations('seo-agent-7', three('deny_on_first_deny'));
    expect(r.body.evaluations.map((e: { decision: boolean }) => e.decision)).toEqual([true, false]);
  });

  it('permit_on_first_permit stops at the first true: true', async () => {
    const r = await evaluations('seo-agent-7', three('permit_on_first_permit'));
    expect(r.body.evaluations.map((e: { decision: boolean }) => e.decision)).toEqual([true]);
  });

  it('top-level defaults, an item that overrides the action, and a failing item that is decision false with context.error, in order', async () => {
    const r = await evaluations('seo-agent-7', {
      subject: seo,
      context: { time: '2024-05-31T15:22-07:00' },
      action: { name: 'update_post' },
      evaluations: [
        { resource: post(1) },
        { resource: { type: 'wp:comment', id: 'wp:comment:9', properties: { environment: 'production' } } },
        { action: { name: 'publish_post' }, resource: post(1) },
        { subject: { type: 'human', id: 'editor-alice' }, resource: post(1) },
      ],
    });
    expect(r.status).toBe(200);
    const [first, unknown, override, other] = r.body.evaluations;
    expect(first.decision).toBe(true);
    expect(unknown).toEqual({ decision: false, context: { error: { status: 404, code: 'UNKNOWN_RESOURCE', message: expect.stringContaining('wp:comment:9') } } });
    expect(override.decision).toBe(false);
    expect(override.context.reasons.join(' ')).toContain('publish_post');
    expect(other.context.error).toMatchObject({ status: 403, code: 'FORBIDDEN' });
  });

  it('without items it answers as the single evaluation; an item with no subject and no default is a 400', async () => {
    const single = await evaluations('seo-agent-7', { subject: seo, action: { name: 'update_post' }, resource: post(1) });
    expect(single.body.decision).toBe(true);
    const incomplete = await evaluations('seo-agent-7', { action: { name: 'update_post' }, evaluations: [{ resource: post(1) }] });
    expect(incomplete.status).toBe(400);
    expect(incomplete.body.detail).toContain('evaluations[0] has no subject');
    const badSemantic = await evaluations('seo-agent-7', { ...three('first_come'), options: { evaluations_semantic: 'first_come' } });
    expect(badSemantic.status).toBe(400);
  });
});

describe('search', () => {
  it('resource search: the key patterns the subject’s valid chains give the action on, by type', async () => {
    const r = await search('seo-agent-7', 'resource', { subject: seo, action: { name: 'update_post' }, resource: { type: 'wp:post' } });
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ page: { next_token: '', count: 1, total: 1 }, results: [{ type: 'wp:post', id: 'wp:post:*', properties: { chain: ['g-orchestrator', 'd-orch-seo'] } }], context: { truncated: false } });
    const site = await search('governance', 'resource', { subject: { type: 'control_plane', id: 'seo-control-plane' }, action: { name: 'bulk_update_canonical' }, resource: { type: 'site:example.com' } });
    expect(site.body.results.map((x: { id: string }) => x.id)).toEqual(['site:example.com:canonical-bulk']);
  });

  it('action search pages through the actions the policy allows (page.limit, page.token), and refuses a token sent with another request', async () => {
    const ask = (page: Record<string, unknown>) => search('editor-alice', 'action', { subject: { type: 'human', id: 'editor-alice' }, resource: post(1), page });
    const first = await ask({ limit: 2 });
    expect(first.status).toBe(200);
    expect(first.body.page).toMatchObject({ count: 2, total: 4 });
    expect(first.body.page.next_token).not.toBe('');
    const second = await ask({ limit: 2, token: first.body.page.next_token });
    expect(second.body.page).toMatchObject({ next_token: '', count: 2, total: 4 });
    expect([...first.body.results, ...second.body.results].map((a: { name: string }) => a.name)).toEqual(['publish_post', 'read_post', 'unpublish_post', 'update_post']);
    const changed = await ask({ limit: 3, token: first.body.page.next_token });
    expect(changed.status).toBe(400);
    expect(changed.body.detail).toContain('page.token belongs to another request');
  });

  it('subject search: who may do this; an agent only ever finds itself, governance finds everyone', async () => {
    const question = (type: string) => ({ subject: { type }, action: { name: 'update_post' }, resource: post(1) });
    const agents = await search('governance', 'subject', question('agent'));
    expect(agents.body.results).toEqual([{ type: 'agent', id: 'seo-agent-7' }]);
    const planes = await search('governance', 'subject', question('control_plane'));
    expect(planes.body.results).toEqual([{ type: 'control_plane', id: 'seo-control-plane' }]);
    const asContentAgent = await search('content-agent-3', 'subject', question('agent'));
    expect(asContentAgent.body.results).toEqual([]);
    const asSeo = await search('seo-agent-7', 'subject', question('agent'));
    expect(asSeo.body.results).toEqual([{ type: 'agent', id: 'seo-agent-7' }]);
  });

  it('searching about another subject follows the same rule as evaluating for it', async () => {
    const r = await search('seo-agent-7', 'resource', { subject: { type: 'human', id: 'editor-alice' }, action: { name: 'update_post' }, resource: { type: 'wp:post' } });
    expect(r.status).toBe(403);
    expect(r.body.code).toBe('FORBIDDEN');
  });
});
