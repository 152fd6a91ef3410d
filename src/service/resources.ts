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
