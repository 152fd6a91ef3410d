/**
 * Who may ask Writ about whom (AuthZEN evaluations and searches for another subject), and the scope
 * arithmetic the searches share: the final scopes of a principal's valid chains (`writ can`).
 */
import { WritError } from '../errors.js';
import { matchesPattern } from '../graph/index.js';
import { GOVERNANCE_ID, type Scope } from '../graph/model.js';
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
export async function liveScopes(ctx: WritContext, principal: string, wanted: Wanted = {}): Promise<{ scopes: { scope: Scope; chain: string[] }[]; truncated: boolean }> {
  const { capabilities, truncated } = await capabilitiesOf(ctx, principal, undefined, { gives: (scope) => scopeGives(scope, wanted) });
  return { scopes: capabilities.filter((c) => c.valid).map((c) => ({ scope: c.scope, chain: c.chain.map((e) => e.id) })), truncated };
}

/**
 * A caller may ask about itself; governance about anyone; anyone else about `subject` only through a
 * valid chain whose scope gives action `audit_read` on `audit:principal:<subject>` in `environment`:
 * the one a question names (an AuthZEN evaluation), or, when it names none (a read of a principal, its
 * edges or receipts; a search that spans every environment), EVERY_ENVIRONMENT.
 */
export async function mayAskAbout(ctx: WritContext, caller: string, subject: string, environment: string = EVERY_ENVIRONMENT): Promise<boolean> {
  if (caller === subject || caller === GOVERNANCE_ID) return true;
  return (await liveScopes(ctx, caller, { action: AUDIT_READ, resource: auditKey(subject), environment })).scopes.length > 0;
}

/** mayAskAbout, or FORBIDDEN saying what would make it allowed. */
export async function checkMayAskAbout(ctx: WritContext, caller: string, subject: string, environment: string = EVERY_ENVIRONMENT): Promise<void> {
  if (!(await mayAskAbout(ctx, caller, subject, environment))) {
    const where = environment === EVERY_ENVIRONMENT ? 'in every environment' : `in ${environment}`;
    throw new WritError('FORBIDDEN', `${caller} may not ask about ${subject} ${where}: only governance, or a principal whose authority covers action ${AUDIT_READ} on ${auditKey(subject)} ${where}, may ask about another subject`);
  }
}
