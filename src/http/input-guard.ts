import { isUtf8 } from 'node:buffer';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { WritError } from '../errors.js';

/**
 * The edge's checks on what a request carries, before any route sees it:
 * - a JSON body must be UTF-8 (a `charset` parameter naming anything else is 415; bytes that are not
 *   UTF-8 are 400, not decoded to U+FFFD), must not nest
 *   deeper than `maxDepth` (counted on the raw text, before parsing), and is parsed by fastify's own
 *   parser (prototype-poisoning keys refused);
 * - every string of the body, the query, the path parameters and the headers must be well-formed
 *   Unicode: a lone UTF-16 surrogate (`"\ud800"`) is refused here, since the policy engine, the
 *   store and the hash chain all expect strings that encode to UTF-8 and back unchanged;
 * - no string may hold U+0000 (NUL): PostgreSQL's text cannot store it, and a request must be
 *   taken, or refused, the same way whichever engine is behind the service.
 */
export function guardInput(app: FastifyInstance, options: { maxDepth: number; bodyLimit: number }): void {
  const parseJson = app.getDefaultJsonParser('error', 'error');
  // JSON only: fastify's text/plain parser would hand a string to routes that expect an object.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'buffer', bodyLimit: options.bodyLimit }, (request, body, done) => {
    const charset = charsetOf(request.headers['content-type']);
    if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8') {
      done(new WritError('UNSUPPORTED_MEDIA_TYPE', `a JSON body must be UTF-8, not charset=${charset}`), undefined);
      return;
    }
    // Decoded as text, a byte that is not UTF-8 became U+FFFD and was taken (a Latin-1 "café" was
    // stored as "caf\ufffd", and would have gone upstream so): refused instead.
    const bytes = body as Buffer;
    if (!isUtf8(bytes)) {
      done(new WritError('MALFORMED_REQUEST', 'the body is not valid UTF-8 (a JSON body must be UTF-8)'), undefined);
      return;
    }
    const text = bytes.toString('utf8');
    const depth = jsonDepthExceeds(text, options.maxDepth);
    if (depth) {
      done(new WritError('NESTING_TOO_DEEP', `the body nests objects and arrays more than ${options.maxDepth} deep`, { max_depth: options.maxDepth }), undefined);
      return;
    }
    parseJson(request, text, (error, parsed) => {
      if (error) return done(poisoned(error, text) ?? error, undefined);
      try {
        assertWellFormedJson(text, parsed, 'body');
      } catch (e) {
        return done(e as WritError, undefined);
      }
      done(null, parsed);
    });
  });
  // A body is checked where it is parsed (above): every body comes from that parser.
  // Callback-style: it runs on every request, and an async hook costs a promise and a microtask.
  app.addHook('preValidation', (request, _reply, next) => {
    try {
      assertWellFormedRequest(request);
    } catch (e) {
      return next(e as Error);
    }
    next();
  });
}

/**
 * fastify's parser refuses a `__proto__` key (or `constructor.prototype`) with "Body is not valid JSON",
 * which it is: say what was refused instead (only on that error's path, so the text is parsed twice then).
 */
function poisoned(error: Error, text: string): WritError | null {
  if ((error as { code?: string }).code !== 'FST_ERR_CTP_INVALID_JSON_BODY') return null;
  try {
    JSON.parse(text);
  } catch {
    return null;
  }
  return new WritError('MALFORMED_REQUEST', 'the body holds a "__proto__" key, or "constructor" with "prototype" in it, which Writ refuses');
}

function assertWellFormedRequest(request: FastifyRequest): void {
  assertWellFormed(request.headers, 'headers');
  assertWellFormed(request.params, 'params');
  assertWellFormed(request.query, 'querystring');
}

/** Throws MALFORMED_REQUEST naming the first string (value or key) that is not well-formed UTF-16 or holds a NUL. */
export function assertWellFormed(value: unknown, where: string): void {
  const bad = firstIllFormed(value);
  if (bad === null) return;
  const what = bad.nul ? 'contains U+0000 (NUL), which Writ does not accept in any string' : 'contains a lone UTF-16 surrogate (not well-formed Unicode)';
  throw new WritError('MALFORMED_REQUEST', `${where}${bad.path}: ${what}`);
}

// With the u flag a surrogate pair is one code point, so only an unpaired half matches.
const REFUSED = /[\uD800-\uDFFF]|\u0000/u;

/**
 * Whether every string (value or key) JSON.parse makes of `text` is well-formed and NUL-free, judged on
 * the text alone (~1 µs for a 1 KB message, against ~2 µs to walk what it parses to): true when the text
 * has no `\u` escape and no lone surrogate or NUL of its own. Every other character of a parsed string
 * is a character of the text or one of the escapes \" \\ \/ \b \f \n \r \t. False means only "walk the
 * parsed value" (`assertWellFormed`): an escaped backslash before a `u` is taken for an escape too.
 */
export function jsonTextWellFormed(text: string): boolean {
  return !text.includes('\\u') && !REFUSED.test(text);
}

/** `assertWellFormed` for a value JSON.parse made of `text`, skipped when the text alone vouches for it. */
export function assertWellFormedJson(text: string, parsed: unknown, where: string): void {
  if (!jsonTextWellFormed(text)) assertWellFormed(parsed, where);
}

interface IllFormed {
  /** Below the value it was found in; built only on the way back from a find. */
  path: string;
  nul: boolean;
}

function illFormed(s: string): IllFormed | null {
  const m = REFUSED.exec(s);
  return m === null ? null : { path: '', nul: m[0] === '\u0000' };
}

const below = (segment: string, bad: IllFormed): IllFormed => ({ path: `/${segment}${bad.path}`, nul: bad.nul });

// The body's depth is bounded before this runs (the parser), the query, params and headers are flat.
function firstIllFormed(value: unknown): IllFormed | null {
  if (typeof value === 'string') return illFormed(value);
  if (value === null || typeof value !== 'object') return null;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const bad = firstIllFormed(value[i]);
      if (bad !== null) return below(String(i), bad);
    }
    return null;
  }
  for (const [key, v] of Object.entries(value)) {
    const badKey = illFormed(key);
    if (badKey !== null) return below(JSON.stringify(key).slice(1, -1), badKey);
    const bad = firstIllFormed(v);
    if (bad !== null) return below(key, bad);
  }
  return null;
}

/** The `charset` parameter of a Content-Type, lower-cased and unquoted; undefined when there is none. */
function charsetOf(contentType: string | undefined): string | undefined {
  // No parameter at all (`application/json`, as nearly every client sends it): nothing to split.
  if (!contentType || !contentType.includes(';')) return undefined;
  for (const param of contentType.split(';').slice(1)) {
    const eq = param.indexOf('=');
    if (eq < 0) continue;
    if (param.slice(0, eq).trim().toLowerCase() !== 'charset') continue;
    return param.slice(eq + 1).trim().replace(/^"(.*)"$/, '$1').toLowerCase();
  }
  return undefined;
}

/**
 * Whether JSON text nests objects/arrays deeper than `max` (the top-level container is depth 1).
 * A scan of the raw text, so a hostile body costs one pass and no recursion anywhere; brackets
 * inside strings do not count. Malformed text is left for the parser to refuse.
 */
export function jsonDepthExceeds(text: string, max: number): boolean {
  if (openingBracketsAtMost(text, max)) return false;
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c /* \ */) i++;
      else if (c === 0x22 /* " */) inString = false;
    } else if (c === 0x22) {
      inString = true;
    } else if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      if (++depth > max) return true;
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      depth--;
    }
  }
  return false;
}

/**
 * Whether the text holds at most `max` opening brackets, those inside strings included: then nothing
 * in it can nest deeper than `max`. Native `indexOf` calls (~0.1 µs for a 1 KB message, against ~5 µs
 * for the scan above); stops at the first bracket past `max`.
 */
function openingBracketsAtMost(text: string, max: number): boolean {
  let n = 0;
  for (const bracket of ['{', '[']) {
    for (let i = text.indexOf(bracket); i !== -1; i = text.indexOf(bracket, i + 1)) if (++n > max) return false;
  }
  return true;
}
