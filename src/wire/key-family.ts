/**
 * Coordination keys form families, one definition for the lease stores, the gateway and the upstreams
 * (no server imports). A key `R#f` (a field of the resource R: everything after the first `#`) is a
 * child of its root `R`; a key without `#` is a root (a resource key never holds `#`: validateResourceKey).
 *
 * - A root and any of its children conflict: a whole-resource write and a field write of one resource
 *   are never leased to two holders at once. Siblings (`R#title`, `R#body`) do not conflict.
 * - A family has one epoch counter: each grant of any of its keys gets an epoch above every earlier grant
 *   in the family. So a fence that checks a field write against its field's and its root's highest epoch,
 *   and a whole write against its root's and every field's, stops a late write of a lease that ended.
 */
export function keyRoot(key: string): string {
  const i = key.indexOf('#');
  return i < 0 ? key : key.slice(0, i);
}

/** Whether leases on `a` and `b` conflict: one key, or a root and one of its children. */
export function keysConflict(a: string, b: string): boolean {
  return a === b || keyRoot(a) === b || keyRoot(b) === a;
}

/**
 * The prefix of a conflict domain's coordination key (`domain:NAME:SCOPE`, coordinationKeys). Reserved:
 * a resource key spelt so would be that domain's key, sharing its lease, its family and its fence
 * (validateResourceKey refuses it).
 */
export const CONFLICT_DOMAIN_PREFIX = 'domain:';
