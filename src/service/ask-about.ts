/**
 * Who may ask Writ about whom (AuthZEN evaluations and searches for another subject) and so read what
 * is whose (an edge), and the scope arithmetic the searches share: the final scopes of a principal's
 * valid chains (`writ can`).
 */
import { WritError } from '../errors.js';
import { matchesPattern, patternCovers, type AuthorityGraph } from '../graph/index.js';
import { GOVERNANCE_ID, type Edge, type Scope } from '../graph/model.js';
import { capabilitiesOf } from './audit-queries.js';
import type { WritContext } from './context.js';

/** The catalogue action that lets a principal ask Writ about another principal's authority. */
export const AUDIT_READ = 'audit_read';

/** The key a principal's authority is read under: `audit:principal:<id>`. */
export const auditKey = (principal: string) => `audit:principal:${principal}`;

/**
 * The environment asked about by a read tied to no one environment (a principal, its edges, its
 * capabilities, its receipts, which record none, the graph): `*`, which only a scope whose
 * environments include `*` gives (scopeGives), not one limited to `staging`.
 */
export const EVERY_ENVIRONMENT = '*';

export interface Wanted {
  action?: string;
  resource?: string;
  environment?: string;
  fields?: string[];
}

/** Does a chain's final scope give this (each dimension only when asked)? `*` covers every value, and only `*` gives `*` (EVERY_ENVIRONMENT). */
export function scopeGives(scope: Scope, w: Wanted): boolean {
  const has = (list: string[], v: string) => list.includes('*') || list.includes(v);
  if (w.action !== undefined && !has(scope.actions, w.action)) return false;
  if (w.environment !== undefined && !has(scope.environments, w.environment)) return false;
  if (w.resource !== undefined && !scope.resources.some((p) => matchesPattern(p, w.resource!))) return false;
  if (w.fields !== undefined) {
    if (w.fields.length === 0 ? !scope.fields.includes('*') : !w.fields.every((f) => has(scope.fields, f))) return false;
  }
  return true;
}

/**
 * The final scopes of `principal`'s valid chains now that give `wanted` (every one when nothing is
 * wanted); `truncated` when there may be more (capabilitiesIn). Chains that cannot give `wanted` are
 * pruned while resolving, so they cannot crowd out one that does.
 */
export async function liveScopes(ctx: WritContext, principal: string, wanted: Wanted | ((scope: Scope) => boolean) = {}): Promise<{ scopes: { scope: Scope; chain: string[] }[]; truncated: boolean }> {
  const gives = typeof wanted === 'function' ? wanted : (scope: Scope) => scopeGives(scope, wanted);
  const { capabilities, truncated } = await capabilitiesOf(ctx, principal, undefined, { gives });
  return { scopes: capabilities.filter((c) => c.valid).map((c) => ({ scope: c.scope, chain: c.chain.map((e) => e.id) })), truncated };
}

/**
 * A caller may ask about itself; governance about anyone; anyone else about `subject` only through a
 * valid chain whose scope gives action `audit_read` on `audit:principal:<subject>` in `environment`:
 * the one a question names (an AuthZEN evaluation), or, when it names none (a read of a principal, its
 * edges or receipts; a search that spans every environment), EVERY_ENVIRONMENT. An auditor's scope
 * (auditsEveryone) gives every subject, also one whose id has a `:`, which `audit:principal:*` does not
 * match segment by segment — as whomMayAsk answers.
 */
export async function mayAskAbout(ctx: WritContext, caller: string, subject: string, environment: string = EVERY_ENVIRONMENT): Promise<boolean> {
  if (caller === subject || caller === GOVERNANCE_ID) return true;
  // Pruned while resolving on this test (monotone: a scope wider than one that passes passes too).
  const asks = (scope: Scope) => scopeGives(scope, { action: AUDIT_READ, environment }) && (auditsEveryone(scope) || scopeGives(scope, { resource: auditKey(subject) }));
  return (await liveScopes(ctx, caller, asks)).scopes.length > 0;
}

/** mayAskAbout, or FORBIDDEN saying what would make it allowed. */
export async function checkMayAskAbout(ctx: WritContext, caller: string, subject: string, environment: string = EVERY_ENVIRONMENT): Promise<void> {
  if (!(await mayAskAbout(ctx, caller, subject, environment))) {
    const where = environment === EVERY_ENVIRONMENT ? 'in every environment' : `in ${environment}`;
    throw new WritError('FORBIDDEN', `${caller} may not ask about ${subject} ${where}: only governance, or a principal whose authority covers action ${AUDIT_READ} on ${auditKey(subject)} ${where}, may ask about another subject`);
  }
}

/** Whether the caller may ask about `subject` in every environment (mayAskAbout), answered without awaiting: see whomMayAsk. */
export type AsksAbout = (subject: string) => boolean;

/** Whether an audit_read scope makes its holder an auditor: its resources cover `audit:principal:*` (isAuditor). */
export function auditsEveryone(scope: Scope): boolean {
  return scope.resources.some((r) => patternCovers(r, auditKey('*')));
}

/**
 * mayAskAbout in every environment, for any subject, as a test that awaits nothing: the caller's
 * audit_read scopes are read once, here. For the checks made where nothing may be awaited — a graph
 * change's plan, an impact analysis on the live graph — and for reads that must do the same work
 * whatever they find (the scopes are read before anything is looked up). An auditor (auditsEveryone)
 * asks about everything, as it reads everything: also an edge whose `to` no audit:principal:* matches
 * segment by segment (an ownership's managed state, a preemption's class, a principal id with a `:`).
 */
export async function whomMayAsk(ctx: WritContext, caller: string): Promise<AsksAbout> {
  if (caller === GOVERNANCE_ID) return () => true;
  const { scopes } = await liveScopes(ctx, caller, { action: AUDIT_READ, environment: EVERY_ENVIRONMENT });
  if (scopes.some(({ scope }) => auditsEveryone(scope))) return () => true;
  return (subject) => subject === caller || scopes.some(({ scope }) => scopeGives(scope, { action: AUDIT_READ, resource: auditKey(subject) }));
}

/**
 * Whether `caller` may read `edge`: one it made (creator), gives (from) or holds (to), and the same of
 * each principal its audit_read covers in every environment — one from or into such a principal, as
 * that principal's expiring edges and orphans list them; an auditor or governance, every edge. Every
 * answer that tells of an edge goes by this rule (readableEdge).
 */
export function mayReadEdge(caller: string, edge: Pick<Edge, 'creator' | 'from' | 'to'>, asks: AsksAbout): boolean {
  return caller === edge.creator || asks(edge.from) || asks(edge.to);
}

/**
 * Edge `id` of `graph` if `caller` may read it (mayReadEdge); undefined for one it may not read, as for
 * an id no edge has. GET /v1/edges/:id, its revocation, the impact analysis and a new edge's id all look
 * edges up through this, so that no write tells what a read hides.
 */
export function readableEdge(graph: AuthorityGraph, caller: string, id: string, asks: AsksAbout): Edge | undefined {
  const edge = graph.edge(id);
  return edge !== undefined && mayReadEdge(caller, edge, asks) ? edge : undefined;
}

/** UNKNOWN_EDGE: no edge `id`, or none the caller may read (the same answer). */
export function unknownEdge(id: string): WritError {
  return new WritError('UNKNOWN_EDGE', `no edge "${id}"`);
}
