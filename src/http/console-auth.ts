/**
 * The console's session cookie as a credential of the public API. A request without an
 * Authorization header and with the cookie is a console session's: it may read (GET), ask for an
 * impact analysis (POST /v1/impact computes only) and sign itself out; anything else is refused
 * (SESSION_READ_ONLY) before its body is read. A session whose principal is not an auditor reads only
 * what is its own: the routes in OWN_READS narrow their answers to it, every other route refuses it.
 */
export const SESSION_COOKIE = 'writ_console';

/** Who reads: its principal, and whether it is an auditor (governance, or audit_read on audit:principal:* in every environment). */
export interface Reader {
  principal: string;
  auditor: boolean;
}

/** Routes (method + fastify route url) a console session may call at all. */
const SESSION_WRITES = new Set(['POST /v1/impact', 'POST /v1/console/session', 'DELETE /v1/console/session']);

/**
 * Routes a non-auditor may read (a console session, or a caller assertion on a GET); each narrows its
 * answer to what is the reader's own, or what its audit_read on audit:principal:<id> in every environment lets it ask about.
 */
export const OWN_READS = new Set([
  'GET /v1/receipts', 'GET /v1/receipts/:id', 'GET /v1/receipts/:id/why', 'GET /v1/principals/:id/capabilities',
  'GET /v1/principals/:id', 'GET /v1/edges/:id',
  'GET /v1/audit/expiring', 'GET /v1/audit/orphans',
  'POST /v1/impact', 'GET /v1/console/session', 'DELETE /v1/console/session',
]);

/**
 * The coordination state that every principal calling the API works with, auditor or not: who holds which
 * key at what epoch, who waits, and the incidents that allow preemption (an agent waiting on a key, or
 * finding its own leases again after a crash, reads them). A non-auditor's console session does not: the
 * console shows it only its own receipts and capabilities.
 */
export const COORDINATION_READS = new Set(['GET /v1/leases', 'GET /v1/leases/queues', 'GET /v1/incidents']);

export function sessionMayCall(method: string, routeUrl: string | undefined): boolean {
  return method === 'GET' || method === 'HEAD' || SESSION_WRITES.has(`${method} ${routeUrl ?? ''}`);
}

/** The session cookie's value in a Cookie header, if any. */
export function sessionCookieOf(header: string | undefined): string | undefined {
  if (!header) return undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === SESSION_COOKIE) {
      const value = part.slice(eq + 1).trim();
      return value === '' ? undefined : value;
    }
  }
  return undefined;
}

/** Set-Cookie for a session: HttpOnly, SameSite=Strict, Secure over TLS, for every path of this origin (the API is under /v1). */
export function sessionSetCookie(token: string, maxAgeMs: number, secure: boolean): string {
  return `${SESSION_COOKIE}=${token}; Path=/; Max-Age=${Math.max(0, Math.floor(maxAgeMs / 1000))}; HttpOnly; SameSite=Strict${secure ? '; Secure' : ''}`;
}

export function clearedSessionCookie(secure: boolean): string {
  return sessionSetCookie('', 0, secure);
}
