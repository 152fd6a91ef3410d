import { WritError } from '../errors.js';
import { matchesPattern, validateResourceKey } from '../graph/index.js';
import type { PolicyData } from '../policy/types.js';

/**
 * The coordination registry's key rules: aliases are rewritten to canonical keys (agents never invent
 * keys), and a key must belong to a declared resource class, else it is unknown.
 */
export function canonicalResource(data: PolicyData, key: string): string {
  let canonical = key;
  for (const alias of data.writ.aliases ?? []) {
    if (key === alias.from || key.startsWith(`${alias.from}:`)) {
      canonical = alias.to + key.slice(alias.from.length);
      break;
    }
  }
  const problem = validateResourceKey(canonical);
  if (problem) throw new WritError('UNPROCESSABLE', `resource: ${problem}`);
  if (!data.writ.resource_classes.some((rule) => matchesPattern(rule.pattern, canonical))) {
    throw new WritError('UNKNOWN_RESOURCE', `"${key}" is not a registered coordination key (no resource class matches it)`);
  }
  return canonical;
}

/** The type of a key: every segment but the last (`wp:post:1024` → `wp:post`; a one-segment key is its own type). */
export function resourceTypeOf(key: string): string {
  const i = key.lastIndexOf(':');
  return i < 0 ? key : key.slice(0, i);
}

/**
 * The canonical key of `key` (see canonicalResource), checking that `type` is the type of the key as
 * given or of its canonical key (`wordpress:article` or `wp:post` for `wordpress:article:1024`).
 */
export function checkResourceType(data: PolicyData, key: string, type: string): string {
  const canonical = canonicalResource(data, key);
  if (type !== resourceTypeOf(key) && type !== resourceTypeOf(canonical)) {
    throw new WritError('MALFORMED_REQUEST', `resource.type "${type}" is not the type of ${key} (expected "${resourceTypeOf(canonical)}")`);
  }
  return canonical;
}
