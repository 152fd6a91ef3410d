import { verifyDecision, type DecisionClaims } from '../decision/index.js';
import type { WritContext } from './context.js';

/**
 * Verifies a decision presented to this Writ (a write through the gateway, a lease, an incident) with
 * what every server-side check passes: the gateway's audience; the default skew tolerated for a decision
 * issued after `now` (DECISION_ISSUED_AHEAD_MS, as for caller assertions); this deployment's decision TTL
 * as the longest lifetime; and this replica's measured offset from its database's clock, for the words
 * of a refusal. Expiry stays exact (no tolerance): the single-use spend judges it by the database's clock.
 */
export function verifyPresentedDecision(ctx: WritContext, token: string, now: number): Promise<DecisionClaims> {
  return verifyDecision(token, {
    keys: ctx.keys,
    audience: ctx.config.gatewayAudience,
    now,
    maxLifetimeMs: ctx.config.decisionTtlMs,
    clockOffsetMs: ctx.databaseClock?.latest()?.offsetMs,
  });
}
