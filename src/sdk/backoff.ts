/**
 * Full-jitter exponential backoff (the AWS architecture blog's "full jitter"): sleep a uniformly
 * random time in [0, min(cap, base · 2^attempt)], but never less than the server's Retry-After.
 * Spreading retries this way avoids synchronized bursts when many clients contend for one key.
 */
export interface BackoffOptions {
  baseMs?: number;
  capMs?: number;
  random?: () => number;
}

export function backoffDelay(attempt: number, retryAfterMs: number | null, options: BackoffOptions = {}): number {
  const base = options.baseMs ?? 50;
  const cap = options.capMs ?? 2_000;
  const random = options.random ?? Math.random;
  const ceiling = Math.min(cap, base * 2 ** Math.min(attempt, 20));
  const jittered = random() * ceiling;
  // Retry-After is a floor, itself jittered upward a little so that everyone told "1 s" does not come back together.
  return retryAfterMs !== null ? retryAfterMs + random() * Math.min(ceiling, retryAfterMs) : jittered;
}
