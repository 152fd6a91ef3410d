/**
 * Times on the wire. Inside Writ an instant is a number of milliseconds since the Unix epoch; every
 * JSON answer carries it as an RFC 3339 string in UTC with millisecond precision
 * (`2026-11-30T12:00:00.000Z`). Durations stay numbers and are named `*_ms`. Shared by the server's
 * serializers and the SDK (no imports).
 */

/** An RFC 3339 time in UTC with millisecond precision, as Writ writes it. */
export type WireTime = string;

/** The first and last instants RFC 3339 can name (years 0000–9999). */
export const EARLIEST_WIRE_TIME_MS = Date.parse('0000-01-01T00:00:00.000Z');
export const LATEST_WIRE_TIME_MS = Date.parse('9999-12-31T23:59:59.999Z');

/**
 * An instant as RFC 3339, clamped to years 0000–9999: a time beyond them (an edge's `expires_at: 1e20`,
 * "never", stored by an older Writ) cannot be written as RFC 3339, or as a Date at all (RangeError), and
 * is answered as the last (or first) instant that can.
 */
export function toWireTime(ms: number): WireTime {
  return new Date(Math.min(Math.max(ms, EARLIEST_WIRE_TIME_MS), LATEST_WIRE_TIME_MS)).toISOString();
}

export function toWireTimeOrNull(ms: number | null | undefined): WireTime | null {
  return ms === null || ms === undefined ? null : toWireTime(ms);
}

/** Milliseconds since the epoch of a wire time (NaN when it is not one). */
export function fromWireTime(time: WireTime): number {
  return Date.parse(time);
}
