/**
 * The rule for times on the wire (README, "Times on the wire"): a member whose name says it is an
 * instant holds an RFC 3339 UTC string with millisecond precision, or null; durations are `*_ms`.
 */

/** Names that say "an instant": `*_at`, `at`, `not_before`, `*_time`, `timestamp`, `deadline`, and the camelCase `*At` / `*Time`. */
const INSTANT_NAME = /(?:^|_)(?:at|time|timestamp|deadline)$|^not_(?:before|after)$|[a-z](?:At|Time)$/;
/** Names that say "a duration" (never an instant, whatever else they end with). */
const DURATION_NAME = /_ms$|Seconds$/;
/** What `new Date(ms).toISOString()` writes. */
export const WIRE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

export function isInstantName(name: string): boolean {
  return INSTANT_NAME.test(name) && !DURATION_NAME.test(name);
}

/** Every member of a JSON value whose name says it is an instant and whose value is not an RFC 3339 string or null, as `path = value`. */
export function misplacedTimes(value: unknown, path = '$'): string[] {
  if (Array.isArray(value)) return value.flatMap((v, i) => misplacedTimes(v, `${path}[${i}]`));
  if (value === null || typeof value !== 'object') return [];
  const out: string[] = [];
  for (const [name, v] of Object.entries(value)) {
    const here = `${path}.${name}`;
    if (isInstantName(name) && v !== null && !(typeof v === 'string' && WIRE_TIME.test(v))) out.push(`${here} = ${JSON.stringify(v)}`);
    out.push(...misplacedTimes(v, here));
  }
  return out;
}

/**
 * Every property of a JSON schema (an OpenAPI document's components and routes) whose name says it is
 * an instant and which does not declare an RFC 3339 string (`format: date-time`), as a path.
 */
export function misdeclaredTimes(schema: unknown, path = '#'): string[] {
  if (Array.isArray(schema)) return schema.flatMap((s, i) => misdeclaredTimes(s, `${path}/${i}`));
  if (schema === null || typeof schema !== 'object') return [];
  const out: string[] = [];
  for (const [key, sub] of Object.entries(schema as Record<string, unknown>)) {
    if (key === 'properties' && sub !== null && typeof sub === 'object') {
      for (const [name, prop] of Object.entries(sub as Record<string, unknown>)) {
        const p = prop as { type?: unknown; format?: unknown; $ref?: unknown };
        const types = Array.isArray(p.type) ? p.type : [p.type];
        if (isInstantName(name) && !(p.format === 'date-time' && types.includes('string') && types.every((t) => t === 'string' || t === 'null'))) {
          out.push(`${path}/properties/${name}`);
        }
      }
    }
    out.push(...misdeclaredTimes(sub, `${path}/${key}`));
  }
  return out;
}
