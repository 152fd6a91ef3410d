import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Clock } from '../clock.js';
import { WritError } from '../errors.js';

/**
 * Per-principal request rate: a token bucket of `burst` requests refilled at `perSecond`, on the
 * injected clock. A principal past it is RATE_LIMITED (429) with the time until its next request
 * fits. Buckets of principals idle long enough to be full again are dropped, so memory stays bounded
 * by the principals active within one refill period.
 */
export class PrincipalRateLimiter {
  private readonly buckets = new Map<string, { tokens: number; at: number }>();

  constructor(
    private readonly clock: Clock,
    private readonly perSecond: number,
    private readonly burst: number,
  ) {}

  /** Takes one request from `principal`'s bucket, or throws RATE_LIMITED (nothing taken). */
  admit(principal: string): void {
    const now = this.clock.now();
    const b = this.buckets.get(principal) ?? { tokens: this.burst, at: now };
    const tokens = Math.min(this.burst, b.tokens + ((now - b.at) * this.perSecond) / 1000);
    if (tokens < 1) {
      this.buckets.set(principal, { tokens, at: now });
      const retryAfterMs = Math.ceil(((1 - tokens) * 1000) / this.perSecond);
      throw new WritError('RATE_LIMITED', `${principal} is over its rate of ${this.perSecond} requests/s (burst ${this.burst}); retry in ${retryAfterMs} ms`, { retry_after_ms: retryAfterMs });
    }
    this.buckets.set(principal, { tokens: tokens - 1, at: now });
    if (this.buckets.size > 10_000) this.sweep(now);
  }

  private sweep(now: number): void {
    const fullAfterMs = (this.burst * 1000) / this.perSecond;
    for (const [p, b] of this.buckets) if (now - b.at >= fullAfterMs) this.buckets.delete(p);
  }
}

/**
 * At most `max` writes (`POST /v1/actions`) in flight at once: one more is OVERLOADED (503) with
 * Retry-After before anything of it is read or checked, so it changes nothing and spends nothing.
 * A slot is taken when the request arrives and given back when its answer is sent (success or
 * error), so a client that hangs up mid-write does not leak one.
 */
export function boundInflightWrites(app: FastifyInstance, max: number, retryAfterMs = 1000): { inflight(): number } {
  let inflight = 0;
  const holding = new WeakSet<FastifyRequest>();
  app.addHook('onRequest', async (request) => {
    if (request.method !== 'POST' || request.routeOptions.url !== '/v1/actions') return;
    if (inflight >= max) {
      throw new WritError('OVERLOADED', `${inflight} writes are in flight, the most this Writ forwards at once (WRIT_MAX_INFLIGHT_WRITES); retry shortly`, { retry_after_ms: retryAfterMs });
    }
    inflight++;
    holding.add(request);
  });
  app.addHook('onSend', async (request) => {
    if (holding.delete(request)) inflight--;
  });
  return { inflight: () => inflight };
}
