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
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new WritError('OVERLOADED', `the store did not answer within ${timeoutMs} ms`, { retry_after_ms: 1_000 })),
      timeoutMs,
    );
  });
  try {
    // Nothing decided from it, so it need not wait for commits in flight to be durable.
    await Promise.race([ctx.store.read((tx) => tx.graph.head(), { waitsFor: () => false }), late]);
  } catch (e) {
    throw isWritError(e) ? e : new WritError('INTERNAL', `the store failed to answer: ${(e as Error).message}`);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * This replica's clock against the database's (PostgreSQL; null on SQLite, which has one clock): the
 * latest measurement, or a new one (one cheap statement) when that is older than CLOCK_SAMPLE_INTERVAL_MS.
 * Throws CLOCK_SKEW past WRIT_CLOCK_OFFSET_MAX_MS, OVERLOADED when the database does not answer in time.
 */
export async function checkDatabaseClock(ctx: WritContext, timeoutMs = READINESS_TIMEOUT_MS): Promise<ClockOffset | null> {
  const watch = ctx.databaseClock;
  if (!watch) return null;
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new WritError('OVERLOADED', `the database did not tell its time within ${timeoutMs} ms`, { retry_after_ms: 1_000 })), timeoutMs);
  });
  let offset: ClockOffset;
  try {
    offset = await Promise.race([watch.fresh(CLOCK_SAMPLE_INTERVAL_MS), late]);
  } catch (e) {
    throw isWritError(e) ? e : new WritError('INTERNAL', `the database failed to tell its time: ${(e as Error).message}`);
  } finally {
    clearTimeout(timer);
  }
  watch.check(offset);
  return offset;
}
