import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from '../support/harness.js';

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => h?.close());

async function refused(principal: string, inject: Parameters<Harness['call']>[1], status: number, code: string) {
  const before = (await h.ctx.graph.current()).revision;
  const r = await h.call(principal, inject);
  expect(r.status).toBe(status);
  expect(String(r.headers['content-type'])).toMatch(/application\/problem\+json/);
  expect(r.body.code).toBe(code);
  expect(typeof r.body.detail).toBe('string');
  expect((await h.ctx.graph.current()).revision).toBe(before);
  return r;
}

describe('bad input gets a stable code and changes nothing', () => {
  it('malformed JSON', () => refused('governance', { method: 'POST', url: '/v1/principals', headers: { 'content-type': 'application/json' }, payload: '{"id": "x",' }, 400, 'MALFORMED_REQUEST'));
  it('unknown field', async () => {
    const r = await refused('governance', { method: 'POST', url: '/v1/principals', payload: { id: 'x', kind: 'agent', keys: [], colour: 'blue' } }, 400, 'MALFORMED_REQUEST');
    expect(r.body.detail).toMatch(/colour/);
  });
  it('unknown field inside a scope', () =>
    refused('governance', { method: 'POST', url: '/v1/grants', payload: { to: 'seo-agent-7', reason: 'r', scope: { actions: ['update_post'], resources: ['wp:post:*'], risk_max: 1, superuser: true } } }, 400, 'MALFORMED_REQUEST'));
  it('an unknown constraint (nothing reads it, so it would limit nothing)', async () => {
    const r = await refused('governance', { method: 'POST', url: '/v1/grants', payload: { to: 'seo-agent-7', reason: 'r', scope: { actions: ['update_post'], resources: ['wp:post:*'], constraints: { risk_max: 1, risk_mx: 0 } } } }, 400, 'MALFORMED_REQUEST');
    expect(r.body.detail).toBe('body/scope/constraints: must NOT have additional properties "risk_mx"');
  });
  it('two different risk_max in one scope (top level and in constraints)', async () => {
    const r = await refused('governance', { method: 'POST', url: '/v1/grants', payload: { to: 'seo-agent-7', reason: 'r', scope: { actions: ['update_post'], resources: ['wp:post:*'], risk_max: 3, constraints: { risk_max: 1 } } } }, 422, 'UNPROCESSABLE');
    expect(r.body.detail).toBe('scope.risk_max (3) and scope.constraints.risk_max (1) differ: give one of them');
  });
  it('a time of none of its kinds names them all (a number with a fraction is not "must be string"); one too long says so', async () => {
    const delegation = (expires_at: unknown) => ({ method: 'POST' as const, url: '/v1/delegations', payload: { from: 'orchestrator', to: 'publisher', reason: 'r', expires_at, scope: { actions: ['update_post'], resources: ['wp:post:1'], risk_max: 1 } } });
    expect((await refused('orchestrator', delegation(1500.5), 400, 'MALFORMED_REQUEST')).body.detail).toBe('body/expires_at: must be string, integer or null');
    expect((await refused('orchestrator', delegation({ at: 1 }), 400, 'MALFORMED_REQUEST')).body.detail).toBe('body/expires_at: must be string, integer or null');
    expect((await refused('orchestrator', delegation('2026-12-04T00:00:00.000Z'.padEnd(65, '0')), 400, 'MALFORMED_REQUEST')).body.detail).toBe('body/expires_at: must NOT have more than 64 characters');
  });
  it('wrong type', () => refused('seo-agent-7', { method: 'POST', url: '/v1/decisions', payload: { action: 'update_post', resource: 'wp:post:1', environment: 'production', fields: 'title' } }, 400, 'MALFORMED_REQUEST'));
  it('oversized body', () =>
    refused('governance', { method: 'POST', url: '/v1/principals', payload: { id: 'big', kind: 'agent', keys: [], attributes: { blob: 'x'.repeat(300 * 1024) } } }, 413, 'PAYLOAD_TOO_LARGE'));
  it('unknown principal in a grant', () =>
    refused('governance', { method: 'POST', url: '/v1/grants', payload: { to: 'ghost', reason: 'r', scope: { actions: ['update_post'], resources: ['wp:post:*'], risk_max: 1 } } }, 404, 'UNKNOWN_PRINCIPAL'));
  it('unknown principal read', () => refused('governance', { method: 'GET', url: '/v1/principals/ghost' }, 404, 'UNKNOWN_PRINCIPAL'));
  it('unknown resource in a decision', () =>
    refused('seo-agent-7', { method: 'POST', url: '/v1/decisions', payload: { action: 'update_post', resource: 'wp:comment:1', environment: 'production', fields: ['title'] } }, 404, 'UNKNOWN_RESOURCE'));
  it('an environment the policy does not declare, in a decision, an explanation or an AuthZEN evaluation', async () => {
    const why = 'environment: "prodution" is not an environment of the policy (data.writ.environments: production, staging, development) (did you mean "production"?)';
    const body = { action: 'update_post', resource: 'wp:post:1024', environment: 'prodution', fields: ['title'] };
    expect((await refused('seo-agent-7', { method: 'POST', url: '/v1/decisions', payload: body }, 422, 'UNPROCESSABLE')).body.detail).toBe(why);
    expect((await refused('seo-agent-7', { method: 'POST', url: '/v1/explain', payload: body }, 422, 'UNPROCESSABLE')).body.detail).toBe(why);
    const evaluation = { subject: { type: 'agent', id: 'seo-agent-7' }, action: { name: 'update_post' }, resource: { type: 'wp:post', id: 'wp:post:1024', properties: { environment: 'prodution', fields: ['title'] } } };
    const asAuthzen = why.replace(/^environment:/, 'resource.properties.environment:');
    expect((await refused('seo-agent-7', { method: 'POST', url: '/access/v1/evaluation', payload: evaluation }, 422, 'UNPROCESSABLE')).body.detail).toBe(asAuthzen);
    // Also where no candidate would be asked (searches that would answer "nothing"), and before who may ask about whom.
    const searches: [string, string, Record<string, unknown>][] = [
      ['seo-agent-7', '/access/v1/search/subject', { subject: { type: 'human' }, action: { name: 'update_post' }, resource: evaluation.resource }],
      ['seo-agent-7', '/access/v1/search/resource', { subject: evaluation.subject, action: { name: 'update_post' }, resource: { type: 'wp:post', properties: { environment: 'prodution' } } }],
      ['seo-agent-7', '/access/v1/search/action', { subject: evaluation.subject, resource: evaluation.resource }],
      ['content-agent-3', '/access/v1/evaluation', evaluation],
    ];
    for (const [caller, url, payload] of searches) {
      expect((await refused(caller, { method: 'POST', url, payload }, 422, 'UNPROCESSABLE')).body.detail, url).toBe(asAuthzen);
    }
  });
  it('a wildcard is not a resource key', () =>
    refused('seo-agent-7', { method: 'POST', url: '/v1/decisions', payload: { action: 'update_post', resource: 'wp:post:*', environment: 'production', fields: ['title'] } }, 422, 'UNPROCESSABLE'));
  it('an invalid resource pattern in a scope', () =>
    refused('governance', { method: 'POST', url: '/v1/grants', payload: { to: 'seo-agent-7', reason: 'r', scope: { actions: ['update_post'], resources: ['wp:**:post'], risk_max: 1 } } }, 422, 'UNPROCESSABLE'));
  // An edge that could never apply is refused, not stored to count for nothing (the policy's registry is its schema).
  it.each([
    ['/v1/grants', { to: 'seo-agent-7' }, { actions: ['update_psot'] }, /scope\.actions: "update_psot" is not an action of the policy \(data\.writ\.actions: .*update_post.*\) \(did you mean "update_post"\?\)$/],
    ['/v1/grants', { to: 'seo-agent-7' }, { resources: ['wp:psot:*'] }, /scope\.resources: "wp:psot:\*" matches no key of any resource class .*so the edge would never apply$/],
    ['/v1/grants', { to: 'seo-agent-7' }, { resources: ['wordpress:article:*'] }, /"wordpress:article:\*" is written with the alias "wordpress:article", and keys are matched as "wp:post": write "wp:post:\*"$/],
    // Under an alias even where a broad pattern overlaps it: keys are rewritten before they are matched.
    ['/v1/grants', { to: 'seo-agent-7' }, { resources: ['wp:post:*', 'wordpress:article:1024'] }, /written with the alias "wordpress:article".*write "wp:post:1024"$/],
    ['/v1/delegations', { from: 'orchestrator', to: 'seo-agent-7' }, { actions: ['read_psot'] }, /"read_psot" is not an action of the policy/],
    ['/v1/approvals', { from: 'editor-alice', to: 'seo-agent-7' }, { resources: ['wp:page:*'] }, /"wp:page:\*" matches no key of any resource class/],
    // The example's policy declares its environments (data.writ.environments: production, staging, development).
    ['/v1/grants', { to: 'seo-agent-7' }, { environments: ['production', 'prodution'] }, /^scope\.environments: "prodution" is not an environment of the policy \(data\.writ\.environments: production, staging, development\) \(did you mean "production"\?\)$/],
    ['/v1/approvals', { from: 'editor-alice', to: 'seo-agent-7' }, { environments: ['dev'] }, /^scope\.environments: "dev" is not an environment of the policy \(data\.writ\.environments: production, staging, development\)$/],
    // wp:post:* lists its fields and closes them (fields_closed): one it does not list is never granted.
    ['/v1/grants', { to: 'seo-agent-7' }, { fields: ['title', 'titel'] }, /^scope\.fields: "titel" is not a field of wp:post:\* \(body, canonical, meta_description, status, tags, title\), whose fields are closed \(fields_closed\), so the edge would never apply to it \(did you mean "title"\?\)$/],
    ['/v1/delegations', { from: 'orchestrator', to: 'seo-agent-7' }, { fields: ['meta_desc'] }, /^scope\.fields: "meta_desc" is not a field of wp:post:\*/],
  ])('%s with %j in its scope: an edge that would never apply', async (url, ends, scope, why) => {
    const r = await refused('governance', { method: 'POST', url, payload: { ...ends, reason: 'r', scope: { actions: ['update_post'], resources: ['wp:post:*'], environments: ['production'], risk_max: 1, ...scope } } }, 422, 'UNPROCESSABLE');
    expect(r.body.detail).toMatch(why);
  });
  it('an owner of a field its keys do not have, where their class closes its fields', async () => {
    const r = await refused('governance', { method: 'POST', url: '/v1/ownerships', payload: { owner: 'editor-alice', resource: 'wp:post:1', fields: ['staus'], reason: 'r' } }, 422, 'UNPROCESSABLE');
    expect(r.body.detail).toMatch(/^scope\.fields: "staus" is not a field of wp:post:\* .*\(did you mean "status"\?\)$/);
  });
  it('a field of a class that does not close its fields is taken as written (a scope reaching wp:post:* and deploy:**)', async () => {
    const r = await h.call('governance', { method: 'POST', url: '/v1/grants', payload: { to: 'seo-agent-7', reason: 'r', scope: { actions: ['deploy'], resources: ['wp:post:*', 'deploy:**'], environments: ['production'], fields: ['artifact'], risk_max: 1 } } });
    expect(r.status).toBe(201);
    expect((await h.call('governance', { method: 'DELETE', url: `/v1/edges/${r.body.edge.id}?reason=test` })).status).toBe(200);
  });
  it('a field the closed class does not have, in a decision, an explanation, an AuthZEN evaluation or search: refused with the closest name', async () => {
    const why = 'fields: "titel" is not a field of wp:post:1024: its resource class wp:post:* (body, canonical, meta_description, status, tags, title) closes its fields (fields_closed) (did you mean "title"?)';
    const body = { action: 'update_post', resource: 'wp:post:1024', environment: 'production', fields: ['title', 'titel'] };
    expect((await refused('seo-agent-7', { method: 'POST', url: '/v1/decisions', payload: body }, 422, 'UNPROCESSABLE')).body.detail).toBe(why);
    expect((await refused('seo-agent-7', { method: 'POST', url: '/v1/explain', payload: body }, 422, 'UNPROCESSABLE')).body.detail).toBe(why);
    const evaluation = { subject: { type: 'agent', id: 'seo-agent-7' }, action: { name: 'update_post' }, resource: { type: 'wp:post', id: 'wp:post:1024', properties: { environment: 'production', fields: ['titel'] } } };
    const asAuthzen = why.replace(/^fields:/, 'resource.properties.fields:');
    // Also where no candidate would be asked (searches that would answer "nothing"), and before who may ask about whom.
    const searches: [string, string, Record<string, unknown>, string][] = [
      ['seo-agent-7', '/access/v1/evaluation', evaluation, asAuthzen],
      ['content-agent-3', '/access/v1/evaluation', evaluation, asAuthzen],
      // Under an alias too: the key is rewritten before its fields are looked at.
      ['content-agent-3', '/access/v1/evaluation', { ...evaluation, resource: { ...evaluation.resource, type: 'wordpress:article', id: 'wordpress:article:1024' } }, asAuthzen],
      ['seo-agent-7', '/access/v1/search/subject', { subject: { type: 'human' }, action: { name: 'update_post' }, resource: evaluation.resource }, asAuthzen],
      ['content-agent-3', '/access/v1/search/action', { subject: evaluation.subject, resource: evaluation.resource }, asAuthzen],
      ['content-agent-3', '/access/v1/search/resource', { subject: evaluation.subject, action: { name: 'update_post' }, resource: { type: 'wp:post', properties: { fields: ['titel'] } } }, asAuthzen.replace('wp:post:1024', 'wp:post:**')],
    ];
    for (const [caller, url, payload, detail] of searches) {
      expect((await refused(caller, { method: 'POST', url, payload }, 422, 'UNPROCESSABLE')).body.detail, `${caller} ${url}`).toBe(detail);
    }
  });
  it('an owner of keys no resource class has', async () => {
    const r = await refused('governance', { method: 'POST', url: '/v1/ownerships', payload: { owner: 'editor-alice', resource: 'wp:page:1', reason: 'r' } }, 422, 'UNPROCESSABLE');
    expect(r.body.detail).toMatch(/"wp:page:1" matches no key of any resource class/);
  });
  it('expires_at before not_before', () =>
    refused('governance', { method: 'POST', url: '/v1/grants', payload: { to: 'seo-agent-7', reason: 'r', not_before: '2026-02-01T00:00:00Z', expires_at: '2026-01-01T00:00:00Z', scope: { actions: ['update_post'], resources: ['wp:post:*'], risk_max: 1 } } }, 422, 'UNPROCESSABLE'));
  it('a private key offered as a public key', () =>
    refused('governance', { method: 'POST', url: '/v1/principals', payload: { id: 'leaky', kind: 'agent', keys: [{ kty: 'OKP', crv: 'Ed25519', kid: 'k', x: 'AAAA', d: 'secret' }] } }, 422, 'UNPROCESSABLE'));
  it.each([
    // The identity point: with it, the signature (R = identity, S = 0) verifies for every message under OpenSSL.
    ['a point of small order', `AQ${'A'.repeat(41)}`, /small order/],
    // y = 2^255 − 19 + 2: 2 encoded a second way (libsodium refuses it when it verifies).
    ['a non-canonical encoding', Buffer.from([0xef, ...Array(30).fill(0xff), 0x7f]).toString('base64url'), /not canonically encoded/],
    // y = 2 has no x on the curve: a key that could never verify anything.
    ['no point of the curve', Buffer.from([2, ...Array(31).fill(0)]).toString('base64url'), /not a point of the curve/],
    ['31 bytes', Buffer.alloc(31, 9).toString('base64url'), /31 bytes/],
  ])('an Ed25519 key that is %s', async (_what, x, why) => {
    const r = await refused('governance', { method: 'POST', url: '/v1/principals', payload: { id: 'weak-key', kind: 'agent', keys: [{ kty: 'OKP', crv: 'Ed25519', kid: 'k', x }] } }, 422, 'UNPROCESSABLE');
    expect(r.body.detail).toMatch(/key k is not a usable Ed25519 public key/);
    expect(r.body.detail).toMatch(why);
    expect((await h.ctx.graph.current()).principal('weak-key')).toBeUndefined();
  });
  it('a P-256 point off its curve', async () => {
    const r = await refused('governance', { method: 'POST', url: '/v1/principals', payload: { id: 'weak-key', kind: 'agent', keys: [{ kty: 'EC', crv: 'P-256', kid: 'k', x: Buffer.alloc(32, 1).toString('base64url'), y: Buffer.alloc(32, 2).toString('base64url') }] } }, 422, 'UNPROCESSABLE');
    expect(r.body.detail).toMatch(/key k is not a usable P-256 public key/);
  });
  it('grants are governance-only', () =>
    refused('orchestrator', { method: 'POST', url: '/v1/grants', payload: { to: 'seo-agent-7', reason: 'r', scope: { actions: ['update_post'], resources: ['wp:post:*'], risk_max: 1 } } }, 403, 'FORBIDDEN'));
  it('an edge id reused with other content', () =>
    refused('governance', { method: 'POST', url: '/v1/grants', payload: { id: 'g-orchestrator', to: 'seo-agent-7', reason: 'r', scope: { actions: ['update_post'], resources: ['wp:post:*'], risk_max: 1 } } }, 409, 'ALREADY_EXISTS'));
  it('a second live owner of the same managed state', () =>
    refused('governance', { method: 'POST', url: '/v1/ownerships', payload: { owner: 'editor-alice', resource: 'wp:post:*', fields: ['title'], reason: 'r' } }, 409, 'OWNERSHIP_CONFLICT'));
  it('an unknown route', () => refused('governance', { method: 'GET', url: '/v1/nothing-here' }, 404, 'NOT_FOUND'));
  it('the same grant applied twice is idempotent', async () => {
    const payload = { id: 'g-twice', to: 'seo-agent-7', reason: 'r', scope: { actions: ['read_post'], resources: ['wp:post:*'], risk_max: 0 } };
    const first = await h.call('governance', { method: 'POST', url: '/v1/grants', payload });
    expect(first.status).toBe(201);
    const rev = (await h.ctx.graph.current()).revision;
    const second = await h.call('governance', { method: 'POST', url: '/v1/grants', payload });
    expect(second.status).toBe(200);
    expect(second.body.created).toBe(false);
    expect((await h.ctx.graph.current()).revision).toBe(rev);
  });
});
