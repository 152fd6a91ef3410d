import { WritError, isWritError } from '../errors.js';
import type { WritContext } from './context.js';
import { CLOCK_SAMPLE_INTERVAL_MS, type ClockOffset } from './database-clock.js';

/** How long readiness waits for the store's answer: a probe must answer well inside a load balancer's timeout. */
export const READINESS_TIMEOUT_MS = 2_000;

/**
 * Whether the store answers now: one cheap read (the graph head) that reaches the engine itself. The
 * live graph cannot tell: on PostgreSQL its head is fed by NOTIFY and kept in memory, so it answers
 * while the database is gone. Throws a WritError naming the cause (OVERLOADED when the store cannot be
 * reached or does not answer within `timeoutMs`, the store's own code otherwise, e.g. STORE_FAILED).
 */
export async function checkStoreAnswers(ctx: WritContext, timeoutMs = READINESS_TIMEOUT_MS): Promise<void> {
  // Nothing decided from it, so it need not wait for commits in flight to be durable.
  await within(ctx.store.read((tx) => tx.graph.head(), { waitsFor: () => false }), timeoutMs, 'the store did not answer', 'the store failed to answer');
}

/**
 * This replica's clock against the database's (PostgreSQL; null on SQLite, which has one clock): the
 * latest measurement, or a new one (one cheap statement) when that is older than CLOCK_SAMPLE_INTERVAL_MS.
 * Throws CLOCK_SKEW past WRIT_CLOCK_OFFSET_MAX_MS, OVERLOADED when the database does not answer in time.
 */
export async function checkDatabaseClock(ctx: WritContext, timeoutMs = READINESS_TIMEOUT_MS): Promise<ClockOffset | null> {
  const watch = ctx.databaseClock;
  if (!watch) return null;
  const offset = await within(watch.fresh(CLOCK_SAMPLE_INTERVAL_MS), timeoutMs, 'the database did not tell its time', 'the database failed to tell its time');
  watch.check(offset);
  return offset;
}

/**
 * `work`'s answer, or OVERLOADED (`late` within `timeoutMs` ms) when it takes longer; a failure that is not a
 * WritError becomes INTERNAL (`failed`: its message). What a readiness probe waits for.
 */
async function within<T>(work: Promise<T>, timeoutMs: number, late: string, failed: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new WritError('OVERLOADED', `${late} within ${timeoutMs} ms`, { retry_after_ms: 1_000 })), timeoutMs);
  });
  try {
    return await Promise.race([work, timeout]);
  } catch (e) {
    throw isWritError(e) ? e : new WritError('INTERNAL', `${failed}: ${(e as Error).message}`);
  } finally {
    clearTimeout(timer);
  }
}
