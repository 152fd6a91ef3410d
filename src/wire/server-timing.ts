/**
 * The `Server-Timing` header (W3C Server Timing) of a forwarded write, one definition for the gateway,
 * the SDK and the benchmark: `name;dur=ms` entries separated by commas, durations in milliseconds.
 */

/** Milliseconds by step, in the order the steps ran (`total` last). */
export type ServerTiming = Record<string, number>;

/** `auth;dur=0.28, checks;dur=0.31, …`: each duration to 0.01 ms. */
export function formatServerTiming(steps: ServerTiming): string {
  return Object.entries(steps).map(([name, ms]) => `${name};dur=${ms.toFixed(2)}`).join(', ');
}

/** The steps of a `Server-Timing` header; entries without a numeric `dur` are left out. */
export function parseServerTiming(header: string | undefined | null): ServerTiming {
  const out: ServerTiming = {};
  for (const entry of (header ?? '').split(',')) {
    const [name, ...params] = entry.split(';').map((p) => p.trim());
    // Parameters are `name OWS "=" OWS value`.
    const dur = params.map((p) => p.split('=').map((x) => x.trim())).find(([k]) => k === 'dur');
    const ms = dur?.[1] ? Number(dur[1]) : NaN;
    if (name && Number.isFinite(ms)) out[name] = ms;
  }
  return out;
}
