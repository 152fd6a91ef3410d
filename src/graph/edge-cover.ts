import { patternCovers } from './patterns.js';
import type { Scope } from './model.js';
import type { PolicyEdge } from './policy-view.js';

const EVERY = '*';

/**
 * Whether a valid chain ending in `wide` gives everything a valid chain ending in `narrow` gives: the
 * narrowing rules of the policy (policies/writ/authz/lib/scope.rego, narrowing_violations) read as
 * "no wider on any dimension" — actions, resources, environments, fields, risk, time window, and the
 * delegation depth left (equal depth allowed: this compares two holdings, not a parent and a child).
 * Constraints other than risk_max must be equal, as this code cannot know how a policy reads them.
 * A valid chain's last edge is its narrowest (every edge is within its parent), so it stands for the chain.
 */
export function edgeCovers(wide: PolicyEdge, narrow: PolicyEdge): boolean {
  return (
    scopeCovers(wide.scope, narrow.scope) &&
    sameOtherConstraints(wide.scope.constraints, narrow.scope.constraints) &&
    (wide.not_before === null || (narrow.not_before !== null && narrow.not_before >= wide.not_before)) &&
    (wide.expires_at === null || (narrow.expires_at !== null && narrow.expires_at <= wide.expires_at)) &&
    (wide.max_depth ?? 0) >= (narrow.max_depth ?? 0)
  );
}

/**
 * Whether `child` may follow `parent` on a chain: exactly the policy's narrowing rules (scope.rego,
 * narrowing_violations is empty) — every scope dimension, the time window, and the depth (a parent
 * whose depth, null read as 0, is at least 1, and a child that keeps at most the parent's less one).
 * Decide-mode resolution prunes with it: a pair that fails it is on no valid chain, however many such
 * paths there are. test/policy/narrowing-agrees.test.ts checks it against the Rego on generated pairs.
 */
export function narrowsTo(
  parent: Pick<PolicyEdge, 'scope' | 'not_before' | 'expires_at' | 'max_depth'>,
  child: Pick<PolicyEdge, 'scope' | 'not_before' | 'expires_at' | 'max_depth'>,
): boolean {
  const left = (parent.max_depth ?? 0) - 1;
  return (
    left >= 0 &&
    (child.max_depth ?? 0) <= left &&
    scopeCovers(parent.scope, child.scope) &&
    (parent.not_before === null || (child.not_before !== null && child.not_before >= parent.not_before)) &&
    (parent.expires_at === null || (child.expires_at !== null && child.expires_at <= parent.expires_at))
  );
}

/**
 * `narrow` is within `wide` on actions, resources, environments, fields and risk (the scope dimensions
 * of the policy's narrowing rules). Monotone along a valid chain: an edge whose scope does not cover a
 * scope cannot be on a valid chain whose final scope does.
 */
export function scopeCovers(wide: Scope, narrow: Scope): boolean {
  return (
    valuesCover(wide.actions, narrow.actions) &&
    valuesCover(wide.environments, narrow.environments) &&
    valuesCover(wide.fields, narrow.fields) &&
    narrow.resources.every((c) => wide.resources.some((p) => patternCovers(p, c))) &&
    riskMax(wide.constraints) >= riskMax(narrow.constraints)
  );
}

/** `*` covers every value; a narrow `*` only a wide `*`. */
function valuesCover(wide: readonly string[], narrow: readonly string[]): boolean {
  return wide.includes(EVERY) || narrow.every((v) => v !== EVERY && wide.includes(v));
}

/** A scope's `risk_max`; none reads as 0, as the policy reads it (lib/scope.rego `risk_max`). */
export function riskMax(constraints: Record<string, unknown>): number {
  const r = constraints['risk_max'];
  return typeof r === 'number' ? r : 0;
}

function sameOtherConstraints(a: Record<string, unknown>, b: Record<string, unknown>): boolean {
  const rest = (c: Record<string, unknown>) => JSON.stringify(Object.entries(c).filter(([k]) => k !== 'risk_max').sort(([x], [y]) => (x < y ? -1 : 1)));
  return rest(a) === rest(b);
}
