import fc from 'fast-check';
import { ERROR_CATALOGUE } from '../../src/errors.js';
import { listLeases } from '../../src/service/index.js';
import type { Harness } from './harness.js';

/**
 * A seeded, property-based HTTP fuzzer over every route of the app (read from its OpenAPI document,
 * plus the hidden ops routes and paths that match none). Requests are built from each route's own
 * schema, then spoiled: wrong types, huge and unicode strings, lone surrogates, deep nesting, ids
 * with path tricks, numbers at the edges, missing / duplicated / forged headers, wrong content types,
 * bodies over the limit. The suite (test/fuzz) runs a few thousand; bench/soak.ts runs ≥ 100,000.
 */

export interface FuzzRequest {
  route: string;
  method: string;
  url: string;
  /** Who signs the caller assertion, made fresh when the request is sent; or a hostile Authorization. */
  auth: { as: string } | { raw: string | string[] } | null;
  headers: Record<string, string | string[]>;
  payload?: string;
}

export interface FuzzPools {
  principals: string[];
  edges: string[];
  resources: string[];
  /** Genuine decision tokens (so the lease and gateway code is reached past the signature check). */
  decisions: string[];
  /** A genuine lease (id, token), so renew / release / fencing are reached too. */
  leases: { lease_id: string; token: string }[];
  receipts: string[];
  bodyLimit: number;
}

interface RouteSpec {
  method: string;
  path: string;
  body?: unknown;
  query?: Record<string, unknown>;
}

/** Every route the app serves, from its OpenAPI document, plus the ones hidden from it. */
export function routesOf(h: Harness): RouteSpec[] {
  const doc = h.app.swagger() as { paths: Record<string, Record<string, { parameters?: { in: string; name: string; schema: unknown }[]; requestBody?: { content: Record<string, { schema: unknown }> } }>> };
  const routes: RouteSpec[] = [];
  for (const [path, ops] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(ops)) {
      const query = Object.fromEntries((op.parameters ?? []).filter((p) => p.in === 'query').map((p) => [p.name, p.schema]));
      routes.push({ method: method.toUpperCase(), path, body: op.requestBody?.content['application/json']?.schema, ...(Object.keys(query).length ? { query } : {}) });
    }
  }
  for (const path of ['/healthz', '/readyz', '/metrics', '/openapi.json']) routes.push({ method: 'GET', path });
  return routes;
}

const PATH_TRICKS = ['..', '../..', '..%2F..%2Fetc%2Fpasswd', '%2e%2e', '%2F', 'a%2Fb', '%00', '%', '%ED%A0%80', '%C0%AE', '.', '~', '*', '**', '__proto__', 'constructor', 'a;b', 'a?b=c', 'x'.repeat(600)];
const LONE = ['\ud800', 'a\udfffb', '\udbff', 'wp:post:\ud800', 'title\udc00'];
const ODD = ['', ' ', '\u0000', '\u202e', '\ufeff', 'e\u0301', '𝕏'.repeat(20), '🙂', 'null', 'true', '0', '-1', '1e999', '<script>', "'; DROP TABLE leases;--", '%s%n', '\r\nX-Evil: 1'];
const EDGE_NUMBERS = [0, -0, -1, 1, 2 ** 31 - 1, 2 ** 31, 2 ** 32, 2 ** 53 - 1, 2 ** 53 + 2, -(2 ** 53), 1e308, -1e308, 1.5, 5e-324, 300_001, 999_999_999_999];

/** `arb` once in `n` draws, null otherwise (fc.option's freq is the other way round: null once in freq). */
const rarely = <T>(arb: fc.Arbitrary<T>, n: number): fc.Arbitrary<T | null> => fc.oneof({ weight: n - 1, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: arb });

const hostileString = (): fc.Arbitrary<string> =>
  fc.oneof(
    { weight: 3, arbitrary: fc.string({ maxLength: 40 }) },
    { weight: 2, arbitrary: fc.string({ unit: 'binary', maxLength: 20 }) },
    { weight: 2, arbitrary: fc.constantFrom(...LONE) },
    { weight: 2, arbitrary: fc.constantFrom(...ODD, ...PATH_TRICKS) },
    { weight: 1, arbitrary: fc.integer({ min: 200, max: 20_000 }).map((n) => 'x'.repeat(n)) },
  );

const edgeNumber = (): fc.Arbitrary<number> => fc.oneof(fc.constantFrom(...EDGE_NUMBERS), fc.integer(), fc.double({ noNaN: true, noDefaultInfinity: true }));

/**
 * Nesting n deep, as a marker the body's text is given in its place (JSON.stringify itself would
 * overflow the stack on a value thousands deep): `{"a":[{"a":…1…}]}`.
 */
const nestedValue = (n: number): string => `\u0000nest:${n}\u0000`;
const NEST_MARKER = /"\\u0000nest:(\d+)\\u0000"/g;
function nestedText(n: number): string {
  const open = Array.from({ length: n }, (_, i) => (i % 2 ? '[' : '{"a":')).join('');
  const close = Array.from({ length: n }, (_, i) => (i % 2 ? ']' : '}')).reverse().join('');
  return open + '1' + close;
}
const toJson = (v: unknown): string => (JSON.stringify(v) ?? 'null').replace(NEST_MARKER, (_, n: string) => nestedText(Number(n)));

const hostileValue = (): fc.Arbitrary<unknown> =>
  fc.oneof(
    hostileString(),
    edgeNumber(),
    fc.constantFrom(null, true, false, [], {}),
    fc.constantFrom(40, 63, 64, 65, 200, 5_000).map(nestedValue),
    fc.jsonValue({ maxDepth: 2 }),
  );

/** Values shaped by a JSON schema, from the domain's own vocabulary, now and then of the wrong kind. */
function fromSchema(schema: unknown, pools: FuzzPools, depth = 0): fc.Arbitrary<unknown> {
  const s = (schema ?? {}) as { type?: string | string[]; enum?: unknown[]; anyOf?: unknown[]; properties?: Record<string, unknown>; required?: string[]; items?: unknown };
  const wrong = { weight: 1, arbitrary: hostileValue() };
  if (s.enum) return fc.oneof({ weight: 8, arbitrary: fc.constantFrom(...s.enum) }, wrong);
  if (s.anyOf) return fc.oneof(...s.anyOf.map((x) => fromSchema(x, pools, depth)));
  const types = Array.isArray(s.type) ? s.type : [s.type ?? 'any'];
  const typed = types.map((t): fc.Arbitrary<unknown> => {
    switch (t) {
      case 'object':
        if (!s.properties || depth > 4) return fc.oneof(fc.jsonValue({ maxDepth: 3 }).filter((v) => v !== null && typeof v === 'object' && !Array.isArray(v)), fc.constant({}));
        return fc
          .tuple(
            fc.record(Object.fromEntries(Object.entries(s.properties).map(([k, v]) => [k, fromSchema(v, pools, depth + 1)])), { requiredKeys: (s.required ?? []).filter((k) => k in s.properties!) }),
            rarely(fc.tuple(fc.constantFrom('colour', '__proto__', 'constructor', 'Action'), hostileValue()), 8),
          )
          .map(([o, extra]) => (extra ? { ...o, [extra[0]]: extra[1] } : o));
      case 'array':
        return fc.array(fromSchema(s.items, pools, depth + 1), { maxLength: 4 });
      case 'string':
        return fc.oneof(
          { weight: 6, arbitrary: fc.constantFrom(...pools.principals, ...pools.edges, ...pools.resources, ...pools.decisions, 'update_post', 'publish_post', 'read_post', 'declare_incident', 'production', 'staging', 'title', 'body', 'status', 'meta_description', '*', 'wp:post:*', '2026-06-01T12:00:00Z') },
          { weight: 2, arbitrary: hostileString() },
        );
      case 'integer':
      case 'number':
        return fc.oneof({ weight: 3, arbitrary: fc.integer({ min: 0, max: 100_000 }) }, { weight: 1, arbitrary: edgeNumber() });
      case 'boolean':
        return fc.boolean();
      case 'null':
        return fc.constant(null);
      default:
        return fc.jsonValue({ maxDepth: 3 });
    }
  });
  return fc.oneof({ weight: 8, arbitrary: typed.length === 1 ? typed[0]! : fc.oneof(...typed) }, wrong);
}

/**
 * Replaces one member anywhere inside a value (a leaf or a container) by something of the same kind
 * that is hostile (a string by a lone surrogate, a huge or odd string; a number by an edge number; an
 * object or array by deep nesting), so it passes the schema and reaches the code behind it; or, now
 * and then, by anything at all.
 */
function spoil(): fc.Arbitrary<(v: unknown) => unknown> {
  return fc
    .tuple(fc.nat(), hostileString(), edgeNumber(), fc.constantFrom(63, 64, 65, 4_100, 5_000), hostileValue(), fc.nat(3))
    .map(([pick, str, num, depth, anything, kindless]) => (value: unknown) => {
      const paths: (string | number)[][] = [];
      const walk = (v: unknown, path: (string | number)[]) => {
        if (path.length) paths.push(path);
        if (Array.isArray(v)) v.forEach((x, i) => walk(x, [...path, i]));
        else if (v !== null && typeof v === 'object') for (const [k, x] of Object.entries(v)) walk(x, [...path, k]);
      };
      walk(value, []);
      if (paths.length === 0) return anything;
      const path = paths[pick % paths.length]!;
      const copy = structuredClone(value) as Record<string | number, unknown>;
      let parent = copy;
      for (const k of path.slice(0, -1)) parent = parent[k] as Record<string | number, unknown>;
      const key = path.at(-1)!;
      const old = parent[key];
      parent[key] = kindless === 0 ? anything : typeof old === 'string' ? str : typeof old === 'number' ? num : Array.isArray(old) ? [str] : old !== null && typeof old === 'object' ? nestedValue(depth) : anything;
      return copy;
    });
}

/** Well-formed bodies for the routes whose refusals happen deep inside (so a spoiled one gets that far). */
function examples(path: string, pools: FuzzPools): Record<string, unknown>[] {
  const decisionRequest = { action: 'update_post', resource: 'wp:post:1024', environment: 'production', fields: ['title'] };
  switch (path) {
    case '/v1/actions':
      return [
        { action: 'update_post', resource: 'wp:post:1024', fields: ['title'], payload: { title: 'x' }, expected_version: 0 },
        { action: 'update_post', resource: 'wp:post:9', fields: ['title'], payload: { title: { deep: { er: 'x' } } } },
      ];
    case '/v1/decisions':
    case '/v1/explain':
      return [decisionRequest, { ...decisionRequest, fields: ['body'], context: { risk: 3, reason: 'r' } }];
    case '/v1/leases':
      return pools.decisions.map((d) => ({ decisions: [d], ttl_ms: 5_000 }));
    case '/v1/leases/{id}/renew':
    case '/v1/leases/{id}':
      return pools.leases.map((l) => ({ token: l.token }));
    case '/v1/principals':
      return [{ id: 'fz-agent', kind: 'agent', keys: [], attributes: { team: { name: 'x' } } }];
    case '/v1/grants':
      return [{ to: 'seo-agent-7', reason: 'r', scope: { actions: ['read_post'], resources: ['wp:post:*'] } }];
    case '/v1/delegations':
      return [{ from: 'orchestrator', to: 'seo-agent-7', reason: 'r', scope: { actions: ['update_post'], resources: ['wp:post:*'], fields: ['title'] } }];
    case '/v1/incidents':
      return pools.decisions.map((decision) => ({ id: 'inc-1', reason: 'r', decision }));
    default:
      return [];
  }
}

/** The body text: the schema's value, a route's example with one member spoiled, or no JSON at all. */
function bodyText(path: string, schema: unknown, pools: FuzzPools): fc.Arbitrary<string | undefined> {
  const value = fromSchema(schema, pools);
  const known = examples(path, pools);
  const spoiled = known.length ? fc.tuple(fc.constantFrom(...known), fc.oneof({ weight: 1, arbitrary: fc.constant(null) }, { weight: 3, arbitrary: spoil() })).map(([example, how]) => toJson(how ? how(example) : example)) : value.map(toJson);
  return fc.oneof(
    { weight: 8, arbitrary: spoiled },
    { weight: 8, arbitrary: value.map(toJson) },
    {
      weight: 2,
      arbitrary: fc.tuple(value, fc.constantFrom(63, 64, 65, 100, 4_100, 5_000)).map(([v, n]) => {
        const o = v !== null && typeof v === 'object' && !Array.isArray(v) ? { ...(v as object) } : {};
        const key = Object.keys(o)[0] ?? 'payload';
        return toJson({ ...o, [key]: nestedValue(n) });
      }),
    },
    { weight: 2, arbitrary: fc.constantFrom('', '{', '{"a":1', 'null', '[]', '"s"', '1e999', '{"__proto__":{"admin":true}}', '{"constructor":{"prototype":{"x":1}}}', '\ufeff{}', '{"a":1,"a":2}', '[{}]'.repeat(3)) },
    { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 200 }) },
    { weight: 1, arbitrary: fc.constant(`{"reason":"${'x'.repeat(pools.bodyLimit + 16)}"}`) },
    { weight: 1, arbitrary: fc.constant(undefined) },
  );
}

const CONTENT_TYPES = ['application/json; charset=utf-16', 'application/json; charset=UTF-8', 'text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'APPLICATION/JSON', 'application/json;charset="latin1"', 'application/jsonx', '*/*'];

/** A path parameter: a known id, or a trick, encoded or raw. */
function pathParam(pools: FuzzPools): fc.Arbitrary<string> {
  return fc.oneof(
    { weight: 5, arbitrary: fc.constantFrom(...pools.principals, ...pools.edges, ...pools.receipts, ...pools.leases.map((l) => l.lease_id), 'ghost', 'lease_AAAA').map(encodeURIComponent) },
    { weight: 2, arbitrary: fc.constantFrom(...PATH_TRICKS) },
    { weight: 2, arbitrary: hostileString().map(safeEncode) },
  );
}

function safeEncode(s: string): string {
  try {
    return encodeURIComponent(s);
  } catch {
    return s.replace(/[^A-Za-z0-9]/g, '_'); // a lone surrogate cannot be percent-encoded as UTF-8
  }
}

function queryString(query: Record<string, unknown> | undefined, pools: FuzzPools): fc.Arbitrary<string> {
  const known = Object.entries(query ?? {});
  const pair = (name: string, schema: unknown) =>
    fc.oneof(
      { weight: 4, arbitrary: fromSchema(schema, pools).map((v) => `${name}=${safeEncode(typeof v === 'string' ? v : toJson(v))}`) },
      { weight: 2, arbitrary: fc.constantFrom(...EDGE_NUMBERS.map(String), '-1', '', '1.0', '0x10', '1e3', 'NaN', '%', '%ED%A0%80').map((v) => `${name}=${v}`) },
    );
  const pairs = known.map(([name, schema]) => rarely(pair(name, schema), 2));
  return fc
    .tuple(fc.tuple(...pairs), rarely(fc.constantFrom('unknown=1', 'limit=1&limit=2', 'at=1&at=2', '__proto__=x', 'a[b]=c', '&&&', '=x'), 6), fc.boolean())
    .map(([ps, extra, dup]) => {
      const parts = [...ps.filter((p): p is string => p !== null), ...(extra ? [extra] : [])];
      if (dup && parts[0]) parts.push(parts[0]);
      return parts.length ? `?${parts.join('&')}` : '';
    });
}

function headersArb(pools: FuzzPools): fc.Arbitrary<Record<string, string | string[]>> {
  const tokenish = fc.oneof(fc.constantFrom(...pools.decisions, ...pools.leases.map((l) => l.token)), hostileString().map((s) => s.replace(/[^\t\x20-\x7e\x80-\xff]/g, '')));
  const value = fc.oneof({ weight: 4, arbitrary: tokenish }, { weight: 1, arbitrary: fc.tuple(tokenish, tokenish).map(([a, b]) => [a, b]) });
  return fc.record(
    {
      'writ-decision': value,
      'writ-lease-token': value,
      'writ-lease-id': fc.oneof(fc.constantFrom(...pools.leases.map((l) => l.lease_id)), value),
      'writ-fencing-epoch': fc.oneof(fc.constantFrom('1', '0', '-1', '9007199254740993', 'a=1', 'wp:post:1024#title=1', 'k=1, k=2', '=', ',,,', '1e3'), value),
      'idempotency-key': value,
      accept: fc.constantFrom('text/vnd.graphviz', '*/*', 'application/xml', ''),
    },
    { requiredKeys: [] },
  );
}

const AUTH_RAW = ['', 'Bearer', 'Bearer ', 'Basic dXNlcjpwYXNz', 'Bearer a.b.c', 'Bearer ..', 'Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJnb3Zlcm5hbmNlIn0.', 'bearer x.y', `Bearer ${'a'.repeat(9000)}`];

function authArb(pools: FuzzPools): fc.Arbitrary<FuzzRequest['auth']> {
  return fc.oneof(
    { weight: 8, arbitrary: fc.constantFrom('governance', 'seo-agent-7', 'orchestrator', 'editor-alice', 'publisher').map((as) => ({ as })) },
    { weight: 1, arbitrary: fc.constant(null) },
    { weight: 1, arbitrary: fc.oneof(fc.constantFrom(...AUTH_RAW), fc.constantFrom(...pools.decisions).map((d) => `Bearer ${d}`)).map((raw) => ({ raw })) },
    { weight: 1, arbitrary: fc.constant<FuzzRequest['auth']>({ raw: ['Bearer a.b.c', 'Bearer x.y.z'] }) },
  );
}

/** One fuzzed request for one of `routes` (or for a path no route matches). */
export function fuzzRequestArbitrary(routes: RouteSpec[], pools: FuzzPools): fc.Arbitrary<FuzzRequest> {
  const perRoute = routes.map((r) =>
    fc
      .record({
        path: fc.tuple(...(r.path.match(/\{[^}]+\}/g) ?? []).map(() => pathParam(pools))).map((ids) => {
          let i = 0;
          return r.path.replace(/\{[^}]+\}/g, () => ids[i++]!);
        }),
        query: queryString(r.query, pools),
        body: r.body ? bodyText(r.path, r.body, pools) : rarely(fc.constantFrom('{}', 'x', '{"a":1}'), 8).map((b) => b ?? undefined),
        contentType: rarely(fc.constantFrom(...CONTENT_TYPES), 10),
        method: rarely(fc.constantFrom('PUT', 'PATCH', 'OPTIONS', 'HEAD', 'DELETE', 'POST', 'GET'), 15),
        headers: headersArb(pools),
        auth: authArb(pools),
      })
      .map(({ path, query, body, contentType, method, headers, auth }): FuzzRequest => {
        const h: Record<string, string | string[]> = { ...headers };
        if (body !== undefined) h['content-type'] = contentType ?? 'application/json';
        return { route: `${r.method} ${r.path}`, method: method ?? r.method, url: path + query, auth, headers: h, ...(body !== undefined ? { payload: body } : {}) };
      }),
  );
  const nowhere = fc.tuple(fc.constantFrom('GET', 'POST', 'DELETE'), fc.constantFrom('/', '/v1', '/v1/', '/v2/decisions', '/v1/decisions/', '//v1//principals', '/v1/principals/a/b', '/V1/DECISIONS', '/v1/%2e%2e/healthz', '/v1/../healthz', '/%ED%A0%80'))
    .map(([method, url]): FuzzRequest => ({ route: 'no route', method, url, auth: { as: 'governance' }, headers: {} }));
  return fc.oneof(...perRoute.map((arbitrary) => ({ weight: 4, arbitrary })), { weight: 1, arbitrary: nowhere });
}

export interface FuzzOutcome {
  status: number;
  contentType: string;
  body: any;
  hung: boolean;
  /** The client library refused to send it (e.g. a header value Node would never put on the wire). */
  unsendable: boolean;
}

/** Sends one request with a fresh caller assertion; a request unanswered after `timeoutMs` is a hang. */
export async function sendFuzzRequest(h: Harness, req: FuzzRequest, timeoutMs: number): Promise<FuzzOutcome> {
  const headers: Record<string, string | string[]> = { ...req.headers };
  if (req.auth && 'as' in req.auth) headers.authorization = (await h.auth(req.auth.as)).authorization;
  else if (req.auth) headers.authorization = req.auth.raw;
  let timer: NodeJS.Timeout | undefined;
  const hang = new Promise<'hang'>((resolve) => {
    timer = setTimeout(() => resolve('hang'), timeoutMs);
  });
  try {
    const res = await Promise.race([h.app.inject({ method: req.method as 'GET', url: req.url, headers, ...(req.payload !== undefined ? { payload: req.payload } : {}) }), hang]);
    if (res === 'hang') return { status: 0, contentType: '', body: null, hung: true, unsendable: false };
    let body: unknown = null;
    try {
      body = JSON.parse(res.body);
    } catch {
      body = res.body;
    }
    return { status: res.statusCode, contentType: String(res.headers['content-type'] ?? ''), body, hung: false, unsendable: false };
  } catch (e) {
    // light-my-request validates like Node's http client: such a request never reaches a server.
    if (e instanceof TypeError && /header|Invalid character|ERR_INVALID/i.test(`${(e as NodeJS.ErrnoException).code ?? ''} ${e.message}`)) {
      return { status: 0, contentType: '', body: null, hung: false, unsendable: true };
    }
    throw e;
  } finally {
    clearTimeout(timer);
  }
}

/** What is wrong with an answer: a 5xx, a hang, an error that is not problem+json with a catalogued code and status. */
export function answerProblems(req: FuzzRequest, out: FuzzOutcome): string[] {
  if (out.hung) return ['hang'];
  if (out.unsendable) return [];
  const problems: string[] = [];
  if (out.status >= 500) problems.push(`5xx (${out.status})`);
  if (out.status >= 400 && req.method !== 'HEAD') {
    if (!/^application\/problem\+json/.test(out.contentType)) problems.push(`error is ${out.contentType || 'no content type'}, not problem+json`);
    const code = out.body?.code as string | undefined;
    const spec = code ? (ERROR_CATALOGUE as Record<string, { status: number }>)[code] : undefined;
    if (!spec) problems.push(`code ${JSON.stringify(code)} is not catalogued`);
    else if (spec.status !== out.status) problems.push(`code ${code} answered ${out.status}, catalogued ${spec.status}`);
  }
  return problems;
}

/** The graph revision and the lease table, cheap enough to read around every request. */
async function quickState(h: Harness): Promise<string> {
  return JSON.stringify({ revision: (await h.ctx.graph.current()).revision, leases: (await listLeases(h.ctx, {})).leases });
}

export interface FuzzReport {
  requests: number;
  sent: number;
  unsendable: number;
  byStatus: Record<string, number>;
  fiveXX: number;
  hangs: number;
  /** Refused requests after which the graph revision or the lease table differed. */
  stateChanges: number;
  /** Answers that are not problem+json with a catalogued code and status. */
  badErrors: number;
  /** REJECTED receipts the gateway recorded for refused writes (by design), and the chain's verdict at the end. */
  rejectedReceipts: number;
  chain: { ok: boolean; entriesAdded: number; expectedAdded: number; otherReceiptsChanged: boolean };
  routesHit: Record<string, number>;
  failures: { request: FuzzRequest; status: number; why: string[] }[];
  ms: number;
}

/**
 * Runs `runs` fuzzed requests from `seed`, one after another, and checks every answer and, around
 * every refused request, the graph revision and the lease table; at the end, that the receipt chain
 * verifies and grew by exactly the REJECTED receipts the refused writes reported.
 */
export async function runFuzz(h: Harness, pools: FuzzPools, options: { seed: number; runs: number; timeoutMs: number; onProgress?: (r: FuzzReport) => void }): Promise<FuzzReport> {
  const started = performance.now();
  const arb = fuzzRequestArbitrary(routesOf(h), pools);
  const chainBefore = await h.ctx.receipts.verifyChain();
  const othersBefore = JSON.stringify(await nonRejected(h));
  const report: FuzzReport = { requests: 0, sent: 0, unsendable: 0, byStatus: {}, fiveXX: 0, hangs: 0, stateChanges: 0, badErrors: 0, rejectedReceipts: 0, chain: { ok: true, entriesAdded: 0, expectedAdded: 0, otherReceiptsChanged: false }, routesHit: {}, failures: [], ms: 0 };
  const BATCH = 500;
  for (let done = 0; done < options.runs; done += BATCH) {
    const batch = fc.sample(arb, { seed: options.seed + done, numRuns: Math.min(BATCH, options.runs - done) });
    for (const req of batch) {
      const before = await quickState(h);
      const out = await sendFuzzRequest(h, req, options.timeoutMs);
      report.requests++;
      if (out.unsendable) {
        report.unsendable++;
        continue;
      }
      report.sent++;
      report.routesHit[req.route] = (report.routesHit[req.route] ?? 0) + 1;
      report.byStatus[out.status] = (report.byStatus[out.status] ?? 0) + 1;
      const why = answerProblems(req, out);
      if (out.hung) report.hangs++;
      if (out.status >= 500) report.fiveXX++;
      if (why.some((w) => !w.startsWith('5xx') && w !== 'hang')) report.badErrors++;
      if (out.status >= 400 || out.hung) {
        if (typeof out.body?.receipt_id === 'string') report.rejectedReceipts++;
        if ((await quickState(h)) !== before) {
          report.stateChanges++;
          why.push('a refused request changed the graph revision or the lease table');
        }
      }
      if (why.length && report.failures.length < 20) report.failures.push({ request: req, status: out.status, why });
    }
    options.onProgress?.(report);
  }
  const chainAfter = await h.ctx.receipts.verifyChain();
  report.chain = {
    ok: chainAfter.ok,
    entriesAdded: chainAfter.entries - chainBefore.entries,
    expectedAdded: report.rejectedReceipts,
    otherReceiptsChanged: JSON.stringify(await nonRejected(h)) !== othersBefore,
  };
  report.ms = performance.now() - started;
  return report;
}

async function nonRejected(h: Harness): Promise<unknown[]> {
  const out: unknown[] = [];
  for (const status of ['PENDING', 'COMPLETED', 'FAILED'] as const) {
    for (let after: number | undefined; ;) {
      const page = await h.ctx.receipts.query({ status, limit: 1000, ...(after === undefined ? {} : { after }) });
      out.push(...page.receipts);
      if (page.next === null) break;
      after = page.next;
    }
  }
  return out;
}

/** Genuine material for the fuzzer to spoil: decisions, one held lease, ids that exist. */
export async function fuzzPools(h: Harness): Promise<FuzzPools> {
  const decisions: string[] = [];
  const decide = async (principal: string, resource: string, fields: string[]) => {
    const r = await h.call(principal, { method: 'POST', url: '/v1/decisions', payload: { action: 'update_post', resource, environment: 'production', fields } });
    if (r.body?.allow) decisions.push(r.body.token as string);
  };
  await decide('seo-agent-7', 'wp:post:1024', ['title']);
  await decide('seo-agent-7', 'wp:post:7', ['title', 'meta_description']);
  await decide('content-agent-3', 'wp:post:1024', ['body']);
  await decide('editor-alice', 'wp:post:9', ['title']);
  const lease = await h.call('editor-alice', { method: 'POST', url: '/v1/leases', payload: { decisions: [decisions.at(-1)], ttl_ms: 300_000 } });
  return {
    principals: ['governance', 'seo-agent-7', 'content-agent-3', 'orchestrator', 'editor-alice', 'publisher', 'seo-control-plane'],
    edges: ['g-orchestrator', 'd-orch-seo', 'no-such-edge'],
    resources: ['wp:post:1024', 'wp:post:7', 'wp:post:1024#title', 'wordpress:article:1024', 'site:example.com:robots', 'incident:x'],
    decisions,
    leases: lease.status === 201 ? [{ lease_id: lease.body.lease_id as string, token: lease.body.token as string }] : [],
    receipts: ['rcpt_unknown'],
    bodyLimit: h.config.bodyLimitBytes,
  };
}
