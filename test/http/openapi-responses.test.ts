import { generateKeyPairSync } from 'node:crypto';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERROR_CATALOGUE } from '../../src/errors.js';
import { buildApp } from '../../src/http/index.js';
import { issueLoginToken } from '../../src/service/index.js';
import { decideOk, fencing } from '../support/agent.js';
import { startHarness, type Harness } from '../support/harness.js';
import { openingClaims } from '../support/caller-session.js';
import { misdeclaredTimes, misplacedTimes, WIRE_TIME } from '../support/wire-times.js';

/**
 * Every operation of GET /openapi.json is called, to a success and to at least one refusal, and every
 * answer must be one the document declares: its status, its media type, its body (validated with ajv
 * against the document's own schema) and the headers the document promises. And since fastify
 * serializes answers through those schemas, no field the handler returned may be lost on the way.
 * Every JSON answer also keeps the rule for times on the wire: no member named as an instant (`*_at`,
 * `not_before`, `*Time`, …) holds a number (or anything but an RFC 3339 string or null).
 */
let h: Harness;
/** The app under test, with a hook that keeps what each handler returned before serialization. */
let app: FastifyInstance;
const returned = new Map<string, unknown>();
let doc: any;
const ajv = new Ajv2020({ strict: false, allErrors: true });
(addFormats as unknown as (a: Ajv2020) => void)(ajv);
const DOC_ID = 'https://writ.test/openapi.json';
const seen = new Map<string, Set<number>>();

beforeAll(async () => {
  h = await startHarness({ upstream: true });
  app = await buildApp(h.ctx, {
    plugins: [(a) => {
      a.addHook('preSerialization', async (request, _reply, payload) => {
        returned.set(request.id, JSON.parse(JSON.stringify(payload)));
        return payload;
      });
    }],
  });
  doc = (await h.call(null, { method: 'GET', url: '/openapi.json' })).body;
  ajv.addSchema({ ...doc, $id: DOC_ID });
});
afterAll(async () => {
  await app?.close();
  await h?.close();
});

const pointer = (...parts: string[]) => parts.map((p) => encodeURIComponent(p.replace(/~/g, '~0').replace(/\//g, '~1'))).join('/');

/** Calls the API and checks the answer against the document's operation `method path`. */
async function call(principal: string | null, method: string, path: string, options: { url?: string; payload?: unknown; headers?: Record<string, string>; claims?: Record<string, unknown> } = {}) {
  const url = options.url ?? path;

  const injected = await app.inject({
    method: method as 'GET', url,
    headers: { ...(options.headers ?? {}), ...(principal ? await h.auth(principal, options.claims ? { claims: options.claims } : {}) : {}) },
    ...(options.payload !== undefined ? { payload: options.payload as object } : {}),
  });
  let body: any = injected.body;
  try {
    body = JSON.parse(injected.body);
  } catch {
    /* DOT, metrics */
  }
  const res = { status: injected.statusCode, body, headers: injected.headers as Record<string, unknown>, raw: injected.body };
  const handed = [...returned.values()];
  returned.clear();
  if (typeof body === 'object') {
    expect(handed, `${method} ${url}: one handler result`).toHaveLength(1);
    expect(body, `${method} ${url}: the serializer changed what the handler returned`).toEqual(handed[0]);
  }
  if (typeof body === 'object' && path !== '/openapi.json') expect(misplacedTimes(body), `${method} ${url} ${res.status}: instants must be RFC 3339 strings`).toEqual([]);
  const op = doc.paths[path]?.[method.toLowerCase()];
  expect(op, `${method} ${path} is not in the OpenAPI document`).toBeDefined();
  const declared = op.responses[String(res.status)];
  expect(declared, `${method} ${url} answered ${res.status} (${res.raw.slice(0, 200)}), which the document does not declare`).toBeDefined();
  const mediaType = String(res.headers['content-type'] ?? '').split(';')[0]!.trim();
  expect(Object.keys(declared.content ?? {}), `${method} ${url} ${res.status} answered ${mediaType}`).toContain(mediaType);
  if (mediaType.includes('json')) {
    const validate = ajv.getSchema(`${DOC_ID}#/${pointer('paths', path, method.toLowerCase(), 'responses', String(res.status), 'content', mediaType, 'schema')}`)!;
    expect(validate(res.body), `${method} ${url} ${res.status}: ${JSON.stringify(validate.errors)}\n${res.raw.slice(0, 400)}`).toBe(true);
  }
  if (res.status >= 400) {
    expect(mediaType).toBe('application/problem+json');
    expect(res.status).toBe(ERROR_CATALOGUE[res.body.code as keyof typeof ERROR_CATALOGUE].status);
    if (res.headers['retry-after'] !== undefined) expect(declared.headers?.['Retry-After'], `${method} ${path} ${res.status} sent an undeclared Retry-After`).toBeDefined();
  }
  for (const name of ['server-timing', 'idempotent-replayed']) {
    if (res.headers[name] !== undefined) expect(Object.keys(declared.headers ?? {}).map((k) => k.toLowerCase()), `${method} ${path} ${res.status} sent an undeclared ${name}`).toContain(name);
  }
  const key = `${method} ${path}`;
  seen.set(key, (seen.get(key) ?? new Set()).add(res.status));
  return res;
}

const DECISION = { action: 'update_post', resource: 'wp:post:1024', environment: 'production', fields: ['title'] };

describe('the OpenAPI document', () => {
  it('declares shared components, the security scheme, the /v1/actions headers and no "Default Response"', () => {
    expect(Object.keys(doc.components.schemas)).toEqual(expect.arrayContaining(['Problem', 'Decision', 'Edge', 'Principal', 'LeaseGrant', 'Receipt']));
    expect(doc.components.securitySchemes.callerAssertion).toMatchObject({ type: 'http', scheme: 'bearer' });
    const actions = doc.paths['/v1/actions'].post;
    const headers = actions.parameters.filter((p: any) => p.in === 'header').map((p: any) => p.name.toLowerCase());
    expect(headers).toEqual(expect.arrayContaining(['writ-decision', 'writ-lease-token', 'writ-lease-id', 'writ-fencing-epoch', 'idempotency-key']));
    expect(doc.paths['/v1/leases'].post.responses['423'].headers['Retry-After']).toBeDefined();
    expect(doc.paths['/v1/leases'].post.responses['423'].content['application/problem+json']).toBeDefined();
    expect(JSON.stringify(doc)).not.toContain('Default Response');
    // Every catalogued code is an answer of some operation.
    const listed = new Set<string>();
    for (const item of Object.values<any>(doc.paths)) {
      for (const op of Object.values<any>(item)) {
        for (const r of Object.values<any>(op.responses)) {
          for (const part of r.content?.['application/problem+json']?.schema?.allOf ?? []) for (const c of part.properties?.code?.enum ?? []) listed.add(c);
        }
      }
    }
    // SCHEMA_TOO_NEW refuses a server's start (a store migrated by a newer Writ), SCHEMA_DIVERGED one on a store migrated by a
    // Writ numbered otherwise, STORE_MOVED one on a file copied to
    // PostgreSQL, STORE_BEHIND_MARK one on a database behind the replica's mark of it, STORE_IN_USE and STORE_DAMAGED
    // a `writ restore`: never a request. CLOCK_SKEW is the `code` of GET /readyz's 503 (not a problem) only.
    const startOnly = new Set(['NOT_FOUND', 'SCHEMA_TOO_NEW', 'SCHEMA_DIVERGED', 'STORE_MOVED', 'STORE_BEHIND_MARK', 'STORE_IN_USE', 'STORE_DAMAGED', 'CLOCK_SKEW']);
    expect(Object.keys(ERROR_CATALOGUE).filter((c) => !listed.has(c) && !startOnly.has(c))).toEqual([]);
  });

  it('declares every instant as an RFC 3339 string (format date-time), never as a number', () => {
    // Answers only: request bodies may also give an edge's window as ms numbers (README, "Times on the wire").
    const answers = Object.entries<any>(doc.paths).flatMap(([path, item]) =>
      Object.entries<any>(item).flatMap(([method, op]) => misdeclaredTimes(op.responses, `#/paths/${path}/${method}/responses`)));
    expect([...misdeclaredTimes(doc.components.schemas, '#/components/schemas'), ...answers]).toEqual([]);
    // The guard itself: a number where a time is named is found, wherever it nests.
    expect(misplacedTimes({ a: [{ chain_edges: [{ created_at: 1 }] }], acquireTime: '2026-01-01T00:00:00.000Z', ttl_ms: 5 })).toEqual(['$.a[0].chain_edges[0].created_at = 1']);
    expect(misdeclaredTimes({ properties: { expires_at: { type: 'integer' }, renewTime: { type: ['string', 'null'], format: 'date-time' }, wait_ms: { type: 'integer' } } })).toEqual(['#/properties/expires_at']);
  });

  it('every operation answers as documented, on success and on refusal', async () => {
    // ops
    await call(null, 'GET', '/healthz');
    await call(null, 'GET', '/readyz');
    await call(null, 'GET', '/metrics');
    await call(null, 'GET', '/.well-known/jwks.json');
    await call(null, 'GET', '/openapi.json');

    // graph
    const { generatePrincipalKeyPair } = await import('../../src/sdk/index.js');
    const kp = await generatePrincipalKeyPair();
    // A JWK member the schemas do not name (RFC 7517 allows any) comes back as it went in.
    const created = await call('governance', 'POST', '/v1/principals', { payload: { id: 'new-agent', kind: 'agent', keys: [{ ...kp.publicJwk, key_ops: ['verify'] }] } });
    expect(created.body.principal.keys[0].key_ops).toEqual(['verify']);
    await call('governance', 'POST', '/v1/principals', { payload: { id: 'new-agent', kind: 'agent', keys: [{ ...kp.publicJwk, key_ops: ['verify'] }] } });
    await call('seo-agent-7', 'POST', '/v1/principals', { payload: { id: 'x', kind: 'agent', keys: [] } });
    await call('governance', 'POST', '/v1/principals', { payload: { id: 'x', kind: 'robot', keys: [] } });
    await call(null, 'POST', '/v1/principals', { payload: { id: 'x', kind: 'agent', keys: [] } });
    await call('governance', 'GET', '/v1/principals/{id}', { url: '/v1/principals/seo-agent-7' });
    await call('governance', 'GET', '/v1/principals/{id}', { url: '/v1/principals/nobody' });
    const scope = { actions: ['update_post'], resources: ['wp:post:*'], environments: ['production'], fields: ['title'], risk_max: 1 };
    await call('governance', 'POST', '/v1/grants', { payload: { id: 'g-new', to: 'new-agent', reason: 'test', scope } });
    await call('seo-agent-7', 'POST', '/v1/grants', { payload: { id: 'g-new2', to: 'new-agent', reason: 'test', scope } });
    await call('orchestrator', 'POST', '/v1/delegations', { payload: { id: 'd-new', from: 'orchestrator', to: 'new-agent', reason: 'test', scope, max_depth: 0 } });
    await call('orchestrator', 'POST', '/v1/delegations', { payload: { id: 'd-too-much', from: 'orchestrator', to: 'new-agent', reason: 'test', scope: { ...scope, actions: ['deploy'] } } });
    await call('governance', 'POST', '/v1/ownerships', { payload: { id: 'o-new', owner: 'new-agent', resource: 'job:nightly', reason: 'test' } });
    await call('governance', 'POST', '/v1/ownerships', { payload: { id: 'o-dup', owner: 'new-agent', resource: 'job:nightly', reason: 'test' } });
    await call('governance', 'POST', '/v1/approvals', { payload: { id: 'a-new', from: 'editor-alice', to: 'new-agent', reason: 'test', scope: { actions: ['update_post'], resources: ['wp:post:*'], constraints: { risk_max: 3 } } } });
    await call('governance', 'POST', '/v1/approvals', { payload: { id: 'a-bad', from: 'nobody', to: 'new-agent', reason: 'test', scope } });
    await call('governance', 'POST', '/v1/preemptions', { payload: { id: 'p-new', from: 'incident-commander', to: 'new-agent', reason: 'test' } });
    await call('governance', 'POST', '/v1/preemptions', { payload: { id: 'p-new', from: 'incident-commander', to: 'seo-agent-7', reason: 'other' } });
    await call('governance', 'GET', '/v1/edges/{id}', { url: '/v1/edges/g-new' });
    await call('governance', 'GET', '/v1/edges/{id}', { url: '/v1/edges/nope' });
    await call('governance', 'GET', '/v1/graph');
    await call('governance', 'GET', '/v1/graph', { url: '/v1/graph?format=dot' });
    await call('governance', 'GET', '/v1/graph', { url: '/v1/graph?at=yesterday' });

    // decisions
    await call('seo-agent-7', 'POST', '/v1/decisions', { payload: DECISION });
    await call('seo-agent-7', 'POST', '/v1/decisions', { payload: { ...DECISION, fields: ['body'] } });
    await call('seo-agent-7', 'POST', '/v1/decisions', { payload: { ...DECISION, resource: 'nothing:here' } });
    await call('seo-agent-7', 'POST', '/v1/decisions', { payload: { ...DECISION, extra: 1 } });
    await call('governance', 'POST', '/v1/explain', { payload: { ...DECISION, principal: 'seo-agent-7' } });
    await call('seo-agent-7', 'POST', '/v1/explain', { payload: { ...DECISION, principal: 'content-agent-3' } });

    // coordination: lease, busy, write, renew, release
    const d = await decideOk(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['title'] });
    const granted = await call('seo-agent-7', 'POST', '/v1/leases', { payload: { decisions: [d.token], ttl_ms: 10_000 } });
    const lease = granted.body;
    await call('governance', 'POST', '/v1/delegations', { payload: { id: 'd-content-title', from: 'orchestrator', to: 'content-agent-3', reason: 'test', max_depth: 0, scope } });
    const other = await decideOk(h, 'content-agent-3', { resource: 'wp:post:1024', fields: ['title'] });
    const busy = await call('content-agent-3', 'POST', '/v1/leases', { payload: { decisions: [other.token] } });
    expect(busy.body.code).toBe('RESOURCE_BUSY');
    expect(busy.headers['retry-after']).toBeDefined();
    // When the holder's lease runs out, as the holder was told it would.
    expect(busy.body.expires_at).toBe(lease.expires_at);
    expect(busy.body.expires_at).toMatch(WIRE_TIME);
    await call('seo-agent-7', 'POST', '/v1/leases', { payload: { decisions: ['not-a-token'] } });
    await call('seo-agent-7', 'POST', '/v1/leases/{id}/renew', { url: `/v1/leases/${lease.lease_id}/renew`, payload: { token: lease.token } });
    await call('seo-agent-7', 'POST', '/v1/leases/{id}/renew', { url: `/v1/leases/${lease.lease_id}/renew`, payload: { token: 'wrong' } });
    await call('governance', 'GET', '/v1/leases');
    await call('governance', 'GET', '/v1/leases', { url: '/v1/leases?bogus=1' });

    const written = await call('seo-agent-7', 'POST', '/v1/actions', { headers: actHeaders(d.token, lease, 'k1'), payload: { action: 'update_post', resource: 'wp:post:1024', fields: ['title'], payload: { title: 'T' }, expected_version: 0 } });
    expect(written.status).toBe(201);
    expect(written.headers['server-timing']).toBeDefined();
    const replay = await call('seo-agent-7', 'POST', '/v1/actions', { headers: actHeaders(d.token, lease, 'k1'), payload: { action: 'update_post', resource: 'wp:post:1024', fields: ['title'], payload: { title: 'T' }, expected_version: 0 } });
    expect(replay.status).toBe(200);
    const d2 = await decideOk(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['title'] });
    const conflict = await call('seo-agent-7', 'POST', '/v1/actions', { headers: actHeaders(d2.token, lease, 'k2'), payload: { action: 'update_post', resource: 'wp:post:1024', fields: ['title'], payload: { title: 'U' }, expected_version: 0 } });
    expect(conflict.body.code).toBe('VERSION_CONFLICT');
    await call('seo-agent-7', 'POST', '/v1/actions', { payload: { action: 'update_post', resource: 'wp:post:1024', fields: ['title'], payload: { title: 'U' } } });
    await call('governance', 'GET', '/v1/receipts/{id}', { url: `/v1/receipts/${written.body.receipt.receipt_id}` });
    await call('governance', 'GET', '/v1/receipts/{id}', { url: '/v1/receipts/nope' });
    await call('governance', 'GET', '/v1/receipts');
    await call('governance', 'GET', '/v1/receipts', { url: '/v1/receipts?status=LOST' });
    await call('governance', 'GET', '/v1/audit/verify');
    await call(null, 'GET', '/v1/audit/verify');
    const impact = await call('governance', 'POST', '/v1/impact', { payload: { revoke: { edge: 'd-orch-seo' } } });
    expect(impact.body.lost[0].principal).toBe('seo-agent-7');
    expect(impact.body.leases_ending[0].holder).toBe('seo-agent-7');
    await call('orchestrator', 'POST', '/v1/impact', { payload: { revoke: { principal: 'orchestrator' } } });
    await call('editor-alice', 'POST', '/v1/impact', { payload: { delegate: { from: 'editor-alice', to: 'publisher', reason: 'test', scope, max_depth: 0 } } });
    await call('content-agent-3', 'POST', '/v1/impact', { payload: { revoke: { edge: 'd-orch-seo' } } });
    await call('governance', 'POST', '/v1/impact', { payload: { revoke: { edge: 'nope' } } });
    await call('governance', 'POST', '/v1/impact', { payload: { revoke: { edge: 'd-orch-seo', principal: 'x' } } });

    await call('seo-agent-7', 'DELETE', '/v1/leases/{id}', { url: `/v1/leases/${lease.lease_id}`, payload: { token: lease.token } });
    await call('seo-agent-7', 'DELETE', '/v1/leases/{id}', { url: `/v1/leases/${lease.lease_id}` });
    await call('seo-agent-7', 'DELETE', '/v1/leases/{id}', { url: '/v1/leases/nope', payload: { token: 'x' } });

    // caller sessions
    const x25519 = generateKeyPairSync('x25519').publicKey.export({ format: 'jwk' }).x!;
    const zero = Buffer.alloc(32).toString('base64url');
    await call('seo-agent-7', 'POST', '/v1/sessions', { payload: { public_key: { kty: 'OKP', crv: 'X25519', x: x25519 }, ttl_ms: 60_000 }, claims: openingClaims(x25519) });
    await call('seo-agent-7', 'POST', '/v1/sessions', { payload: { public_key: { kty: 'OKP', crv: 'X25519', x: zero } }, claims: openingClaims(zero) });
    await call('seo-agent-7', 'POST', '/v1/sessions', { payload: { public_key: { kty: 'OKP', crv: 'X25519', x: x25519 }, ttl_ms: 10 }, claims: openingClaims(x25519) });
    await call('seo-agent-7', 'POST', '/v1/sessions', { payload: { public_key: { kty: 'OKP', crv: 'X25519', x: x25519 } } });

    // incidents
    const inc = await decideOk(h, 'incident-commander', { action: 'declare_incident', resource: 'incident:db-down', fields: [] });
    await call('incident-commander', 'POST', '/v1/incidents', { payload: { id: 'db-down', reason: 'db is down', decision: inc.token } });
    await call('incident-commander', 'POST', '/v1/incidents', { payload: { id: 'db-down', reason: 'again', decision: inc.token } });
    await call('governance', 'GET', '/v1/incidents');
    await call(null, 'GET', '/v1/incidents');
    await call('incident-commander', 'DELETE', '/v1/incidents/{id}', { url: '/v1/incidents/db-down' });
    await call('incident-commander', 'DELETE', '/v1/incidents/{id}', { url: '/v1/incidents/nope' });

    // revocations (DELETE bodies optional; the reason may come in the query)
    await call('governance', 'DELETE', '/v1/edges/{id}', { url: '/v1/edges/d-new?reason=test%20over' });
    await call('governance', 'DELETE', '/v1/edges/{id}', { url: '/v1/edges/nope' });
    await call('governance', 'DELETE', '/v1/principals/{id}', { url: '/v1/principals/new-agent', payload: { reason: 'test over' } });
    await call('seo-agent-7', 'DELETE', '/v1/principals/{id}', { url: '/v1/principals/content-agent-3' });

    // AuthZEN 1.0
    const seo = { type: 'agent', id: 'seo-agent-7' };
    const post1 = { type: 'wp:post', id: 'wp:post:1', properties: { environment: 'production', fields: ['title'] } };
    await call(null, 'GET', '/.well-known/authzen-configuration');
    await call('seo-agent-7', 'POST', '/access/v1/evaluation', { payload: { subject: seo, action: { name: 'update_post' }, resource: post1 } });
    await call('seo-agent-7', 'POST', '/access/v1/evaluation', { payload: { subject: { type: 'human', id: 'editor-alice' }, action: { name: 'update_post' }, resource: post1 } });
    await call('seo-agent-7', 'POST', '/access/v1/evaluations', { payload: { subject: seo, action: { name: 'update_post' }, evaluations: [{ resource: post1 }, { resource: { ...post1, id: 'wp:post:2' } }] } });
    await call('seo-agent-7', 'POST', '/access/v1/evaluations', { payload: { subject: seo, evaluations: 'all of them' } });
    await call('governance', 'POST', '/access/v1/search/subject', { payload: { subject: { type: 'agent' }, action: { name: 'update_post' }, resource: post1 } });
    await call('governance', 'POST', '/access/v1/search/subject', { payload: { subject: { type: 'robot' }, action: { name: 'update_post' }, resource: post1 } });
    await call('seo-agent-7', 'POST', '/access/v1/search/resource', { payload: { subject: seo, action: { name: 'update_post' }, resource: { type: 'wp:post' } } });
    await call('seo-agent-7', 'POST', '/access/v1/search/resource', { payload: { subject: { type: 'human', id: 'editor-alice' }, action: { name: 'update_post' }, resource: { type: 'wp:post' } } });
    await call('seo-agent-7', 'POST', '/access/v1/search/action', { payload: { subject: seo, resource: post1 } });
    await call(null, 'POST', '/access/v1/search/action', { payload: { subject: seo, resource: post1 } });

    // The auditor's reads and the console (its pages, its sign-in with a one-time link, the session cookie).
    await call('governance', 'GET', '/v1/principals/{id}/capabilities', { url: '/v1/principals/seo-agent-7/capabilities' });
    await call('governance', 'GET', '/v1/principals/{id}/capabilities', { url: `/v1/principals/seo-agent-7/capabilities?at=${encodeURIComponent(new Date(h.clock.now()).toISOString())}` });
    await call('content-agent-3', 'GET', '/v1/principals/{id}/capabilities', { url: '/v1/principals/seo-agent-7/capabilities' });
    await call('governance', 'GET', '/v1/principals/{id}/capabilities', { url: '/v1/principals/nobody/capabilities' });
    await call('governance', 'GET', '/v1/receipts/{id}/why', { url: `/v1/receipts/${written.body.receipt.receipt_id}/why` });
    await call('governance', 'GET', '/v1/receipts/{id}/why', { url: '/v1/receipts/nope/why' });
    await call('governance', 'GET', '/v1/receipts', { url: `/v1/receipts?since=${encodeURIComponent(new Date(h.clock.now() - 60_000).toISOString())}` });
    await call('governance', 'GET', '/v1/receipts', { url: '/v1/receipts?order=newest&limit=1' });
    await call('governance', 'GET', '/v1/receipts', { url: '/v1/receipts?order=newest&after=1' });
    await call('governance', 'GET', '/v1/graph/events', { url: '/v1/graph/events?limit=5' });
    await call('governance', 'GET', '/v1/graph/events', { url: '/v1/graph/events?limit=0' });
    await call('governance', 'GET', '/v1/graph/diff', { url: '/v1/graph/diff?from=3&to=10' });
    await call('governance', 'GET', '/v1/graph/diff', { url: '/v1/graph/diff?from=10&to=3' });
    await call('governance', 'GET', '/v1/graph/diff');
    await call('governance', 'GET', '/v1/audit/expiring', { url: '/v1/audit/expiring?within_ms=86400000' });
    await call('governance', 'GET', '/v1/audit/expiring', { url: '/v1/audit/expiring?within_ms=soon' });
    await call('governance', 'GET', '/v1/audit/orphans');
    await call(null, 'GET', '/v1/audit/orphans');
    await call('governance', 'GET', '/v1/leases/queues');
    await call(null, 'GET', '/v1/leases/queues');
    await call(null, 'GET', '/console');
    await call(null, 'GET', '/console/{file}', { url: '/console/app.js' });
    await call(null, 'GET', '/console/{file}', { url: '/console/..%2Fpackage.json' });
    const link = await issueLoginToken(h.ctx, 'governance');
    const opened = await call(null, 'POST', '/v1/console/session', { payload: { token: link.token } });
    expect(opened.status).toBe(201);
    await call(null, 'POST', '/v1/console/session', { payload: { token: link.token } });
    const cookie = { cookie: String(opened.headers['set-cookie']).split(';')[0]! };
    await call(null, 'GET', '/v1/console/session', { headers: cookie });
    await call(null, 'GET', '/v1/console/session');
    await call(null, 'POST', '/v1/grants', { headers: cookie, payload: { id: 'g-by-cookie', to: 'seo-agent-7', reason: 'test', scope } });
    await call(null, 'DELETE', '/v1/console/session', { headers: cookie });
    await call(null, 'DELETE', '/v1/console/session', { headers: cookie });

    // The lease stream: a plain GET is refused as documented; the upgrade (101, which inject cannot
    // answer) through @fastify/websocket's injectWS, and over a real socket in lease-stream.test.ts.
    await call('seo-agent-7', 'GET', '/v1/leases/stream');
    const stream = await app.injectWS('/v1/leases/stream', { headers: await h.auth('seo-agent-7') });
    expect(doc.paths['/v1/leases/stream'].get.responses['101']).toBeDefined();
    seen.get('GET /v1/leases/stream')!.add(101);
    stream.terminate();

    // Every documented operation was called, to a success and to a refusal (the ops endpoints have none to give).
    const noRefusal = new Set(['GET /console', 'GET /healthz', 'GET /readyz', 'GET /metrics', 'GET /.well-known/jwks.json', 'GET /openapi.json', 'GET /.well-known/authzen-configuration']);
    for (const [path, item] of Object.entries<any>(doc.paths)) {
      for (const method of Object.keys(item)) {
        const key = `${method.toUpperCase()} ${path}`;
        const statuses = [...(seen.get(key) ?? [])];
        expect(statuses.some((s) => s < 300), `${key} was never answered with a success`).toBe(true);
        if (!noRefusal.has(key)) expect(statuses.some((s) => s >= 400), `${key} was never answered with a refusal`).toBe(true);
      }
    }
  });
});

function actHeaders(decision: string, lease: { lease_id: string; token: string; epochs: Record<string, number> }, idempotencyKey: string): Record<string, string> {
  return {
    'writ-decision': decision,
    'writ-lease-token': lease.token,
    'writ-lease-id': lease.lease_id,
    'writ-fencing-epoch': fencing(lease.epochs),
    'idempotency-key': idempotencyKey,
  };
}
