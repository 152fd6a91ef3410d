import { FENCING_SEPARATORS } from '../wire/fencing-header.js';
import { CONFLICT_DOMAIN_PREFIX } from '../wire/key-family.js';

/**
 * Resource patterns: canonical keys split on `:`. A segment is a literal, `*` (exactly one segment)
 * or, as the last segment only, `**` (zero or more segments). Keys are patterns without wildcards.
 * Patterns are compiled once (split segments cached), because chain resolution matches them on
 * every edge it visits.
 */

export type PatternSegments = readonly string[];

const SEPARATOR = ':';
const ONE = '*';
const ANY = '**';
const WHITESPACE = /\s/;
const CACHE_LIMIT = 100_000;

const cache = new Map<string, PatternSegments>();

/** The segments of a pattern (or key), cached. Does not validate. */
export function compilePattern(pattern: string): PatternSegments {
  let segments = cache.get(pattern);
  if (segments === undefined) {
    // A crude bound: patterns come from the graph, so the cache only outgrows this under abuse.
    if (cache.size >= CACHE_LIMIT) cache.clear();
    segments = Object.freeze(pattern.split(SEPARATOR));
    cache.set(pattern, segments);
  }
  return segments;
}

/** The longest text a refusal repeats: input is bounded by the schemas, but not everywhere by much. */
export const ECHO_LIMIT = 200;

/**
 * Error text, or null when `text` is in Unicode NFC. Names, keys and patterns are compared as strings,
 * so the NFD spelling of a name (`cafe\u0301`) would be a second name beside its NFC one (`caf\u00e9`):
 * two coordination keys for one resource, or a pattern that matches no key. They are refused rather
 * than normalised: the key a caller sent is the one the upstream and the receipts see, and a key Writ
 * rewrote would be a second spelling in the audit trail. `what` names the text (`resource key`).
 */
export function nfcProblem(text: string, what: string): string | null {
  const nfc = text.normalize('NFC');
  if (nfc === text) return null;
  // Both spellings print alike: the escaped form shows what to send. Long input is not repeated.
  return nfc.length <= ECHO_LIMIT
    ? `${what} is not in Unicode NFC; send ${JSON.stringify(nfc)} (${escapeNonAscii(nfc)})`
    : `${what} is not in Unicode NFC; send its NFC form (String.prototype.normalize('NFC'); it is not repeated here, being ${nfc.length} characters long)`;
}

/** `text` as a JSON string with every character outside ASCII as a \u escape: NFC and NFD differ visibly. */
function escapeNonAscii(text: string): string {
  return JSON.stringify(text).replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** Error text, or null when `pattern` is a valid resource pattern. */
export function validatePattern(pattern: string): string | null {
  if (typeof pattern !== 'string' || pattern.length === 0) return 'resource pattern is empty';
  const nfc = nfcProblem(pattern, 'resource pattern');
  if (nfc) return nfc;
  if (WHITESPACE.test(pattern)) return `resource pattern "${pattern}" contains whitespace`;
  // Keys so spelt are refused (they could not be sent in Writ-Fencing-Epoch), so such a pattern would match none.
  if (FENCING_SEPARATORS.test(pattern)) return `resource pattern "${pattern}" contains "," or ";", which separate coordination keys in Writ-Fencing-Epoch`;
  const segments = pattern.split(SEPARATOR);
  for (let i = 0; i < segments.length; i++) {
    const s = segments[i]!;
    if (s.length === 0) return `resource pattern "${pattern}" has an empty segment`;
    if (s === ANY) {
      if (i !== segments.length - 1) return `resource pattern "${pattern}": "**" may only be the last segment`;
    } else if (s !== ONE && s.includes('*')) {
      return `resource pattern "${pattern}": "*" must be a whole segment ("*" or a final "**")`;
    }
  }
  return null;
}

/** Error text, or null when `key` is a valid canonical resource key (a pattern without wildcards). */
export function validateResourceKey(key: string): string | null {
  if (typeof key !== 'string' || key.length === 0) return 'resource key is empty';
  if (key.includes('*')) return `resource key "${key}" contains a wildcard`;
  // `#` joins a resource and a field in a coordination key (wp:post:1 and title: wp:post:1#title); a
  // resource named with one would share that field's lease key, and its fence.
  if (key.includes('#')) return `resource key "${key}" contains "#", which joins a resource and a field in coordination keys (name fields in \`fields\`)`;
  // A conflict domain's coordination key is domain:NAME:SCOPE: a resource named so would hold that domain's lease.
  if (key.startsWith(CONFLICT_DOMAIN_PREFIX)) return `resource key "${key}" begins with "${CONFLICT_DOMAIN_PREFIX}", which names the coordination keys of conflict domains (domain:NAME:SCOPE); a resource key cannot be one`;
  const problem = validatePattern(key);
  return problem === null ? null : problem.replace('resource pattern', 'resource key');
}

/** Whether a compiled pattern matches a compiled key. */
export function matchesSegments(pattern: PatternSegments, key: PatternSegments): boolean {
  const n = pattern.length;
  for (let i = 0; i < n; i++) {
    const p = pattern[i]!;
    if (p === ANY) return true;
    if (i >= key.length) return false;
    if (p !== ONE && p !== key[i]) return false;
  }
  return n === key.length;
}

/** Whether the resource key `key` is matched by `pattern`. */
export function matchesPattern(pattern: string, key: string): boolean {
  return matchesSegments(compilePattern(pattern), compilePattern(key));
}

/** Whether every key `child` matches is also matched by `parent` (child ⊆ parent), segment by segment. */
export function patternCovers(parent: string, child: string): boolean {
  const p = compilePattern(parent);
  const c = compilePattern(child);
  for (let i = 0; i < p.length; i++) {
    const ps = p[i]!;
    if (ps === ANY) return true;
    if (i >= c.length) return false;
    const cs = c[i]!;
    // The child's `**` stands for any number of segments; only a parent `**` covers that.
    if (cs === ANY) return false;
    if (ps === ONE) continue;
    if (cs !== ps) return false;
  }
  return p.length === c.length;
}

/** Whether some key is matched by both `a` and `b` (a `**` takes any rest, also none). */
export function patternsOverlap(a: string, b: string): boolean {
  const x = compilePattern(a);
  const y = compilePattern(b);
  for (let i = 0; ; i++) {
    if (x[i] === ANY || y[i] === ANY) return true;
    if (i === x.length || i === y.length) return x.length === y.length;
    if (x[i] !== ONE && y[i] !== ONE && x[i] !== y[i]) return false;
  }
}

/**
 * A number that orders patterns from general to specific (higher is more specific): more literal
 * segments first, then a later first wildcard, then a fixed length (no `**`), then more segments.
 * Equal numbers are equally specific; callers break ties deterministically (e.g. by the pattern text).
 */
export function specificity(pattern: string): number {
  const segments = compilePattern(pattern);
  let literals = 0;
  let firstWildcard = segments.length;
  let open = false;
  for (let i = 0; i < segments.length; i++) {
    const s = segments[i]!;
    if (s === ONE || s === ANY) {
      if (firstWildcard === segments.length) firstWildcard = i;
      if (s === ANY) open = true;
    } else {
      literals++;
    }
  }
  const seg = Math.min(segments.length, 99);
  return Math.min(literals, 99) * 1_000_000 + Math.min(firstWildcard, 99) * 10_000 + (open ? 0 : 1) * 1000 + seg;
}
