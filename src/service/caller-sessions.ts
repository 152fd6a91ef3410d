/**
 * Caller sessions (POST /v1/sessions): a caller authenticated by an ordinary assertion agrees a session
 * key with Writ (X25519) and gets a sealed session token; its later requests carry an HS256 request
 * token MACed with that key instead of an Ed25519 signature each (decision/caller-session.ts). The
 * opening assertion is spent like any other; a refused opening spends nothing.
 */
import { agreeSessionKey, callerSessionsOf, releaseAssertion, sessionsDisabled, spendAssertion, type AuthenticatedCaller } from '../decision/index.js';
import { WritError } from '../errors.js';
import type { WritContext } from './context.js';

export const MIN_CALLER_SESSION_TTL_MS = 1_000;

export interface CallerSessionInput {
  public_key: { kty: 'OKP'; crv: 'X25519'; x: string };
  ttl_ms?: number;
}

export interface OpenedCallerSession {
  session: string;
  public_key: { kty: 'OKP'; crv: 'X25519'; x: string };
  principal: string;
  kid: string;
  /** ms since the epoch. */
  expires_at: number;
}

/** Opens a session for a verified (unspent) caller assertion: spends it and seals the session. */
export async function openCallerSession(ctx: WritContext, caller: AuthenticatedCaller, input: CallerSessionInput): Promise<OpenedCallerSession> {
  let agreed: { serverX: string; key: Buffer };
  let ttlMs: number;
  try {
    const maxTtlMs = ctx.config.callerSessionMaxTtlMs;
    if (maxTtlMs === 0) throw sessionsDisabled();
    ttlMs = input.ttl_ms ?? maxTtlMs;
    if (!Number.isInteger(ttlMs) || ttlMs < MIN_CALLER_SESSION_TTL_MS || ttlMs > maxTtlMs) {
      throw new WritError('MALFORMED_REQUEST', `ttl_ms must be an integer from ${MIN_CALLER_SESSION_TTL_MS} to ${maxTtlMs} (WRIT_CALLER_SESSION_MAX_TTL_MS), got ${input.ttl_ms}`);
    }
    agreed = agreeSessionKey(input.public_key.x);
  } catch (e) {
    // Refused before anything was done: the assertion may be sent again (with a good body).
    releaseAssertion(ctx.replay, caller);
    throw e;
  }
  await ctx.replay.store.readWrite((tx) => spendAssertion(ctx.replay, tx, caller, ctx.clock.now()));
  const now = ctx.clock.now();
  const expires_at = now + ttlMs;
  const session = callerSessionsOf(ctx.keys).seal({ principal: caller.principal, kid: caller.kid, key: caller.key, iatMs: now, expMs: expires_at, k: agreed.key });
  return { session, public_key: { kty: 'OKP', crv: 'X25519', x: agreed.serverX }, principal: caller.principal, kid: caller.kid, expires_at };
}
