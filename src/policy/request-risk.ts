import type { PolicyData } from './types.js';

/**
 * The risk the policy judges a request at: its action's catalogue risk (0 for an action not in the
 * catalogue, which the policy denies anyway), raised by the caller's declared risk, never lowered —
 * lib/decide.rego's `risk`, which test/policy/risk-agrees checks this against. Decide-mode chain
 * resolution skips edges whose risk_max is below it (no valid chain holds one), so that chains too low
 * in risk cannot fill the chains judged ahead of one that is not. A policy may judge a request at a
 * higher risk than this, never at a lower one.
 */
export function requestRisk(data: PolicyData, action: string, declared: number | null): number {
  const catalogued = Object.hasOwn(data.writ.actions, action) ? data.writ.actions[action]!.risk : 0;
  return declared === null ? catalogued : Math.max(catalogued, declared);
}
