/**
 * AuthZEN searches (POST /access/v1/search/{subject,resource,action}), answered from the graph with
 * the machinery behind `writ can` (capabilitiesOf: every valid chain of a principal and its final
 * scope) and `writ trace` (explain: the policy's verdict on one request, with no side effects).
 * Who may ask about whom: ask-about.ts.
 */
import { createHash } from 'node:crypto';
import { canonicalJson } from '../audit/canonical-json.js';
import { matchesPattern, validateResourceKey } from '../graph/index.js';
import { PRINCIPAL_KINDS } from '../graph/model.js';
import type { AuthzenAction, AuthzenSearchRequest, AuthzenSearchResponse, AuthzenResource, AuthzenSubject } from '../wire/authzen.js';
import { checkMayAskAbout, liveScopes, mayAskAbout } from './ask-about.js';
import { environmentAndFields, malformed, subjectPrincipal } from './authzen.js';
import { canonicalResource, checkEnvironment, checkFields, checkResourceType } from './resources.js';
import type { WritContext } from './context.js';
import { explain, type DecisionRequestInput, type Explanation } from './decide.js';

const MAX_LIMIT = 1000;
const DEFAULT_LIMIT = 50;

/**
 * One page of `all`. The token is opaque to the PEP: the offset plus a fingerprint of the request, so a
 * token sent with a changed request (another entity, context or limit) is refused, as the
 * specification asks.
 */
function paginate<T>(all: T[], req: AuthzenSearchRequest): AuthzenSearchResponse<T> {
  const limit = req.page?.limit ?? DEFAULT_LIMIT;
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIMIT) throw malformed(`page.limit must be an integer from 1 to ${MAX_LIMIT}`);
  const { page, ...rest } = req;
  const { token: _token, ...pageRest } = page ?? {};
  const fingerprint = createHash('sha256').update(canonicalJson({ ...rest, page: { ...pageRest, limit } })).digest('base64url').slice(0, 16);
  let offset = 0;
  if (page?.token) {
    let parsed: { o?: unknown; f?: unknown };
    try {
      parsed = JSON.parse(Buffer.from(page.token, 'base64url').toString('utf8')) as typeof parsed;
    } catch {
      throw malformed('page.token is not a token this PDP issued');
    }
    if (typeof parsed.o !== 'number' || !Number.isInteger(parsed.o) || parsed.o < 0) throw malformed('page.token is not a token this PDP issued');
    if (parsed.f !== fingerprint) throw malformed('page.token belongs to another request: subject, action, resource, context and page.limit must stay as they were');
    offset = parsed.o;
  }
  const results = all.slice(offset, offset + limit);
  const next = offset + results.length;
  const next_token = next < all.length ? Buffer.from(JSON.stringify({ o: next, f: fingerprint })).toString('base64url') : '';
  return { page: { next_token, count: results.length, total: all.length }, results };
}

async function requireSubject(ctx: WritContext, caller: string, subject: Partial<AuthzenSubject> | undefined, environment?: string): Promise<string> {
  if (!subject || typeof subject.id !== 'string' || typeof subject.type !== 'string') throw malformed('subject.type and subject.id are required');
  await checkMayAskAbout(ctx, caller, subject.id, environment);
  return subjectPrincipal(ctx, { type: subject.type, id: subject.id });
}

function requireAction(action: AuthzenAction | undefined): string {
  if (!action || typeof action.name !== 'string' || action.name === '') throw malformed('action.name is required');
  return action.name;
}

function requireResource(ctx: WritContext, resource: Partial<AuthzenResource> | undefined): string {
  if (!resource || typeof resource.id !== 'string' || typeof resource.type !== 'string') throw malformed('resource.type and resource.id are required');
  return checkResourceType(ctx.policy.data, resource.id, resource.type);
}

/** The question as explain (the policy, no side effects) takes it. */
function question(principal: string, action: string, resource: string, f: { environment?: string; fields?: string[] }, req: AuthzenSearchRequest): DecisionRequestInput & { principal: string } {
  const { approval: _approval, ...context } = req.context ?? {};
  return {
    principal,
    action,
    resource,
    environment: f.environment!,
    ...(f.fields ? { fields: f.fields } : {}),
    context: context as DecisionRequestInput['context'],
    properties: { subject: req.subject?.properties ?? {}, resource: req.resource?.properties ?? {}, action: req.action?.properties ?? {} },
  };
}

/**
 * The question asked for every live principal (of `kind`, when given) that `caller` may ask about
 * (itself; everyone for governance or an auditor), in id order, each with the policy's explanation:
 * `writ who` and POST /access/v1/search/subject.
 */
export async function explainForEach(ctx: WritContext, caller: string, q: DecisionRequestInput, kind?: string): Promise<Explanation[]> {
  // Before the candidates: with none to ask about, a misspelt environment or field would answer "nobody".
  checkEnvironment(ctx.policy.data, q.environment, 'environment');
  checkFields(ctx.policy.data, canonicalResource(ctx.policy.data, q.resource), q.fields ?? [], 'fields');
  const candidates: string[] = [];
  for (const p of (await ctx.graph.current()).principals()) {
    if (p.kind === 'governance' || (kind !== undefined && p.kind !== kind)) continue;
    // Revoked whatever time it was recorded at (a replica whose clock is ahead may have recorded it).
    if (p.revoked_at === null && (await mayAskAbout(ctx, caller, p.id, q.environment))) candidates.push(p.id);
  }
  candidates.sort((a, b) => a.localeCompare(b));
  const out: Explanation[] = [];
  for (const id of candidates) out.push(await explain(ctx, id, { ...q, principal: id }));
  return out;
}

/**
 * POST /access/v1/search/subject: the principals of kind `subject.type` the policy allows to do
 * `action` on `resource` in `resource.properties.environment` — limited to those the caller may ask
 * about (itself; everyone for governance or an auditor).
 */
export async function searchSubjects(ctx: WritContext, caller: string, req: AuthzenSearchRequest): Promise<AuthzenSearchResponse<{ type: string; id: string }>> {
  const kind = req.subject?.type;
  if (typeof kind !== 'string' || !(PRINCIPAL_KINDS as readonly string[]).includes(kind)) throw malformed(`subject.type must be a principal kind (${PRINCIPAL_KINDS.join(', ')})`);
  const action = requireAction(req.action);
  const resource = requireResource(ctx, req.resource);
  const f = environmentAndFields(ctx.policy.data, req.resource?.properties, true);
  if (f.fields) checkFields(ctx.policy.data, resource, f.fields, 'resource.properties.fields');
  const { principal: _p, ...q } = question('', action, resource, f, req);
  const allowed = (await explainForEach(ctx, caller, q, kind)).filter((x) => x.allow).map((x) => ({ type: kind, id: x.principal }));
  return paginate(allowed, req);
}

/**
 * POST /access/v1/search/resource: the resources of type `resource.type` the subject's valid chains
 * give `action` on. Writ's authority is over key patterns, not a list of instances, so a result may be
 * a pattern (`wp:post:*`); `properties.chain` names the chain that gives it. `context.truncated`: the
 * subject may hold more than the chains judged (capabilitiesIn), so the list may be short.
 */
export async function searchResources(ctx: WritContext, caller: string, req: AuthzenSearchRequest): Promise<AuthzenSearchResponse<{ type: string; id: string; properties: { chain: string[] } }>> {
  const f = environmentAndFields(ctx.policy.data, req.resource?.properties, false);
  const type = req.resource?.type;
  if (typeof type !== 'string' || validateResourceKey(type) !== null) throw malformed('resource.type is required: a key prefix such as "wp:post"');
  if (f.fields) checkFields(ctx.policy.data, `${type}:**`, f.fields, 'resource.properties.fields');
  const subject = await requireSubject(ctx, caller, req.subject, f.environment);
  const action = requireAction(req.action);
  const found = new Map<string, string[]>();
  const { scopes, truncated } = await liveScopes(ctx, subject, { action, ...f });
  for (const { scope, chain } of scopes) {
    for (const pattern of scope.resources) {
      const id = keyOfType(pattern, type);
      if (id !== null && !found.has(id)) found.set(id, chain);
    }
  }
  const results = [...found.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([id, chain]) => ({ type, id, properties: { chain } }));
  return { ...paginate(results, req), context: { truncated } };
}

/** The part of `pattern` with type `type` (`wp:post:*` and `wp:post` → `wp:post:*`; `deploy:**` and `deploy:site` → `deploy:site:**`), or null. */
function keyOfType(pattern: string, type: string): string | null {
  const last = pattern.slice(pattern.lastIndexOf(':') + 1);
  const wildcard = last === '*' || last === '**';
  return matchesPattern(pattern, `${type}:${wildcard ? 'x' : last}`) ? `${type}:${last}` : null;
}

/**
 * POST /access/v1/search/action: the catalogue actions the policy allows the subject on the resource
 * in `resource.properties.environment`; candidates come from the subject's valid chains.
 */
export async function searchActions(ctx: WritContext, caller: string, req: AuthzenSearchRequest): Promise<AuthzenSearchResponse<{ name: string }>> {
  const f = environmentAndFields(ctx.policy.data, req.resource?.properties, true);
  const resource = requireResource(ctx, req.resource);
  if (f.fields) checkFields(ctx.policy.data, resource, f.fields, 'resource.properties.fields');
  const subject = await requireSubject(ctx, caller, req.subject, f.environment);
  const catalogue = Object.keys(ctx.policy.data.writ.actions);
  const candidates = new Set<string>();
  const { scopes, truncated } = await liveScopes(ctx, subject, { resource, ...f });
  for (const { scope } of scopes) {
    for (const a of scope.actions.includes('*') ? catalogue : scope.actions) if (catalogue.includes(a)) candidates.add(a);
  }
  const allowed: { name: string }[] = [];
  for (const action of [...candidates].sort()) {
    const verdict = await explain(ctx, subject, question(subject, action, resource, f, req));
    if (verdict.allow) allowed.push({ name: action });
  }
  return { ...paginate(allowed, req), context: { truncated } };
}
