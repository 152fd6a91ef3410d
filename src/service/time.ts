import { WritError } from '../errors.js';
import { EARLIEST_WIRE_TIME_MS, LATEST_WIRE_TIME_MS } from '../wire/time.js';

/** 2001-09-09 in ms: a smaller number is most likely a time in seconds, read as milliseconds (1970). */
const SECONDS_LOOK = 1e12;

/**
 * Wire times are RFC 3339 strings (input may also give whole ms numbers); inside Writ they are ms numbers.
 * A string must be RFC 3339 to the letter, with a zone when it has a time of day: `Date.parse` alone took
 * `2027-02-30` for March 2 (two more days of a delegation), `T24:00` for the next day, a time without a
 * zone in the server's own zone, and `1 January 2027`. A number is whole milliseconds since the epoch;
 * one before 2001 is refused as seconds read as milliseconds (a not_before of 1796404642 made a delegation
 * live at once, in 1970). A time outside years 0000–9999 is refused: stored, it could not be answered as
 * RFC 3339 again (an edge that expired in the year 3 million made every read of the graph fail).
 */
export function parseTime(value: string | number | null | undefined, field: string): number | null {
  if (value === null || value === undefined) return null;
  let t: number;
  if (typeof value === 'number') {
    if (!Number.isInteger(value)) throw new WritError('UNPROCESSABLE', `${field} is not a valid time: ${String(value)} is not a whole number of ms since the epoch`);
    t = value;
  } else {
    t = rfc3339(value);
    if (Number.isNaN(t)) throw new WritError('UNPROCESSABLE', `${field} is not an RFC 3339 time (such as 2027-01-31T09:00:00Z): "${value}"`);
  }
  if (t < EARLIEST_WIRE_TIME_MS || t > LATEST_WIRE_TIME_MS) throw new WritError('UNPROCESSABLE', `${field} is outside the years 0000–9999: ${JSON.stringify(value)}`);
  if (typeof value === 'number' && t >= 0 && t < SECONDS_LOOK) {
    throw new WritError('UNPROCESSABLE', `${field} ${value} would be ${new Date(t).toISOString()}: a time given as a number is milliseconds since the epoch, not seconds (or give an RFC 3339 string)`);
  }
  return t;
}

const REVISION = /^\d{1,15}$/;
/** RFC 3339 (a date, or a date and time with seconds and a zone): what Writ writes. */
const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})(?:[Tt](\d{2}):(\d{2}):(\d{2})(?:\.\d{1,9})?(?:[Zz]|[+-](\d{2}):(\d{2})))?$/;

/**
 * The instant an RFC 3339 string names, or NaN: its form, and every field within its range (a month's
 * days, hours to 23, seconds to 59: JavaScript has no leap second), so that nothing rolls over.
 */
export function rfc3339(text: string): number {
  const m = RFC3339.exec(text);
  if (!m) return Number.NaN;
  const [year, month, day] = [Number(m[1]), Number(m[2]), Number(m[3])];
  const days = new Date(Date.UTC(2000, month, 0)).getUTCDate() - (month === 2 && !leap(year) ? 1 : 0);
  if (month < 1 || month > 12 || day < 1 || day > days) return Number.NaN;
  if (m[4] !== undefined && (Number(m[4]) > 23 || Number(m[5]) > 59 || Number(m[6]) > 59)) return Number.NaN;
  if (m[7] !== undefined && (Number(m[7]) > 23 || Number(m[8]) > 59)) return Number.NaN;
  return Date.parse(text);
}

function leap(year: number): boolean {
  return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
}

/**
 * Parses `?at=` of the graph export: a revision (digits) or an RFC 3339 time. Anything else is
 * malformed: `Date.parse` alone would take `-1` for the year −1, or `1 2` for a local date.
 */
export function parseAt(at: string): { revision: number } | { time: number } {
  if (REVISION.test(at)) return { revision: Number(at) };
  const t = rfc3339(at);
  if (Number.isNaN(t)) throw new WritError('MALFORMED_REQUEST', `at must be a graph revision (digits) or an RFC 3339 time, got ${JSON.stringify(at)}`);
  return { time: t };
}
