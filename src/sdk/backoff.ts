/**
 * Full-jitter exponential backoff (the AWS architecture blog's "full jitter"): a uniformly random
 * time in [0, min(cap, base · 2^attempt)], added on top of the server's Retry-After, which is a floor.
 * Clients told the same Retry-After (everyone waiting for one lease's expiry) are thereby spread over
 * the whole jitter window instead of coming back together.
 */
export interface BackoffOptions {
  /** Default 100 ms. */
  baseMs?: number;
  /** Default 2 000 ms. */
  capMs?: number;
  /** Uniform in [0, 1); default Math.random. */
  random?: () => number;
}

/** The ceiling of the jitter window for `attempt` (0-based): min(cap, base · 2^attempt). */
export function backoffCeiling(attempt: number, options: BackoffOptions = {}): number {
  const base = options.baseMs ?? 100;
  const cap = options.capMs ?? 2_000;
  const n = Number.isFinite(attempt) ? Math.min(Math.max(0, Math.floor(attempt)), 30) : 0;
  return Math.min(cap, base * 2 ** n);
}

export function backoffDelay(attempt: number, retryAfterMs: number | null, options: BackoffOptions = {}): number {
  const random = options.random ?? Math.random;
  const floor = retryAfterMs !== null && Number.isFinite(retryAfterMs) && retryAfterMs > 0 ? retryAfterMs : 0;
  // The jitter window must not shrink with the floor: a small Retry-After (a lease about to expire)
  // told to many clients would otherwise bring them all back within a millisecond or two.
  return floor + random() * backoffCeiling(attempt, options);
}
