/**
 * Waits until `probe` gives a value other than undefined or false, asking again every `everyMs`, and
 * returns it; past `ms`, fails saying what was awaited. For tests that watch real processes (a server's
 * log, a proxy's counters, the store) for a state they reach in their own time.
 */
export async function until<T>(what: string, probe: () => Promise<T | undefined | false> | T | undefined | false, ms = 10_000, everyMs = 25): Promise<T> {
  const start = Date.now();
  for (;;) {
    const v = await probe();
    if (v !== undefined && v !== false) return v;
    if (Date.now() - start > ms) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
