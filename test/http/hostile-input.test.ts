import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApprovalAssertion } from '../../src/sdk/assertion.js';
import { act, decideAndLease, decideOk, upstreamGet } from '../support/agent.js';
import { fixtureKey, startHarness, type Harness } from '../support/harness.js';
import { durableState } from '../support/state.js';

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ upstream: true });
});
afterAll(async () => h?.close());

type Inject = Parameters<Harness['call']>[1];

/** The request is refused with this status and code, as problem+json, and nothing durable changed. */
async function refused(principal: string | null, inject: Inject, status: number, code: string) {
  const before = await durableState(h);
  const r = await h.call(principal, inject);
  expect(r.status, r.raw).toBe(status);
  expect(String(r.headers['content-type'])).toMatch(/application\/problem\+json/);
  expect(r.body.code).toBe(code);
  expect(await durableState(h)).toEqual(before);
  return r;
}

const post = (url: string, text: string): Inject => ({ method: 'POST', url, headers: { 'content-type': 'application/json' }, payload: text });
const decisionText = (over: Record<string, string> = {}) => {
  const d = { action: '"update_post"', resource: '"wp:post:1024"', environment: '"production"', fields: '["title"]', ...over };
  return `{"action":${d.action},"resource":${d.resource},"environment":${d.environment},"fields":${d.fields}}`;
};
const nested = (depth: number, leaf = '1') => '{"a":'.repeat(depth) + leaf + '}'.repeat(depth);

describe('lone UTF-16 surrogates are refused at the edge', () => {
  it.each([
    ['resource', { resource: '"wp:post:\\ud800"' }],
    ['action', { action: '"update_post\\udfff"' }],
    ['environment', { environment: '"production\\ud800"' }],
    ['a field', { fields: '["title","\\ud800x"]' }],
  ])('in a decision request (%s): 400 MALFORMED_REQUEST, not a policy failure', async (_what, over) => {
    const r = await refused('seo-agent-7', post('/v1/decisions', decisionText(over)), 400, 'MALFORMED_REQUEST');
    expect(r.body.detail).toMatch(/lone UTF-16 surrogate/);
  });

  it('in an explanation request', () => refused('seo-agent-7', post('/v1/explain', decisionText({ resource: '"wp:post:\\ud800"' })), 400, 'MALFORMED_REQUEST'));

  it('in the context of a decision', () =>
    refused('seo-agent-7', post('/v1/decisions', decisionText().replace(/}$/, ',"context":{"reason":"why \\udc00"}}')), 400, 'MALFORMED_REQUEST'));

  it('in a delegation reason', () =>
    refused('governance', post('/v1/delegations', '{"from":"orchestrator","to":"seo-agent-7","reason":"bad \\ud800 reason","scope":{"actions":["update_post"],"resources":["wp:post:*"]}}'), 400, 'MALFORMED_REQUEST'));

  it('in an object key, deep inside a body', async () => {
    const r = await refused('governance', post('/v1/principals', '{"id":"p-sur","kind":"agent","keys":[],"attributes":{"team":{"\\ud800":1}}}'), 400, 'MALFORMED_REQUEST');
    expect(r.body.detail).toContain('body/attributes/team/');
  });

  it('in a write payload', () =>
    refused('seo-agent-7', post('/v1/actions', '{"action":"update_post","resource":"wp:post:1024","fields":["title"],"payload":{"title":"\\ud800"}}'), 400, 'MALFORMED_REQUEST'));

  it('in a header that reaches the domain', async () => {
    const d = await decideOk(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['title'] });
    const r = await refused('seo-agent-7', { method: 'POST', url: '/v1/actions', headers: { 'idempotency-key': 'k\ud800', 'writ-decision': d.token }, payload: { action: 'update_post', resource: 'wp:post:1024', fields: ['title'], payload: { title: 't' } } }, 400, 'MALFORMED_REQUEST');
    expect(r.body.detail).toMatch(/^headers\/idempotency-key/);
  });

  it('a path that is not percent-encoded UTF-8 (a CESU-encoded surrogate, a stray %) is 400 MALFORMED_REQUEST', async () => {
    await refused('governance', { method: 'GET', url: '/v1/principals/a%ED%A0%80' }, 400, 'MALFORMED_REQUEST');
    await refused('governance', { method: 'GET', url: '/v1/edges/%' }, 400, 'MALFORMED_REQUEST');
  });

  it('a query string cannot smuggle one in: invalid UTF-8 never decodes to a lone surrogate', async () => {
    const r = await h.call('governance', { method: 'GET', url: '/v1/leases?resource=%ED%A0%80' });
    expect(r.status).toBe(200);
    expect(r.body.leases).toEqual([]);
  });

  it('a surrogate pair (an emoji) is well-formed and accepted', async () => {
    const r = await h.call('seo-agent-7', post('/v1/explain', decisionText().replace(/}$/, ',"context":{"reason":"ok \\ud83d\\ude00"}}')));
    expect(r.status, r.raw).toBe(200);
  });
});

describe('U+0000 (NUL) is refused at the edge, whichever engine is behind (PostgreSQL text cannot hold it)', () => {
  it('in a write payload', async () => {
    const r = await refused('seo-agent-7', post('/v1/actions', '{"action":"update_post","resource":"wp:post:1024","fields":["title"],"payload":{"title":"a\\u0000b"}}'), 400, 'MALFORMED_REQUEST');
    expect(r.body.detail).toMatch(/body\/payload\/title: contains U\+0000/);
  });
  it('in a delegation reason', () =>
    refused('governance', post('/v1/delegations', '{"from":"orchestrator","to":"seo-agent-7","reason":"bad \\u0000 reason","scope":{"actions":["update_post"],"resources":["wp:post:*"]}}'), 400, 'MALFORMED_REQUEST'));
  it('in an object key', () =>
    refused('governance', post('/v1/principals', '{"id":"p-nul","kind":"agent","keys":[],"attributes":{"te\\u0000am":1}}'), 400, 'MALFORMED_REQUEST'));
});

describe('JSON nesting depth is limited (WRIT_JSON_MAX_DEPTH, 64 by default)', () => {
  it('a write payload nested 4,100 deep (~25 KB, under the body limit) is 400 NESTING_TOO_DEEP', async () => {
    const text = `{"action":"update_post","resource":"wp:post:1024","fields":["title"],"payload":{"title":${nested(4100)}}}`;
    expect(text.length).toBeLessThan(h.config.bodyLimitBytes);
    const r = await refused('seo-agent-7', post('/v1/actions', text), 400, 'NESTING_TOO_DEEP');
    expect(r.body.max_depth).toBe(64);
  });

  it('principal attributes nested 5,000 deep are refused alike', () =>
    refused('governance', post('/v1/principals', `{"id":"p-deep","kind":"agent","keys":[],"attributes":${nested(5000)}}`), 400, 'NESTING_TOO_DEEP'));

  it('arrays count as nesting too', () => refused('governance', post('/v1/principals', `{"id":"p-deep","kind":"agent","keys":[],"attributes":{"a":${'['.repeat(100)}${']'.repeat(100)}}}`), 400, 'NESTING_TOO_DEEP'));

  it('exactly 64 levels pass the edge; 65 do not; brackets inside strings do not count', async () => {
    // body (1) → attributes (2) → 62 more objects = 64.
    const ok = await h.call('governance', post('/v1/principals', `{"id":"p-64","kind":"agent","keys":[],"attributes":${nested(63, `"${'[{'.repeat(200)}"`)}}`));
    expect(ok.status, ok.raw).toBe(201);
    await refused('governance', post('/v1/principals', `{"id":"p-65","kind":"agent","keys":[],"attributes":${nested(64)}}`), 400, 'NESTING_TOO_DEEP');
  });
});

/** The same bytes spelled differently: flip an unused low bit of the last base64url character. */
function nonCanonical(segment: string): string {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
  expect([2, 3]).toContain(segment.length % 4); // there are unused bits to flip
  const last = alphabet.indexOf(segment.at(-1)!);
  const spelled = segment.slice(0, -1) + alphabet[last ^ 1];
  expect(Buffer.from(spelled, 'base64url').equals(Buffer.from(segment, 'base64url'))).toBe(true);
  return spelled;
}
const withSignature = (token: string, f: (s: string) => string) => {
  const [a, b, c] = token.split('.');
  return `${a}.${b}.${f(c!)}`;
};

describe('a resource key cannot name a field', () => {
  // wp:post:3001#title matched wp:post:* and was allowed; its whole-resource lease key was post 3001's
  // title key, so a write to it would share that field's lease and fence.
  it.each(['/v1/decisions', '/v1/explain'])('%s for wp:post:3001#title is 422 UNPROCESSABLE', async (url) => {
    const r = await refused('seo-agent-7', post(url, decisionText({ resource: '"wp:post:3001#title"', fields: '[]' })), 422, 'UNPROCESSABLE');
    expect(r.body.detail).toMatch(/^resource: resource key "wp:post:3001#title" contains "#", which joins a resource and a field in coordination keys/);
  });
});

describe('integers past 2^53 − 1 are refused before anything is spent', () => {
  // 1e308 and 2^53 + 1 pass `integer`; an expected_version of either went upstream as another number
  // (502, a FAILED receipt) and spent the decision, so the corrected retry was DECISION_REPLAYED.
  it.each([[1e308, 'wp:post:79'], [2 ** 53 + 1, 'wp:post:80']])('expected_version %d is 400 MALFORMED_REQUEST; the same decision then writes', async (version, resource) => {
    const { decision: d, lease } = await decideAndLease(h, 'seo-agent-7', { resource, fields: ['title'] });
    const upstreamBefore = await upstreamGet(h, '/writes');
    const r = await act(h, 'seo-agent-7', { resource, fields: ['title'], payload: { title: 'x' }, expected_version: version }, { decision: d.token, lease });
    expect(r.status, r.raw).toBe(400);
    expect(r.body).toMatchObject({ code: 'MALFORMED_REQUEST', detail: expect.stringMatching(/expected_version: must be <= 9007199254740991/) });
    expect(await upstreamGet(h, '/writes')).toEqual(upstreamBefore);
    const ok = await act(h, 'seo-agent-7', { resource, fields: ['title'], payload: { title: 'x' }, expected_version: 0 }, { decision: d.token, lease });
    expect(ok.status, ok.raw).toBe(201);
    await h.call('seo-agent-7', { method: 'DELETE', url: `/v1/leases/${lease.lease_id}`, payload: { token: lease.token } });
  });
  it('a decision context\'s risk of 1e308 is 400 MALFORMED_REQUEST', async () => {
    await refused('seo-agent-7', post('/v1/decisions', decisionText({ fields: '["title"],"context":{"risk":1e308}' })), 400, 'MALFORMED_REQUEST');
  });
});

describe('JWS segments must be canonical base64url', () => {
  it('a decision whose signature differs only in unused bits is DECISION_INVALID and nothing is forwarded; the genuine one then writes', async () => {
    const { decision: d, lease } = await decideAndLease(h, 'seo-agent-7', { resource: 'wp:post:77', fields: ['title'] });
    const forged = withSignature(d.token, nonCanonical);
    const upstreamBefore = await upstreamGet(h, '/writes');
    const before = await durableState(h);
    const r = await act(h, 'seo-agent-7', { resource: 'wp:post:77', fields: ['title'], payload: { title: 'x' }, expected_version: 0 }, { decision: forged, lease });
    expect(r.status, r.raw).toBe(403);
    expect(r.body.code).toBe('DECISION_INVALID');
    expect(await upstreamGet(h, '/writes')).toEqual(upstreamBefore);
    const after = await durableState(h);
    expect(after.leases).toEqual(before.leases);
    expect(after.graphRevision).toBe(before.graphRevision);
    // The gateway records its refusal: one REJECTED receipt, and the chain still verifies.
    expect(after.chain.ok).toBe(true);
    expect(after.receipts.length).toBe(before.receipts.length + 1);
    expect(after.receipts.find((x) => (x as { receipt_id: string }).receipt_id === r.body.receipt_id)).toMatchObject({ status: 'REJECTED' });

    const ok = await act(h, 'seo-agent-7', { resource: 'wp:post:77', fields: ['title'], payload: { title: 'x' }, expected_version: 0 }, { decision: d.token, lease });
    expect(ok.status, ok.raw).toBe(201);
  });

  it('a non-canonical decision is refused when taking a lease too', async () => {
    const d = await decideOk(h, 'seo-agent-7', { resource: 'wp:post:78', fields: ['title'] });
    await refused('seo-agent-7', { method: 'POST', url: '/v1/leases', payload: { decisions: [withSignature(d.token, nonCanonical)], ttl_ms: 5_000 } }, 403, 'DECISION_INVALID');
  });

  it('a caller assertion with a non-canonical signature, header or payload is UNAUTHENTICATED', async () => {
    const token = (await h.auth('governance')).authorization.slice('Bearer '.length);
    const [a, b, c] = token.split('.') as [string, string, string];
    const spellings = [`${a}.${b}.${nonCanonical(c)}`];
    if (a.length % 4 >= 2) spellings.push(`${nonCanonical(a)}.${b}.${c}`);
    if (b.length % 4 >= 2) spellings.push(`${a}.${nonCanonical(b)}.${c}`);
    for (const spelled of spellings) {
      const r = await refused(null, { method: 'POST', url: '/v1/grants', headers: { authorization: `Bearer ${spelled}` }, payload: { to: 'seo-agent-7', reason: 'r', scope: { actions: ['read_post'], resources: ['wp:post:*'] } } }, 401, 'UNAUTHENTICATED');
      expect(r.body.detail).toMatch(/malformed assertion/);
    }
    // The canonical spelling of the same assertion is accepted (it was never spent).
    const ok = await h.call(null, { method: 'GET', url: '/v1/principals/seo-agent-7', headers: { authorization: `Bearer ${token}` } });
    expect(ok.status).toBe(200);
  });

  it('an approval with a non-canonical signature is refused and stays unspent', async () => {
    await h.call('governance', { method: 'POST', url: '/v1/grants', payload: { id: 'g-pub-risky', to: 'publisher', reason: 'r', max_depth: 0, scope: { actions: ['publish_post'], resources: ['wp:post:*'], environments: ['production'], fields: ['status'], risk_max: 3 } } });
    await h.call('governance', { method: 'POST', url: '/v1/approvals', payload: { id: 'a-alice-pub', from: 'editor-alice', to: 'publisher', reason: 'r', scope: { actions: ['publish_post'], resources: ['wp:post:*'], environments: ['production'], risk_max: 3 } } });
    const request = { action: 'publish_post', resource: 'wp:post:42', environment: 'production', fields: ['status'] };
    const approval = await createApprovalAssertion({ approver: 'editor-alice', privateJwk: fixtureKey('editor-alice'), approve: { principal: 'publisher', action: request.action, resource: request.resource, environment: request.environment, fields: request.fields }, now: h.clock.now() });
    const r = await refused('publisher', { method: 'POST', url: '/v1/decisions', payload: { ...request, context: { risk: 3, approval: withSignature(approval, nonCanonical) } } }, 422, 'UNPROCESSABLE');
    expect(r.body.detail).toMatch(/approval is not valid: malformed assertion/);
    const ok = await h.call('publisher', { method: 'POST', url: '/v1/decisions', payload: { ...request, context: { risk: 3, approval } } });
    expect(ok.body.allow, ok.raw).toBe(true);
  });
});

describe('query strings, charsets', () => {
  it('GET /v1/graph?at=-1 is 400, not revision 0', async () => {
    const r = await refused('governance', { method: 'GET', url: '/v1/graph?at=-1' }, 400, 'MALFORMED_REQUEST');
    expect(r.body.detail).toMatch(/at must be/);
  });

  it.each(['utf-16', 'UTF-16LE', 'iso-8859-1', '"utf-32"'])('a JSON body declared charset=%s is 415 UNSUPPORTED_MEDIA_TYPE', async (charset) => {
    await refused('governance', { method: 'POST', url: '/v1/principals', headers: { 'content-type': `application/json; charset=${charset}` }, payload: '{"id":"p-cs","kind":"agent","keys":[]}' }, 415, 'UNSUPPORTED_MEDIA_TYPE');
  });

  // Decoded as text, these bytes became U+FFFD and were taken: a Latin-1 "café" stored as "caf\ufffd".
  it.each([
    ['Latin-1 é', Buffer.from('{"id":"p-caf\xe9","kind":"agent","keys":[]}', 'latin1')],
    ['a lone continuation byte', Buffer.concat([Buffer.from('{"id":"p-x","kind":"agent","keys":[],"attributes":{"a":"'), Buffer.from([0x80]), Buffer.from('"}}')])],
    ['an overlong encoding of /', Buffer.concat([Buffer.from('{"id":"p-x","kind":"agent","keys":[],"attributes":{"a":"'), Buffer.from([0xc0, 0xaf]), Buffer.from('"}}')])],
  ])('a body with %s (not UTF-8) is 400 MALFORMED_REQUEST', async (_label, payload) => {
    const r = await refused('governance', { method: 'POST', url: '/v1/principals', headers: { 'content-type': 'application/json' }, payload }, 400, 'MALFORMED_REQUEST');
    expect(r.body.detail).toBe('the body is not valid UTF-8 (a JSON body must be UTF-8)');
  });

  it('UTF-8 beyond ASCII is taken as sent', async () => {
    const r = await h.call('governance', { method: 'POST', url: '/v1/principals', headers: { 'content-type': 'application/json' }, payload: Buffer.from('{"id":"p-utf8-name","kind":"agent","keys":[],"attributes":{"name":"café 😀 עברית"}}', 'utf8') });
    expect([200, 201], r.raw).toContain(r.status);
    expect(r.body.principal.attributes).toEqual({ name: 'café 😀 עברית' });
  });

  it.each([
    '{"id":"p-proto","kind":"agent","keys":[],"__proto__":{"admin":true}}',
    '{"id":"p-proto","kind":"agent","keys":[],"attributes":{"constructor":{"prototype":{"admin":true}}}}',
  ])('valid JSON with a prototype-poisoning key is 400 MALFORMED_REQUEST saying so: %s', async (payload) => {
    const r = await refused('governance', post('/v1/principals', payload), 400, 'MALFORMED_REQUEST');
    expect(r.body.detail).toBe('the body holds a "__proto__" key, or "constructor" with "prototype" in it, which Writ refuses');
  });

  it('JSON that does not parse is still called so', async () => {
    const r = await refused('governance', post('/v1/principals', '{"id":'), 400, 'MALFORMED_REQUEST');
    expect(r.body.detail).toMatch(/not valid JSON/);
  });

  it('a body that is not JSON at all is 415 too', () =>
    refused('governance', { method: 'POST', url: '/v1/principals', headers: { 'content-type': 'text/plain' }, payload: 'id=p-cs' }, 415, 'UNSUPPORTED_MEDIA_TYPE'));

  it.each(['utf-8', 'UTF-8', '"utf-8"', 'utf8'])('charset=%s is accepted', async (charset) => {
    const r = await h.call('governance', { method: 'POST', url: '/v1/principals', headers: { 'content-type': `application/json; charset=${charset}` }, payload: '{"id":"p-utf8","kind":"agent","keys":[]}' });
    expect([200, 201]).toContain(r.status);
  });
});

describe('receipt listing pages', () => {
  it('limit and after coerce from the query string, and following `next` walks 1,000 receipts exactly once each', async () => {
    // 1,000 refused writes (no decision): each leaves one REJECTED receipt.
    const existing = (await durableState(h)).receipts.length;
    for (let i = 0; i < 1000; i++) {
      const r = await h.call('seo-agent-7', { method: 'POST', url: '/v1/actions', payload: { action: 'update_post', resource: `wp:post:${i}`, fields: ['title'], payload: { title: 't' } } });
      expect(r.status).toBe(403);
    }
    const seen: string[] = [];
    let url = '/v1/receipts?status=REJECTED&limit=37';
    for (let pages = 0; pages < 100; pages++) {
      const r = await h.call('governance', { method: 'GET', url });
      expect(r.status, r.raw).toBe(200);
      seen.push(...r.body.receipts.map((x: { receipt_id: string }) => x.receipt_id));
      if (r.body.next === null) break;
      expect(typeof r.body.next).toBe('number');
      url = `/v1/receipts?status=REJECTED&limit=37&after=${r.body.next}`;
    }
    expect(new Set(seen).size).toBe(seen.length);
    expect(seen.length).toBeGreaterThanOrEqual(1000);
    expect(seen.length).toBe((await durableState(h)).receipts.filter((x) => (x as { status: string }).status === 'REJECTED').length);
    expect((await durableState(h)).receipts.length).toBe(existing + 1000);

    const one = await h.call('governance', { method: 'GET', url: '/v1/receipts?limit=1' });
    expect(one.status).toBe(200);
    expect(one.body.receipts).toHaveLength(1);
  });

  it.each(['limit=0', 'limit=1001', 'limit=ten', 'limit=1.5', 'after=-1', 'limit=1&limit=2'])('?%s is 400 MALFORMED_REQUEST', async (q) => {
    await refused('governance', { method: 'GET', url: `/v1/receipts?${q}` }, 400, 'MALFORMED_REQUEST');
  });
  // The query's coercion read these as numbers that passed every bound: Infinity lifted the page caps,
  // -Infinity reached the store and answered 500.
  it.each([
    '/v1/receipts?limit=Infinity', '/v1/receipts?limit=1e309', '/v1/receipts?after=-Infinity',
    '/v1/graph/events?limit=-Infinity', '/v1/graph/events?after=-1e309', '/v1/graph/events?limit=Infinity',
  ])('%s is 400 MALFORMED_REQUEST naming the parameter', async (url) => {
    const r = await refused('governance', { method: 'GET', url }, 400, 'MALFORMED_REQUEST');
    expect(r.body.detail).toMatch(/(limit|after).*must be a finite number/);
  });
  // Finite, but past what a bigint column takes exactly: on PostgreSQL "1e+21" was a 500.
  it.each(['/v1/receipts?after=1e21', '/v1/graph/events?after=9007199254740993'])('%s is 400 MALFORMED_REQUEST', async (url) => {
    const r = await refused('governance', { method: 'GET', url }, 400, 'MALFORMED_REQUEST');
    expect(r.body.detail).toMatch(/after: must be <= 9007199254740991/);
  });
});
