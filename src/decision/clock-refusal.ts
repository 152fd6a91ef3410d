import { WritError } from '../errors.js';
import type { SpendRefusal } from './single-use.js';

/** ms since the epoch as RFC 3339, for a message (a claim out of Date's range as the number it is). */
export function instant(ms: number): string {
  const at = new Date(ms);
  return Number.isNaN(at.getTime()) ? `${ms / 1000} s after the epoch` : at.toISOString();
}

/**
 * Why a credential that Writ's clock finds live (until `until`, ms) is refused as expired by the
 * database's clock (`databaseNow`), and what to do: this replica's clock is behind the database's.
 * Single-use ids are spent by the later of the two clocks (refusing more is the safe side), so such a
 * replica refuses everything made to its own clock once the gap is more than its lifetime.
 */
export function behindDatabase(what: string, until: number, databaseNow: number, now: number): string {
  return `${what} expired by the database's clock: it was good until ${instant(until)}, ${((databaseNow - until) / 1000).toFixed(1)} s before the database's time ${instant(databaseNow)}, `
    + `while this replica's clock said ${instant(now)}, ${((databaseNow - now) / 1000).toFixed(1)} s behind the database's. Single-use ids are judged by the database's clock on every replica: `
    + 'set this replica\'s clock right (NTP); until then it refuses what was made to its own clock (GET /readyz and the metric writ_clock_offset_seconds show the offset)';
}

/** The problem member that says how far this replica's clock was from the database's at a refusal (ms, negative: behind). */
export const clockOffsetDetail = (databaseNow: number, now: number) => ({ clock_offset_ms: Math.round(now - databaseNow) });

/**
 * The refusal of a decision's spend: DECISION_REPLAYED (with `replayedMessage`) when it was used
 * already; DECISION_EXPIRED when the store's clock finds it expired though Writ's does not (a replica
 * whose clock is behind the database's), saying so, where it used to be taken for a replay.
 */
export function decisionSpendRefused(why: SpendRefusal, decisionId: string, expiresAt: number, now: number, replayedMessage: string): WritError {
  if (why.reason === 'spent') return new WritError('DECISION_REPLAYED', replayedMessage);
  if (why.storeNow - now <= CLOCK_NOISE_MS) return new WritError('DECISION_EXPIRED', `decision ${decisionId} expired before it was spent`, { decision_id: decisionId });
  return new WritError('DECISION_EXPIRED', behindDatabase(`decision ${decisionId}`, expiresAt, why.storeNow, now), { decision_id: decisionId, ...clockOffsetDetail(why.storeNow, now) });
}

/**
 * Why a credential dated after this verifier's time (`claim`, ms) by more than the skew tolerated is
 * refused, and the likely cause: a credential is made just before it is used, so `maker` (the clock that
 * made it) is ahead of this one's. `here` names the clock `now` is ("Writ's" in the server).
 */
export function issuedAhead(claim: string, atMs: number, now: number, toleranceMs: number, maker: string, remedy: string, here = 'Writ\'s'): string {
  return `: its ${claim} ${instant(atMs)} is ${((atMs - now) / 1000).toFixed(1)} s after ${here} time ${instant(now)}, more than the ${toleranceMs / 1000} s `
    + `of clock skew tolerated; ${maker} is probably ahead: set it right (NTP) and ${remedy}`;
}

/**
 * What to add to a refusal that blames another's clock (`other`: "the caller's") when this replica's own
 * clock is off its database's by more than the tolerance: `behind` for another that looks ahead, `ahead`
 * for one that looks behind (empty otherwise). Another whose clock is right then looks wrong to this replica.
 */
export function replicaClock(offsetMs: number | undefined, toleranceMs: number, other: string): { behind: string; ahead: string } {
  if (offsetMs === undefined || Math.abs(offsetMs) <= toleranceMs) return { behind: '', ahead: '' };
  const note = `; but this replica's own clock is ${(Math.abs(offsetMs) / 1000).toFixed(1)} s ${offsetMs < 0 ? 'behind' : 'ahead of'} its database's (GET /readyz), `
    + `so if ${other} clock is right it is this replica's that is wrong: set it right (NTP)`;
  return offsetMs < 0 ? { behind: note, ahead: '' } : { behind: '', ahead: note };
}

/**
 * The skew tolerated between a credential's maker's clock and its verifier's, ms: a caller assertion's
 * (caller-auth.ts, its default) and a decision issued after the verifier's time (decision-verify.ts).
 */
export const CLOCK_SKEW_TOLERATED_MS = 5_000;

/** A gap between the store's clock and Writ's below this is a spend racing an expiry, not a clock to fix. */
export const CLOCK_NOISE_MS = 1_000;
