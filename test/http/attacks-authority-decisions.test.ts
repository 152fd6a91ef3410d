/**
 * Attacks on decisions: asking as another principal, AuthZEN's subject differing from the caller,
 * context and properties carrying values the policy could trust, approvals replayed or used for
 * another request, tokens of one audience used as another, and resource and field spellings that
 * could slip past a scope.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createApprovalAssertion, createCallerAssertion } from '../../src/sdk/assertion.js';
import { fixtureKey, startHarness, type Harness } from '../support/harness.js';

let h: Harness;
beforeEach(async () => {
  h = await startHarness();
});
afterEach(async () => h?.close());

const decide = (principal: string, payload: Record<string, unknown>) => h.call(principal, { method: 'POST', url: '/v1/decisions', payload });
const evaluate = (principal: string, payload: Record<string, unknown>) => h.call(principal, { method: 'POST', url: '/access/v1/evaluation', payload });
const title = { action: 'update_post', resource: 'wp:post:1', environment: 'production', fields: ['title'] };

describe('asking as another principal', () => {
  it('/v1/decisions has no principal to name: the body is refused, nothing is decided for editor-alice', async () => {
    const r = await decide('seo-agent-7', { action: 'publish_post', resource: 'wp:post:1', environment: 'production', principal: 'editor-alice' });
    expect(r.status).toBe(400);
    expect(r.body.token ?? null).toBeNull();
  });

  it('/v1/explain for another principal is governance\'s alone', async () => {
    const r = await h.call('seo-agent-7', { method: 'POST', url: '/v1/explain', payload: { ...title, principal: 'editor-alice' } });
    expect([r.status, r.body.code]).toEqual([403, 'FORBIDDEN']);
  });

  it('AuthZEN: a subject other than the caller, without audit_read, is FORBIDDEN and tells nothing of whether it exists', async () => {
    const as = (id: string, type: string) => evaluate('seo-agent-7', { subject: { type, id }, action: { name: 'publish_post' }, resource: { type: 'wp:post', id: 'wp:post:1', properties: { environment: 'production' } } });
    const real = await as('editor-alice', 'human');
    const none = await as('nobody-at-all', 'human');
    expect([real.status, real.body.code]).toEqual([403, 'FORBIDDEN']);
    expect([none.status, none.body.code]).toEqual([403, 'FORBIDDEN']);
    expect(real.body.detail.replaceAll('editor-alice', 'X')).toBe(none.body.detail.replaceAll('nobody-at-all', 'X'));
  });

  it('AuthZEN batch: an item about another subject fails on its own, no token for it', async () => {
    const item = (id: string, type: string) => ({ subject: { type, id }, action: { name: 'update_post' }, resource: { type: 'wp:post', id: 'wp:post:1', properties: { environment: 'production', fields: ['title'] } } });
    const r = await h.call('seo-agent-7', { method: 'POST', url: '/access/v1/evaluations', payload: { evaluations: [item('seo-agent-7', 'agent'), item('editor-alice', 'human')] } });
    expect(r.status).toBe(200);
    expect(r.body.evaluations[0].decision).toBe(true);
    expect(r.body.evaluations[1]).toMatchObject({ decision: false, context: { error: { code: 'FORBIDDEN' } } });
    expect(r.body.evaluations[1].context.token).toBeUndefined();
  });
});

describe('context and properties: what the caller says cannot widen', () => {
  it('context.risk below the action\'s risk does not lower it: a risk_max 1 delegate may not publish (risk 2)', async () => {
    const d = await h.call('editor-alice', {
      method: 'POST', url: '/v1/delegations',
      payload: { id: 'd-alice-c3', from: 'editor-alice', to: 'content-agent-3', reason: 'publish at low risk only', max_depth: 0, scope: { actions: ['publish_post'], resources: ['wp:post:*'], environments: ['production'], fields: ['status'], risk_max: 1 } },
    });
    expect(d.status, JSON.stringify(d.body)).toBe(201);
    const publish = { action: 'publish_post', resource: 'wp:post:1', environment: 'production', fields: ['status'] };
    const r = await decide('content-agent-3', { ...publish, context: { risk: 0 } });
    expect(r.body.allow).toBe(false);
    expect(r.body.risk).toBe(2);
    expect(r.body.reasons.join('\n')).toMatch(/risk: 2 exceeds the risk_max 1/);
    const z = await evaluate('content-agent-3', { subject: { type: 'agent', id: 'content-agent-3' }, action: { name: 'publish_post' }, resource: { type: 'wp:post', id: 'wp:post:1', properties: { environment: 'production', fields: ['status'] } }, context: { risk: 0 } });
    expect(z.body.decision).toBe(false);
  });

  it('context.risk that is not a non-negative integer is refused', async () => {
    for (const risk of [-1, 0.5, '0', null]) {
      const r = await decide('seo-agent-7', { ...title, context: { risk } });
      expect(r.status, JSON.stringify(risk)).toBeGreaterThanOrEqual(400);
      expect(r.status).toBeLessThan(500);
    }
    const z = await evaluate('seo-agent-7', { subject: { type: 'agent', id: 'seo-agent-7' }, action: { name: 'update_post' }, resource: { type: 'wp:post', id: 'wp:post:1', properties: { environment: 'production', fields: ['title'] } }, context: { risk: -1 } });
    expect(z.status).toBe(422);
  });

  it('AuthZEN properties naming another kind, owners or a chain change nothing the policy judges by', async () => {
    const r = await evaluate('content-agent-3', {
      subject: { type: 'agent', id: 'content-agent-3', properties: { kind: 'governance', priority_class: 'incident' } },
      action: { name: 'update_post', properties: { risk: 0 } },
      resource: { type: 'wp:post', id: 'wp:post:1', properties: { environment: 'production', fields: ['title'], owners: { title: 'content-agent-3' }, chain: ['g-orchestrator'] } },
      context: { chains: [], principals: { 'content-agent-3': { kind: 'governance' } }, now: 0 },
    });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.decision).toBe(false);
  });

  it('owner_only (the documented example) takes authority away only when the PEP says ownerID; saying none leaves it silent', async () => {
    // README: properties are the caller's word, "as trustworthy as the PEP that supplies" them. The
    // example rule denies on another ownerID and says nothing when no ownerID is given.
    const ask = (props: Record<string, unknown>) => evaluate('editor-alice', { subject: { type: 'human', id: 'editor-alice' }, action: { name: 'update_post' }, resource: { type: 'wp:post', id: 'wp:post:1', properties: { environment: 'production', fields: ['title'], ...props } } });
    expect((await ask({ ownerID: 'someone-else' })).body.decision).toBe(false);
    expect((await ask({ ownerID: 7 })).body.decision).toBe(false);
    expect((await ask({ ownerID: 'editor-alice' })).body.decision).toBe(true);
    expect((await ask({})).body.decision).toBe(true);
  });
});

describe('approvals', () => {
  // publisher may publish up to risk 3; production asks for an approval above 2; editor-alice approves.
  beforeEach(async () => {
    const g = await h.call('governance', { method: 'POST', url: '/v1/grants', payload: { id: 'g-pub-3', to: 'publisher', reason: 'risky', max_depth: 0, scope: { actions: ['publish_post'], resources: ['wp:post:*'], environments: ['production'], fields: ['status'], risk_max: 3 } } });
    expect(g.status).toBe(201);
    const a = await h.call('governance', { method: 'POST', url: '/v1/approvals', payload: { id: 'a-alice-pub', from: 'editor-alice', to: 'publisher', reason: 'sign off', scope: { actions: ['publish_post'], resources: ['wp:post:*'], environments: ['production'], risk_max: 3 } } });
    expect(a.status).toBe(201);
  });
  const req = { action: 'publish_post', resource: 'wp:post:42', environment: 'production', fields: ['status'] };
  const approval = (approver: string, overrides: Record<string, unknown> = {}, extra: Record<string, unknown> = {}) =>
    createApprovalAssertion({ approver, privateJwk: fixtureKey(approver), approve: { principal: 'publisher', action: req.action, resource: req.resource, environment: req.environment, fields: req.fields, ...overrides } as never, now: h.clock.now(), ...extra });

  it('an approval allows once; replayed, it is refused', async () => {
    const token = await approval('editor-alice');
    const first = await decide('publisher', { ...req, context: { risk: 3, approval: token } });
    expect(first.body.allow, JSON.stringify(first.body)).toBe(true);
    const again = await decide('publisher', { ...req, context: { risk: 3, approval: token } });
    expect(again.status).toBe(422);
    expect(again.body.token ?? null).toBeNull();
  });

  it('in one AuthZEN batch the same approval allows at most one item', async () => {
    const token = await approval('editor-alice');
    const item = { subject: { type: 'service', id: 'publisher' }, action: { name: 'publish_post' }, resource: { type: 'wp:post', id: 'wp:post:42', properties: { environment: 'production', fields: ['status'] } }, context: { risk: 3, approval: token } };
    const r = await h.call('publisher', { method: 'POST', url: '/access/v1/evaluations', payload: { evaluations: [item, item, item] } });
    expect(r.status).toBe(200);
    expect(r.body.evaluations.filter((e: { decision: boolean }) => e.decision)).toHaveLength(1);
  });

  it('concurrent decisions with one approval: at most one allows', async () => {
    const token = await approval('editor-alice');
    const rs = await Promise.all([0, 1, 2, 3].map(() => decide('publisher', { ...req, context: { risk: 3, approval: token } })));
    expect(rs.filter((r) => r.body.allow === true)).toHaveLength(1);
  });

  it('an approval for another principal, resource, action or environment is refused', async () => {
    for (const o of [{ principal: 'content-agent-3' }, { resource: 'wp:post:43' }, { action: 'unpublish_post' }, { environment: 'staging' }]) {
      const r = await decide('publisher', { ...req, context: { risk: 3, approval: await approval('editor-alice', o) } });
      expect([r.status, r.body.code], JSON.stringify(o)).toEqual([422, 'UNPROCESSABLE']);
    }
  });

  it('an approval written under an alias of the key names another request', async () => {
    const r = await decide('publisher', { ...req, context: { risk: 3, approval: await approval('editor-alice', { resource: 'wordpress:article:42' }) } });
    expect([r.status, r.body.code]).toEqual([422, 'UNPROCESSABLE']);
  });

  it('an approval signed by someone with no approves edge does not count; nor does the requester approving itself', async () => {
    for (const who of ['seo-agent-7', 'publisher']) {
      const r = await decide('publisher', { ...req, context: { risk: 3, approval: await approval(who) } });
      expect(r.body.allow ?? false, who).toBe(false);
    }
  });

  it('an approval by a revoked approver, or over a revoked approves edge, does not count', async () => {
    const token = await approval('editor-alice');
    expect((await h.call('governance', { method: 'DELETE', url: '/v1/edges/a-alice-pub', payload: { reason: 'no longer signs off' } })).status).toBe(200);
    const r = await decide('publisher', { ...req, context: { risk: 3, approval: token } });
    expect(r.body.allow ?? false).toBe(false);
    const token2 = await approval('editor-alice');
    expect((await h.call('governance', { method: 'DELETE', url: '/v1/principals/editor-alice', payload: { reason: 'left' } })).status).toBe(200);
    const r2 = await decide('publisher', { ...req, context: { risk: 3, approval: token2 } });
    expect(r2.body.allow ?? false).toBe(false);
  });

  describe('an approval binds the fields it approves', () => {
    beforeEach(async () => {
      const g = await h.call('governance', { method: 'POST', url: '/v1/grants', payload: { id: 'g-pub-title', to: 'publisher', reason: 'titles too', max_depth: 0, scope: { actions: ['publish_post'], resources: ['wp:post:*'], environments: ['production'], fields: ['status', 'title'], risk_max: 3 } } });
      expect(g.status).toBe(201);
    });

    it('an approval that names fields [status] does not approve a request for [status, title]; it stays usable for [status]', async () => {
      const token = await approval('editor-alice', { fields: ['status'] });
      const r = await decide('publisher', { ...req, fields: ['status', 'title'], context: { risk: 3, approval: token } });
      expect(r.body.allow ?? false).toBe(false);
      expect([r.status, r.body.code]).toEqual([422, 'UNPROCESSABLE']);
      expect(r.body.detail).toBe('the approval is for another request: fields ["title"] not among those it approves, ["status"]');
      // Refused before anything was spent: the approval still approves what it names.
      const ok = await decide('publisher', { ...req, context: { risk: 3, approval: token } });
      expect(ok.body.allow, JSON.stringify(ok.body)).toBe(true);
    });

    it('an approval of more fields than asked approves the request (the approver\'s choice), once', async () => {
      const token = await approval('editor-alice', { fields: ['title', 'status'] });
      const r = await decide('publisher', { ...req, context: { risk: 3, approval: token } });
      expect(r.body.allow, JSON.stringify(r.body)).toBe(true);
      const again = await decide('publisher', { ...req, fields: ['status', 'title'], context: { risk: 3, approval: token } });
      expect([again.status, again.body.code]).toEqual([422, 'UNPROCESSABLE']);
      expect(again.body.detail).toMatch(/already used/);
    });

    it('an approval that names no fields (as one signed before approvals bound them) is refused, clearly, for any fields; so is one whose fields are not a list of names', async () => {
      const { fields: _f, ...unbound } = { principal: 'publisher', action: req.action, resource: req.resource, environment: req.environment, fields: [] };
      const old = await createApprovalAssertion({ approver: 'editor-alice', privateJwk: fixtureKey('editor-alice'), approve: unbound as never, now: h.clock.now() });
      for (const fields of [['status'], ['status', 'title']]) {
        const r = await decide('publisher', { ...req, fields, context: { risk: 3, approval: old } });
        expect([r.status, r.body.code]).toEqual([422, 'UNPROCESSABLE']);
        expect(r.body.detail).toMatch(/^the approval names no fields .*writ approve --fields/);
      }
      for (const fields of ['status', [1], null, { status: true }]) {
        const r = await decide('publisher', { ...req, context: { risk: 3, approval: await approval('editor-alice', { fields }) } });
        expect([r.status, r.body.code], JSON.stringify(fields)).toEqual([422, 'UNPROCESSABLE']);
        expect(r.body.detail).toMatch(/^the approval's fields must be a list of field names/);
      }
    });

    it('as in a scope, ["*"] approves every field and the whole resource (no fields listed); named fields do not approve the whole resource', async () => {
      for (const fields of [['status', 'title'], []]) {
        const r = await decide('publisher', { ...req, fields, context: { risk: 3, approval: await approval('editor-alice', { fields: ['*'] }) } });
        // Approved: what is left is the chain's own verdict (the whole resource needs a grant of [*]).
        expect(r.status, JSON.stringify(r.body)).toBe(200);
        if (fields.length > 0) expect(r.body.allow, JSON.stringify(r.body)).toBe(true);
      }
      const whole = await decide('publisher', { ...req, fields: [], context: { risk: 3, approval: await approval('editor-alice', { fields: ['status', 'title'] }) } });
      expect([whole.status, whole.body.code]).toEqual([422, 'UNPROCESSABLE']);
      expect(whole.body.detail).toBe('the approval is for another request: fields ["status","title"], not the whole resource (no fields listed), which needs ["*"]');
    });

    it('the same over AuthZEN: a batch item touching a field the approval does not name is an error, not an allow', async () => {
      const token = await approval('editor-alice', { fields: ['status'] });
      const item = { subject: { type: 'service', id: 'publisher' }, action: { name: 'publish_post' }, resource: { type: 'wp:post', id: 'wp:post:42', properties: { environment: 'production', fields: ['status', 'title'] } }, context: { risk: 3, approval: token } };
      const r = await h.call('publisher', { method: 'POST', url: '/access/v1/evaluations', payload: { evaluations: [item] } });
      expect(r.body.evaluations?.[0]?.decision ?? false, JSON.stringify(r.body)).toBe(false);
    });
  });

  it('a caller assertion (audience writ) is not an approval, and an approval is not a caller assertion', async () => {
    const asCaller = await createCallerAssertion({ principal: 'editor-alice', privateJwk: fixtureKey('editor-alice'), now: h.clock.now(), claims: { approve: { principal: 'publisher', ...req } } });
    const r = await decide('publisher', { ...req, context: { risk: 3, approval: asCaller } });
    expect([r.status, r.body.code]).toEqual([422, 'UNPROCESSABLE']);
    const token = await approval('editor-alice');
    const asAuth = await h.app.inject({ method: 'POST', url: '/v1/decisions', headers: { authorization: `Bearer ${token}` }, payload: { action: 'publish_post', resource: 'wp:post:1', environment: 'production' } });
    expect(asAuth.statusCode).toBe(401);
  });

  it('a signed decision (audience gateway) is not a caller assertion', async () => {
    const d = await decide('seo-agent-7', title);
    expect(d.body.allow).toBe(true);
    const r = await h.app.inject({ method: 'POST', url: '/v1/decisions', headers: { authorization: `Bearer ${d.body.token}` }, payload: title });
    expect(r.statusCode).toBe(401);
  });
});

describe('resource and field spellings', () => {
  it('an alias is judged as its canonical key, and the decision names the canonical key', async () => {
    const r = await decide('seo-agent-7', { ...title, resource: 'wordpress:article:1' });
    expect(r.body.allow).toBe(true);
    expect(r.body.resource).toBe('wp:post:1');
  });

  const refused: [string, Record<string, unknown>][] = [
    ['upper case', { resource: 'WP:post:1' }],
    ['an encoded separator', { resource: 'wp%3Apost%3A1' }],
    ['a #field form', { resource: 'wp:post:1#body' }],
    ['a wildcard', { resource: 'wp:post:*' }],
    ['a double wildcard', { resource: 'wp:post:**' }],
    ['a trailing separator', { resource: 'wp:post:1:' }],
    ['an empty segment', { resource: 'wp::1' }],
    ['whitespace', { resource: 'wp:post:1 ' }],
    ['an extra segment', { resource: 'wp:post:1:body' }],
    ['a field in another case', { fields: ['Title'] }],
    ['a field with a #', { fields: ['title#body'] }],
  ];
  it.each(refused)('%s is refused, not judged', async (_name, over) => {
    const r = await decide('seo-agent-7', { ...title, ...over });
    expect(r.status, JSON.stringify(r.body)).toBeGreaterThanOrEqual(400);
    expect(r.status).toBeLessThan(500);
    expect(r.body.token ?? null).toBeNull();
  });

  const denied: [string, Record<string, unknown>][] = [
    ['fields * (every field)', { fields: ['*'] }],
    ['no fields (the whole resource)', { fields: [] }],
    ['fields left out (the whole resource)', { fields: undefined }],
    ['a covered field beside one not covered', { fields: ['title', 'body'] }],
    ['a covered field twice beside one not covered', { fields: ['title', 'title', 'canonical'] }],
  ];
  it.each(denied)('%s is denied to seo-agent-7 (title, meta_description)', async (_name, over) => {
    const r = await decide('seo-agent-7', { ...title, ...over });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.allow).toBe(false);
    expect(r.body.token).toBeNull();
  });

  it('AuthZEN: resource.type cannot steer the key, and fields are judged as in v1', async () => {
    const ask = (resource: Record<string, unknown>) => evaluate('seo-agent-7', { subject: { type: 'agent', id: 'seo-agent-7' }, action: { name: 'update_post' }, resource });
    expect((await ask({ type: 'deploy', id: 'wp:post:1', properties: { environment: 'production', fields: ['title'] } })).status).toBe(400);
    expect((await ask({ type: 'wp:post', id: 'wp:post:1', properties: { environment: 'production', fields: ['body'] } })).body.decision).toBe(false);
    expect((await ask({ type: 'wp:post', id: 'wp:post:1', properties: { environment: 'production' } })).body.decision).toBe(false);
    expect((await ask({ type: 'wp:post', id: 'wp:post:1', properties: { environment: 'production', fields: ['title'] } })).body.decision).toBe(true);
  });
});
