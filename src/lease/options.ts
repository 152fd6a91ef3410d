import { setTimeout as delay } from 'node:timers/promises';
import { WritError } from '../errors.js';
import { pooledRandomBytes } from './token.js';
import type { LeaseManagerOptions } from './types.js';

export type ResolvedLeaseOptions = Required<LeaseManagerOptions>;

export const DEFAULT_LEASE_OPTIONS: ResolvedLeaseOptions = {
  minTtlMs: 1_000,
  maxTtlMs: 300_000,
  maxWaitMs: 60_000,
  maxWaitersPerKey: 64,
  maxWaitersPerPrincipal: 16,
  pollMinMs: 10,
  pollMaxMs: 50,
  queuedRetryAfterMs: 250,
  randomBytes: pooledRandomBytes,
  sleep: (ms) => delay(ms),
};

export function resolveLeaseOptions(options: LeaseManagerOptions = {}): ResolvedLeaseOptions {
  const o = { ...DEFAULT_LEASE_OPTIONS, ...stripUndefined(options) };
  if (!(o.minTtlMs > 0 && o.minTtlMs <= o.maxTtlMs)) throw new WritError('UNPROCESSABLE', `lease ttl bounds ${o.minTtlMs}..${o.maxTtlMs} are inconsistent`);
  if (!(Number.isSafeInteger(o.maxWaitersPerKey) && o.maxWaitersPerKey >= 1)) throw new WritError('UNPROCESSABLE', `maxWaitersPerKey must be a positive integer, got ${o.maxWaitersPerKey}`);
  if (!(Number.isSafeInteger(o.maxWaitersPerPrincipal) && o.maxWaitersPerPrincipal >= 1)) throw new WritError('UNPROCESSABLE', `maxWaitersPerPrincipal must be a positive integer, got ${o.maxWaitersPerPrincipal}`);
  if (!(o.pollMinMs >= 0 && o.pollMinMs <= o.pollMaxMs)) throw new WritError('UNPROCESSABLE', `lease poll bounds ${o.pollMinMs}..${o.pollMaxMs} are inconsistent`);
  return o;
}

function stripUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

export function checkTtl(ttlMs: unknown, o: ResolvedLeaseOptions): number {
  if (typeof ttlMs !== 'number' || !Number.isSafeInteger(ttlMs) || ttlMs < o.minTtlMs || ttlMs > o.maxTtlMs) {
    throw new WritError('UNPROCESSABLE', `ttl_ms must be an integer between ${o.minTtlMs} and ${o.maxTtlMs}`, {
      ttl_ms: ttlMs,
      min_ttl_ms: o.minTtlMs,
      max_ttl_ms: o.maxTtlMs,
    });
  }
  return ttlMs;
}

export function checkWait(waitMs: unknown, o: ResolvedLeaseOptions): number {
  if (waitMs === undefined) return 0;
  if (typeof waitMs !== 'number' || !Number.isSafeInteger(waitMs) || waitMs < 0 || waitMs > o.maxWaitMs) {
    throw new WritError('UNPROCESSABLE', `wait_ms must be an integer between 0 and ${o.maxWaitMs}`, { wait_ms: waitMs, max_wait_ms: o.maxWaitMs });
  }
  return waitMs;
}
