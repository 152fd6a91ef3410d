import { errorFromProblem, type WritApiError } from './errors.js';

/**
 * The typed error for a refused HTTP answer (an API call, or a lease stream's refused upgrade): its
 * problem document when the body is one (a proxy's HTML page or a cut body still gives a typed error,
 * code INTERNAL), with the retry delay from the problem's `retry_after_ms`, else the Retry-After header.
 */
export function refusalError(status: number, body: string, retryAfterHeader: string | null | undefined): WritApiError {
  let problem: Record<string, unknown> = {};
  try {
    const parsed: unknown = body ? JSON.parse(body) : {};
    if (typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)) problem = parsed as Record<string, unknown>;
  } catch {
    // Not JSON: the typed error below says only the status.
  }
  return problemError(status, problem, retryAfterHeaderMs(retryAfterHeader ?? null));
}

/**
 * The typed error for a problem document (an HTTP answer's, or a lease stream reply's), with the retry
 * delay from its `retry_after_ms`, else `fallbackRetryMs` (the Retry-After header's, over HTTP).
 */
export function problemError(status: number, problem: Record<string, unknown>, fallbackRetryMs: number | null = null): WritApiError {
  const fromProblem = typeof problem.retry_after_ms === 'number' ? problem.retry_after_ms : null;
  return errorFromProblem(status, problem, fromProblem ?? fallbackRetryMs);
}

/** Retry-After as ms: delta-seconds or an HTTP date; null when absent or unreadable. */
function retryAfterHeaderMs(value: string | null): number | null {
  if (value === null || value.trim() === '') return null;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const at = Date.parse(value);
  return Number.isNaN(at) ? null : Math.max(0, at - Date.now());
}
