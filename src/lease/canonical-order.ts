import { WritError } from '../errors.js';

export const MAX_KEYS_PER_LEASE = 64;
/** The longest coordination key (in UTF-16 code units). */
export const MAX_KEY_LENGTH = 512;

/**
 * The global canonical order in which keys are taken: plain JavaScript string order (UTF-16 code
 * units) of the canonical keys, duplicates removed. Every acquisition in every process uses the same
 * order, so multi-key acquisitions cannot wait on each other in a cycle. (With SQLite the whole
 * acquisition is one BEGIN IMMEDIATE transaction anyway; the order matters for row-locking backends.)
 */
export function canonicalKeyOrder(resources: unknown): string[] {
  if (!Array.isArray(resources) || resources.length === 0) {
    throw new WritError('UNPROCESSABLE', 'resources must be a non-empty list of coordination keys');
  }
  for (const r of resources) {
    if (typeof r !== 'string' || r.length === 0 || r.length > MAX_KEY_LENGTH || /\s/.test(r)) {
      throw new WritError('UNPROCESSABLE', `not a coordination key: ${JSON.stringify(r)}`);
    }
  }
  const keys = [...new Set(resources as string[])].sort();
  if (keys.length > MAX_KEYS_PER_LEASE) {
    throw new WritError('UNPROCESSABLE', `a lease covers at most ${MAX_KEYS_PER_LEASE} keys, got ${keys.length}`);
  }
  return keys;
}
