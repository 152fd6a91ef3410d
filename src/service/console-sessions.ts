/**
 * Console sign-in without a private key in the browser: `writ console` signs a one-time login token
 * with the service key; the console exchanges it once (its id is spent in the single-use store that
 * every process and replica sharing the store sees) for a short-lived session token, which the HTTP
 * layer keeps in an HttpOnly cookie. Sessions read: the HTTP layer refuses them anything else.
 *
 * Why signed tokens and the existing single-use store rather than a table of login-token hashes: the
 * single-use store already is the durable, cross-process "spent once, remembered until expiry" port
 * on both engines (with its conformance tests), so no new table, migration or port is needed, and a
 * link expires by itself. The cost: a key rotation ends links and sessions signed by the retired key
 * once that key leaves the JWKS (5 minutes), which is what one wants of a rotation anyway.
 */
import { behindDatabase, CLOCK_NOISE_MS, clockOffsetDetail, newConsoleTokenId, signConsoleToken, verifyConsoleToken } from '../decision/index.js';
import { WritError } from '../errors.js';
import { GOVERNANCE_ID } from '../graph/model.js';
import { AUDIT_READ, auditsEveryone, EVERY_ENVIRONMENT, liveScopes } from './ask-about.js';
import type { WritContext } from './context.js';

/** How long a printed login link may wait to be used. */
export const LOGIN_LINK_TTL_MS = 10 * 60_000;
/** How long a console session lasts (then sign in again with a new link). */
export const CONSOLE_SESSION_TTL_MS = 30 * 60_000;

const LOGIN_NAMESPACE = 'console-login';
const SESSION_NAMESPACE = 'console-session';

export interface ConsoleSession {
  principal: string;
  /** Governance, or a holder of audit_read on every principal in every environment: sees everything; others see their own receipts and capabilities. */
  auditor: boolean;
  expires_at: number;
  /** The session token (the cookie's value). */
  token: string;
}

/** A one-time login token for `principal` (any live principal; what it will see depends on its audit grant). */
export async function issueLoginToken(ctx: WritContext, principal: string, ttlMs = LOGIN_LINK_TTL_MS): Promise<{ token: string; expires_at: number; auditor: boolean }> {
  await livePrincipal(ctx, principal, 'UNKNOWN_PRINCIPAL');
  const now = ctx.clock.now();
  const expires_at = now + ttlMs;
  const token = signConsoleToken(ctx.keys, { kind: 'login', principal, jti: newConsoleTokenId(), issuedAt: now, expiresAt: expires_at }, ctx.config.audience);
  return { token, expires_at, auditor: await isAuditor(ctx, principal) };
}

/** Exchanges a login token for a session, once: LOGIN_LINK_SPENT the second time, LOGIN_LINK_INVALID if it is not a live link. */
export async function exchangeLoginToken(ctx: WritContext, token: string): Promise<ConsoleSession> {
  const now = ctx.clock.now();
  const claims = verifyConsoleToken(token, 'login', { keys: ctx.keys, audience: ctx.config.audience, now });
  if ('refused' in claims) throw new WritError('LOGIN_LINK_INVALID', `console login link refused: ${claims.refused}`);
  await livePrincipal(ctx, claims.principal, 'LOGIN_LINK_INVALID');
  await ctx.store.readWrite((tx) => tx.singleUse.spendOrRefuse(LOGIN_NAMESPACE, claims.jti, claims.expiresAt, now, (why) => {
    if (why.reason === 'spent') return new WritError('LOGIN_LINK_SPENT', 'this console login link was already used; ask for a new one with `writ console`');
    // Live by this replica's clock, expired by the database's: the replica's clock is behind (not a second use).
    if (why.storeNow - now <= CLOCK_NOISE_MS) return new WritError('LOGIN_LINK_INVALID', 'console login link refused: it expired; ask for a new one with `writ console`');
    return new WritError('LOGIN_LINK_INVALID', `${behindDatabase('console login link', claims.expiresAt, why.storeNow, now)}; ask for a new link with \`writ console\``, clockOffsetDetail(why.storeNow, now));
  }));
  const expires_at = now + CONSOLE_SESSION_TTL_MS;
  const session = signConsoleToken(ctx.keys, { kind: 'session', principal: claims.principal, jti: newConsoleTokenId(), issuedAt: now, expiresAt: expires_at }, ctx.config.audience);
  return { principal: claims.principal, auditor: await isAuditor(ctx, claims.principal), expires_at, token: session };
}

/** The session a cookie carries, or UNAUTHENTICATED (expired, signed out, forged, or its principal revoked since). */
export async function consoleSession(ctx: WritContext, token: string): Promise<ConsoleSession> {
  const now = ctx.clock.now();
  const claims = verifyConsoleToken(token, 'session', { keys: ctx.keys, audience: ctx.config.audience, now });
  if ('refused' in claims) throw new WritError('UNAUTHENTICATED', `console session refused: ${claims.refused}; sign in again with a link from \`writ console\``);
  // The store judges, by its clock (PostgreSQL: the database's, read by the statement that looks for the
  // sign-out, no query more): a replica whose clock is behind would otherwise honour a session whose
  // sign-out (spent until the session's expiry) the database's clock has already let lapse.
  const why = await ctx.replay.wouldRefuse(SESSION_NAMESPACE, claims.jti, claims.expiresAt, now);
  if (why?.reason === 'spent') throw new WritError('UNAUTHENTICATED', 'console session was signed out');
  if (why) throw sessionExpired(claims.expiresAt, why.storeNow, now);
  await livePrincipal(ctx, claims.principal, 'UNAUTHENTICATED');
  return { principal: claims.principal, auditor: await isAuditor(ctx, claims.principal), expires_at: claims.expiresAt, token };
}

/** A session live by this replica's clock, expired by the store's: its clock is behind the database's (beyond noise). */
function sessionExpired(expiresAt: number, storeNow: number, now: number): WritError {
  if (storeNow - now <= CLOCK_NOISE_MS) return new WritError('UNAUTHENTICATED', 'console session refused: it expired; sign in again with a link from `writ console`');
  return new WritError('UNAUTHENTICATED', `${behindDatabase('console session', expiresAt, storeNow, now)}; sign in again with a link from \`writ console\``, clockOffsetDetail(storeNow, now));
}

/** Signs a session out: its id is spent, so the cookie is refused from now on by every process. */
export async function endConsoleSession(ctx: WritContext, session: ConsoleSession): Promise<void> {
  const claims = verifyConsoleToken(session.token, 'session', { keys: ctx.keys, audience: ctx.config.audience, now: ctx.clock.now() });
  if ('refused' in claims) return;
  await ctx.store.readWrite((tx) => tx.singleUse.spend(SESSION_NAMESPACE, claims.jti, claims.expiresAt, ctx.clock.now()));
}

/**
 * Whether `principal` may read about every principal: governance, or a valid chain whose scope gives
 * `audit_read` on a pattern covering `audit:principal:*` in every environment (environments `*`). One
 * limited to `staging` makes no auditor: an auditor reads the graph and every receipt, which are tied
 * to no one environment.
 */
export async function isAuditor(ctx: WritContext, principal: string): Promise<boolean> {
  if (principal === GOVERNANCE_ID) return true;
  return (await liveScopes(ctx, principal, { action: AUDIT_READ, environment: EVERY_ENVIRONMENT })).scopes.some(({ scope }) => auditsEveryone(scope));
}

async function livePrincipal(ctx: WritContext, id: string, code: 'UNKNOWN_PRINCIPAL' | 'LOGIN_LINK_INVALID' | 'UNAUTHENTICATED'): Promise<void> {
  const p = (await ctx.graph.current()).principal(id);
  if (!p) throw new WritError(code, `no principal "${id}"`);
  // Whatever time it was recorded at: a replica whose clock is ahead may have recorded it.
  if (p.revoked_at !== null) throw new WritError(code, `principal ${id} is revoked`);
}
