/**
 * The `Writ-Fencing-Epoch` header, one definition for the SDK, the gateway and the upstreams (no
 * server imports): a bare integer, or `key=epoch` pairs separated by commas.
 */

/** The key a bare-integer `Writ-Fencing-Epoch` fences: the post as a whole (the legacy form). */
export const WHOLE_POST_KEY = '*';

/** Fencing epochs per coordination key, e.g. `{ 'wp:post:1024#title': 5, 'domain:SEO_METADATA': 3 }`. */
export type FencingEpochs = Record<string, number>;

const EPOCH = /^\d{1,15}$/;
// Canonical coordination keys hold no spaces; refusing them catches `a=1; b=2` misread as one key.
const KEY = /^[^\s,;]{1,500}$/;

/**
 * The characters that separate pairs in this header (and that it refuses in a key). A coordination key
 * holding one could not be sent as itself: `R#x=1,R` would reach an upstream as two keys, R#x and R. So
 * resource keys and field names never hold them (validateResourceKey, checkFieldSpelling).
 */
export const FENCING_SEPARATORS = /[,;]/;

/**
 * Parses `Writ-Fencing-Epoch`: a bare integer (key `*`) or comma-separated `key=epoch` pairs. Keys may
 * contain ':' and '#' (and even '='), so each pair splits on its last '='. Null when malformed: an empty
 * part, a key that is empty or holds whitespace or ';', an epoch that is not a non-negative integer, or
 * a key given twice.
 */
export function parseFencingEpochs(raw: string): FencingEpochs | null {
  const trimmed = raw.trim();
  if (EPOCH.test(trimmed)) return { [WHOLE_POST_KEY]: Number(trimmed) };
  const epochs = new Map<string, number>();
  for (const part of trimmed.split(',')) {
    const i = part.lastIndexOf('=');
    if (i < 0) return null;
    const key = part.slice(0, i).trim();
    const epoch = part.slice(i + 1).trim();
    if (!KEY.test(key) || !EPOCH.test(epoch) || epochs.has(key)) return null;
    epochs.set(key, Number(epoch));
  }
  // fromEntries defines own properties, so a key like `__proto__` stays a key.
  return Object.fromEntries(epochs);
}

/** The header value for these epochs: `key=epoch` pairs sorted by key. */
export function formatFencingEpochs(epochs: FencingEpochs): string {
  return Object.keys(epochs)
    .sort()
    .map((key) => `${key}=${epochs[key]}`)
    .join(', ');
}

/** The highest of these epochs, or null when there are none. */
export function highestEpoch(epochs: FencingEpochs | null): number | null {
  const values = Object.values(epochs ?? {});
  return values.length === 0 ? null : Math.max(...values);
}
