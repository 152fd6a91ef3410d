/**
 * Times on the wire. Inside Writ an instant is a number of milliseconds since the Unix epoch; every
 * JSON answer carries it as an RFC 3339 string in UTC with millisecond precision
 * (`2026-11-30T12:00:00.000Z`). Durations stay numbers and are named `*_ms`. Shared by the server's
 * serializers and the SDK (no imports).
 */

/** An RFC 3339 time in UTC with millisecond precision, as Writ writes it. */
export type WireTime = string;

export function toWireTime(ms: number): WireTime {
  return new Date(ms).toISOString();
}

export function toWireTimeOrNull(ms: number | null | undefined): WireTime | null {
  return ms === null || ms === undefined ? null : toWireTime(ms);
}

/** Milliseconds since the epoch of a wire time (NaN when it is not one). */
export function fromWireTime(time: WireTime): number {
  return Date.parse(time);
}
