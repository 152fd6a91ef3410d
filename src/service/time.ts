import { WritError } from '../errors.js';

/** The instants an RFC 3339 time can name (years 0000–9999); outside them a time cannot be written back. */
const EARLIEST = Date.parse('0000-01-01T00:00:00.000Z');
const LATEST = Date.parse('9999-12-31T23:59:59.999Z');

/**
 * Wire times are RFC 3339 strings (input may also give whole ms numbers); inside Writ they are ms numbers.
 * A time outside years 0000–9999 is refused: stored, it could not be answered as RFC 3339 again (an edge
 * that expired in the year 3 million made every read of the graph fail).
 */
export function parseTime(value: string | number | null | undefined, field: string): number | null {
  if (value === null || value === undefined) return null;
  let t: number;
  if (typeof value === 'number') {
    if (!Number.isInteger(value)) throw new WritError('UNPROCESSABLE', `${field} is not a valid time: ${String(value)} is not a whole number of ms since the epoch`);
    t = value;
  } else {
    t = Date.parse(value);
    if (Number.isNaN(t)) throw new WritError('UNPROCESSABLE', `${field} is not an ISO-8601 time: "${value}"`);
  }
  if (t < EARLIEST || t > LATEST) throw new WritError('UNPROCESSABLE', `${field} is outside the years 0000–9999: ${JSON.stringify(value)}`);
  return t;
}

const REVISION = /^\d{1,15}$/;
/** RFC 3339 (a date, or a date and time with seconds and a zone): what Writ writes. */
const RFC3339 = /^\d{4}-\d{2}-\d{2}(?:[Tt]\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:[Zz]|[+-]\d{2}:\d{2}))?$/;

/**
 * Parses `?at=` of the graph export: a revision (digits) or an RFC 3339 time. Anything else is
 * malformed: `Date.parse` alone would take `-1` for the year −1, or `1 2` for a local date.
 */
export function parseAt(at: string): { revision: number } | { time: number } {
  if (REVISION.test(at)) return { revision: Number(at) };
  const t = RFC3339.test(at) ? Date.parse(at) : Number.NaN;
  if (Number.isNaN(t)) throw new WritError('MALFORMED_REQUEST', `at must be a graph revision (digits) or an RFC 3339 time, got ${JSON.stringify(at)}`);
  return { time: t };
}
