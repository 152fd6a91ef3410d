import { WritError } from '../errors.js';

/** Wire times are ISO-8601 strings (or ms numbers); inside Writ they are ms numbers. */
export function parseTime(value: string | number | null | undefined, field: string): number | null {
  if (value === null || value === undefined) return null;
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new WritError('UNPROCESSABLE', `${field} is not a valid time`);
    return value;
  }
  const t = Date.parse(value);
  if (Number.isNaN(t)) throw new WritError('UNPROCESSABLE', `${field} is not an ISO-8601 time: "${value}"`);
  return t;
}

export function isoOrNull(ms: number | null | undefined): string | null {
  return ms === null || ms === undefined ? null : new Date(ms).toISOString();
}

/** Parses `?at=` of the graph export: a revision number or a time. */
export function parseAt(at: string): { revision: number } | { time: number } {
  if (/^\d+$/.test(at)) return { revision: Number(at) };
  const t = Date.parse(at);
  if (Number.isNaN(t)) throw new WritError('UNPROCESSABLE', `at must be a graph revision or an ISO-8601 time, got "${at}"`);
  return { time: t };
}
