import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Clock } from '../clock.js';
import { WritError } from '../errors.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** drainGate's: whether the request counts as in flight (admitted, not yet answered nor upgraded). */
    writDrainHeld: boolean;
  }
}

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

  /**
   * RATE_LIMITED if `principal`'s bucket is empty now, else null; takes nothing. Lets the edge refuse a
   * limited principal's request before any work on it (body, signature), while only a verified request
   * (`admit`) ever spends from a bucket: a forged token cannot use up someone else's requests.
   */
  refusal(principal: string): WritError | null {
    const b = this.buckets.get(principal);
    if (!b) return null;
    const tokens = Math.min(this.burst, b.tokens + ((this.clock.now() - b.at) * this.perSecond) / 1000);
    return tokens < 1 ? this.limited(principal, tokens) : null;
  }

  /** Takes one request from `principal`'s bucket, or throws RATE_LIMITED (nothing taken). */
  admit(principal: string): void {
    const now = this.clock.now();
    const b = this.buckets.get(principal) ?? { tokens: this.burst, at: now };
    const tokens = Math.min(this.burst, b.tokens + ((now - b.at) * this.perSecond) / 1000);
    if (tokens < 1) {
      this.buckets.set(principal, { tokens, at: now });
      throw this.limited(principal, tokens);
    }
    this.buckets.set(principal, { tokens: tokens - 1, at: now });
    if (this.buckets.size > 10_000) this.sweep(now);
  }

  private limited(principal: string, tokens: number): WritError {
    const retryAfterMs = Math.ceil(((1 - tokens) * 1000) / this.perSecond);
    return new WritError('RATE_LIMITED', `${principal} is over its rate of ${this.perSecond} requests/s (burst ${this.burst}); retry in ${retryAfterMs} ms`, { retry_after_ms: retryAfterMs });
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
  // Callback-style hooks: they run on every request, and an async one costs a promise and a microtask each.
  app.addHook('onRequest', (request, _reply, next) => {
    if (request.method !== 'POST' || request.routeOptions.url !== '/v1/actions') return next();
    if (inflight >= max) {
      return next(new WritError('OVERLOADED', `${inflight} writes are in flight, the most this Writ forwards at once (WRIT_MAX_INFLIGHT_WRITES); retry shortly`, { retry_after_ms: retryAfterMs }));
    }
    inflight++;
    holding.add(request);
    next();
  });
  app.addHook('onSend', (request, _reply, _payload, next) => {
    // Only a write ever holds a slot: every other request is past this test without a look into the set.
    if (inflight > 0 && holding.delete(request)) inflight--;
    next();
  });
  return { inflight: () => inflight };
}

/** Graceful shutdown of the HTTP side (see `drainGate`). */
export interface Drain {
  /** Requests admitted and not yet answered. */
  inflight(): number;
  /** From now on every new request but /healthz is OVERLOADED; resolves once nothing admitted is left, or after `timeoutMs`. */
  drain(timeoutMs: number): Promise<{ drained: boolean; inflight: number }>;
  /** Whether `drain` has been called. */
  draining(): boolean;
  /**
   * A request answered by a stream (a WebSocket upgrade) stops counting once upgraded: the stream
   * counts each operation it runs with `hold` instead, and ends itself when told (`onDrain`).
   */
  upgraded(request: FastifyRequest): void;
  /** Counts one unit of work in flight until the returned function is called (once; later calls do nothing). */
  hold(): () => void;
  /** `listener` runs once, when draining begins. */
  onDrain(listener: () => void): void;
}

/**
 * Draining (SIGTERM): once `drain` is called every new request but `/healthz` is OVERLOADED (503) with
 * Retry-After and `Connection: close` — `/readyz` too, so a load balancer takes this replica out —
 * while requests admitted before run to their end (a write's receipt settles before its answer).
 * The listener stays open meanwhile, so a client that connects anew is told to retry instead of
 * being refused a connection. A request counts until its answer is ready to send: a client that hung up does not end its
 * write early, the write still settles.
 */
export function drainGate(app: FastifyInstance, retryAfterMs = 1000): Drain {
  let draining = false;
  let inflight = 0;
  // Whether a request counts is a slot of the request itself, not a WeakSet entry (a hash table insert
  // and an identity hash made for every request): set when it is admitted, cleared once it stops counting.
  app.decorateRequest('writDrainHeld', false);
  let idle: (() => void) | null = null;
  const listeners: (() => void)[] = [];
  const release = () => {
    inflight--;
    if (inflight === 0) idle?.();
  };
  const done = (request: FastifyRequest) => {
    if (!request.writDrainHeld) return;
    request.writDrainHeld = false;
    release();
  };
  // Callback-style hooks: they run on every request, and an async one costs a promise and a microtask each.
  app.addHook('onRequest', (request, reply, next) => {
    if (draining && request.routeOptions.url !== '/healthz') {
      reply.header('connection', 'close');
      if (request.routeOptions.url === '/readyz') {
        // Its own documented "not ready" answer, which a load balancer's probe reads (answered here: no next()).
        reply.code(503).header('retry-after', String(Math.max(1, Math.ceil(retryAfterMs / 1000)))).send({ status: 'not ready', code: 'OVERLOADED', error: 'shutting down: draining the requests in flight' });
        return;
      }
      return next(new WritError('OVERLOADED', 'this Writ is shutting down; retry (another replica, or this one once restarted)', { retry_after_ms: retryAfterMs }));
    }
    inflight++;
    request.writDrainHeld = true;
    next();
  });
  // onSend: the use case has finished (a write's receipt is settled); onResponse in case onSend was skipped.
  app.addHook('onSend', (request, _reply, _payload, next) => {
    done(request);
    next();
  });
  app.addHook('onResponse', (request, _reply, next) => {
    done(request);
    next();
  });
  return {
    inflight: () => inflight,
    draining: () => draining,
    upgraded: done,
    hold() {
      inflight++;
      let held = true;
      return () => {
        if (!held) return;
        held = false;
        release();
      };
    },
    onDrain(listener) {
      listeners.push(listener);
    },
    async drain(timeoutMs) {
      if (!draining) {
        draining = true;
        for (const listener of listeners.splice(0)) listener();
      }
      if (inflight > 0) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, timeoutMs);
          idle = () => {
            clearTimeout(timer);
            resolve();
          };
        });
      }
      return { drained: inflight === 0, inflight };
    },
  };
}

/**
 * The principal a Bearer caller assertion claims to be (its `iss`), read without checking anything;
 * null when there is none or it cannot be read. Only for shedding load before the real check.
 */
export function claimedPrincipal(authorization: string | undefined): string | null {
  if (!authorization || authorization.length > 8192) return null;
  const m = /^Bearer[ \t]+[A-Za-z0-9_-]+\.([A-Za-z0-9_-]+)\.[A-Za-z0-9_-]+[ \t]*$/i.exec(authorization);
  if (!m) return null;
  try {
    const payload: unknown = JSON.parse(Buffer.from(m[1]!, 'base64url').toString('utf8'));
    const iss = (payload as { iss?: unknown } | null)?.iss;
    return typeof iss === 'string' ? iss : null;
  } catch {
    return null;
  }
}
