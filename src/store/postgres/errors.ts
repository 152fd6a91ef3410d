import pg from 'pg';
import { WritError } from '../../errors.js';

/** SQLSTATEs after which the whole transaction may simply run again. */
const RETRYABLE = new Set(['40001', '40P01']);

/** Connection-level failures and shed load: the database is (for now) unreachable or refusing work. */
function isUnavailable(e: unknown): boolean {
  if (e instanceof pg.DatabaseError) {
    const code = e.code ?? '';
    return code.startsWith('08') || code.startsWith('53') || ['57P01', '57P02', '57P03', '57014', '55P03'].includes(code);
  }
  // Writ's own errors (thrown by a callback, or already mapped) are never the driver's.
  if (!(e instanceof Error) || e instanceof WritError) return false;
  const errno = (e as { code?: unknown }).code;
  if (typeof errno === 'string' && /^E[A-Z]+$/.test(errno)) return true; // ECONNREFUSED, ECONNRESET, EPIPE, ETIMEDOUT …
  return /Connection terminated|connection error|timeout exceeded when trying to connect|Client was closed|not queryable/i.test(e.message);
}

export function isRetryable(e: unknown): boolean {
  return e instanceof pg.DatabaseError && RETRYABLE.has(e.code ?? '');
}

/** Whether `e` came from the driver or the database (as opposed to the caller's callback). */
export function isEngineError(e: unknown): boolean {
  return e instanceof pg.DatabaseError || isUnavailable(e);
}

export function overloaded(message: string, retryAfterMs: number, cause?: unknown): WritError {
  const err = new WritError('OVERLOADED', message, { retry_after_ms: retryAfterMs });
  if (cause !== undefined) (err as { cause?: unknown }).cause = cause;
  return err;
}

/**
 * What an engine error becomes above the adapter: unavailability and exhausted retries are
 * OVERLOADED (503, retry_after_ms); any other database error is a bug in Writ's SQL or schema
 * (INTERNAL, with the SQLSTATE). Errors that are not the engine's pass through untouched.
 */
export function mapEngineError(e: unknown, retryAfterMs: number): unknown {
  if (isRetryable(e)) return overloaded('the database kept refusing the transaction under contention; retry', retryAfterMs, e);
  if (isUnavailable(e)) return overloaded(`the database is unavailable (${(e as Error).message})`, retryAfterMs, e);
  if (e instanceof pg.DatabaseError) {
    const err = new WritError('INTERNAL', `PostgreSQL error ${e.code}: ${e.message}`, { sqlstate: e.code });
    (err as { cause?: unknown }).cause = e;
    return err;
  }
  return e;
}
