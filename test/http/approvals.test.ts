import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApprovalAssertion } from '../../src/sdk/assertion.js';
import { fixtureKey, startHarness, type Harness } from '../support/harness.js';

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
  // The publisher may publish at risk up to 3, but production asks for approval above risk 2;
  // editor-alice may approve the publisher's publishing up to risk 3.
  await h.call('governance', { method: 'POST', url: '/v1/grants', payload: { id: 'g-publisher-risky', to: 'publisher', reason: 'emergency publishing', max_depth: 0, scope: { actions: ['publish_post'], resources: ['wp:post:*'], environments: ['production'], fields: ['status'], risk_max: 3 } } });
  await h.call('governance', { method: 'POST', url: '/v1/approvals', payload: { id: 'a-alice-publisher', from: 'editor-alice', to: 'publisher', reason: 'editor signs off risky publishing', scope: { actions: ['publish_post'], resources: ['wp:post:*'], environments: ['production'], risk_max: 3 } } });
});
afterAll(async () => h?.close());

const request = { action: 'publish_post', resource: 'wp:post:42', environment: 'production', fields: ['status'] };
const approval = (approver: string, overrides: Partial<typeof request & { principal: string }> = {}) =>
  createApprovalAssertion({ approver, privateJwk: fixtureKey(approver), approve: { principal: 'publisher', action: request.action, resource: request.resource, environment: request.environment, fields: request.fields, ...overrides }, now: h.clock.now() });

describe('approval above the risk threshold', () => {
  it('risk 3 without an approval is denied with approval_required', async () => {
    const r = await h.call('publisher', { method: 'POST', url: '/v1/decisions', payload: { ...request, context: { risk: 3 } } });
    expect(r.body.allow).toBe(false);
    expect(r.body.obligations.approval_required).toBe(true);
    expect(r.body.reasons.join('\n')).toMatch(/approval required/);
    expect(r.body.approval_missing).toBe(true);
  });
  it('an AuthZEN evaluation says so too, to the user as well (a deny for another reason does not)', async () => {
    const resource = (fields: string[]) => ({ type: 'wp:post', id: request.resource, properties: { environment: 'production', fields } });
    const wanting = await h.call('publisher', { method: 'POST', url: '/access/v1/evaluation', payload: { subject: { type: 'service', id: 'publisher' }, action: { name: request.action }, resource: resource(['status']), context: { risk: 3 } } });
    expect(wanting.status, JSON.stringify(wanting.body)).toBe(200);
    expect(wanting.body).toMatchObject({ decision: false, context: { approval_missing: true, obligations: { approval_required: true } } });
    expect(wanting.body.context.reason_user['403']).toMatch(/^Needs an approval: publish_post on wp:post:42\. Ask an approver to sign one for decision /);
    const other = await h.call('publisher', { method: 'POST', url: '/access/v1/evaluation', payload: { subject: { type: 'service', id: 'publisher' }, action: { name: request.action }, resource: resource(['status', 'title']), context: { risk: 3 } } });
    expect(other.body).toMatchObject({ decision: false, context: { approval_missing: false } });
    expect(other.body.context.reason_user['403']).toMatch(/^Not allowed: publish_post on wp:post:42\./);
  });
  it('an explanation says when an approval is all that is missing (approval_missing), and not when something else is', async () => {
    const wanting = await h.call('publisher', { method: 'POST', url: '/v1/explain', payload: { ...request, context: { risk: 3 } } });
    expect(wanting.status, JSON.stringify(wanting.body)).toBe(200);
    expect(wanting.body).toMatchObject({ allow: false, approval_missing: true, obligations: { approval_required: true } });
    // A field the publisher holds no grant for: an approval would not make it allowed.
    const beside = await h.call('publisher', { method: 'POST', url: '/v1/explain', payload: { ...request, fields: ['status', 'title'], context: { risk: 3 } } });
    expect(beside.body).toMatchObject({ allow: false, approval_missing: false, obligations: { approval_required: true } });
    const allowed = await h.call('publisher', { method: 'POST', url: '/v1/explain', payload: { ...request, context: { risk: 3, approval: await approval('editor-alice') } } });
    expect(allowed.body).toMatchObject({ allow: true, approval_missing: false });
    // No chain at all: not an approval's want either.
    const stranger = await h.call('content-agent-3', { method: 'POST', url: '/v1/explain', payload: { ...request, context: { risk: 3 } } });
    expect(stranger.body).toMatchObject({ allow: false, approval_missing: false });
  });
  it('with editor-alice\'s signed approval it is allowed', async () => {
    const r = await h.call('publisher', { method: 'POST', url: '/v1/decisions', payload: { ...request, context: { risk: 3, approval: await approval('editor-alice') } } });
    expect(r.body.allow, JSON.stringify(r.body.reasons)).toBe(true);
    expect(r.body.approval_missing).toBe(false);
  });
  it('an approval by someone without an approves edge does not count', async () => {
    const r = await h.call('publisher', { method: 'POST', url: '/v1/decisions', payload: { ...request, context: { risk: 3, approval: await approval('orchestrator') } } });
    expect(r.body.allow).toBe(false);
  });
  it('an approval for another resource is refused', async () => {
    const r = await h.call('publisher', { method: 'POST', url: '/v1/decisions', payload: { ...request, context: { risk: 3, approval: await approval('editor-alice', { resource: 'wp:post:43' }) } } });
    expect(r.status).toBe(422);
    expect(r.body.code).toBe('UNPROCESSABLE');
    expect(r.body.detail).toBe('the approval is for another request: resource "wp:post:43", not "wp:post:42"');
  });
  it('each difference is named, the approval\'s value beside the request\'s (a misspelt environment shows at once)', async () => {
    const r = await h.call('publisher', { method: 'POST', url: '/v1/decisions', payload: { ...request, context: { risk: 3, approval: await approval('editor-alice', { environment: 'prodution', action: 'unpublish_post' }) } } });
    expect(r.status).toBe(422);
    expect(r.body.detail).toBe('the approval is for another request: action "unpublish_post", not "publish_post"; environment "prodution", not "production"');
  });
  it('an approval\'s claims, not verified yet, are shown cut to 80 characters', async () => {
    const long = `wp:post:${'9'.repeat(300)}`;
    const r = await h.call('publisher', { method: 'POST', url: '/v1/decisions', payload: { ...request, context: { risk: 3, approval: await approval('editor-alice', { resource: long }) } } });
    expect(r.status).toBe(422);
    expect(r.body.detail).toBe(`the approval is for another request: resource ${JSON.stringify(long).slice(0, 79)}…, not "wp:post:42"`);
  });
  it('an approval is single-use', async () => {
    const token = await approval('editor-alice');
    const first = await h.call('publisher', { method: 'POST', url: '/v1/decisions', payload: { ...request, context: { risk: 3, approval: token } } });
    expect(first.body.allow).toBe(true);
    const again = await h.call('publisher', { method: 'POST', url: '/v1/decisions', payload: { ...request, context: { risk: 3, approval: token } } });
    expect(again.status).toBe(422);
    expect(again.body.detail).toMatch(/approval is not valid: .*(replay|already)/i);
  });
  it('is spent only by a decision that allows: an explanation or a denial for another reason leaves it usable', async () => {
    // It approves title too (the approver's choice), so the request for [status, title] below is judged, not refused.
    const token = await approval('editor-alice', { fields: ['status', 'title'] });
    const explained = await h.call('publisher', { method: 'POST', url: '/v1/explain', payload: { ...request, context: { risk: 3, approval: token } } });
    expect(explained.status, JSON.stringify(explained.body)).toBe(200);
    expect(explained.body.allow).toBe(true);
    // Denied for another reason (a field the publisher holds no grant for): the approval is not used up.
    const denied = await h.call('publisher', { method: 'POST', url: '/v1/decisions', payload: { ...request, fields: ['status', 'title'], context: { risk: 3, approval: token } } });
    expect(denied.body.allow).toBe(false);
    const allowed = await h.call('publisher', { method: 'POST', url: '/v1/decisions', payload: { ...request, context: { risk: 3, approval: token } } });
    expect(allowed.body.allow, JSON.stringify(allowed.body)).toBe(true);
    const again = await h.call('publisher', { method: 'POST', url: '/v1/decisions', payload: { ...request, context: { risk: 3, approval: token } } });
    expect(again.status).toBe(422);
  });
});
