/**
 * Signed decisions and authenticated callers: the decision signing keys and their JWKS, signing and
 * verifying decision tokens, binding a decision to one request, and caller assertions.
 */
export { KeyRing, type KeyRingOptions, type SigningKey } from './key-ring.js';
export { writePrivateFile, damagedKeysMessage, type DamagedKeyFile } from './key-files.js';
export { ed25519, opensslEd25519, useEd25519, type Ed25519 } from './ed25519.js';
export { countWorkInFlight, publicKeyFromJwk, signatureChecks } from './jws.js';
export {
  DECISION_ALG,
  DECISION_ISSUER,
  DECISION_TYP,
  type DecisionClaims,
  type DecisionObligations,
} from './decision-claims.js';
export { signDecision, type DecisionSigner } from './decision-token.js';
export { verifyDecision, type DecisionKeyResolver, type DecisionKeys, type VerifyDecisionOptions } from './decision-verify.js';
export { checkDecisionBinding, type DecisionRequest } from './decision-binding.js';
export {
  ASSERTION_ALGORITHMS,
  authenticateCaller,
  callerNoLongerValid,
  callerOf,
  isReplayedAssertion,
  releaseAssertion,
  spendAssertion,
  verifyCallerAssertion,
  type AuthenticatedCaller,
  type CallerAuthDeps,
} from './caller-auth.js';
export {
  agreeSessionKey,
  CallerSessions,
  callerSessionsOf,
  deriveSealKey,
  deriveSessionKey,
  SESSION_TOKEN_PREFIX,
  sessionsDisabled,
  type CallerSession,
} from './caller-session.js';
export { behindDatabase, CLOCK_NOISE_MS, clockOffsetDetail, decisionSpendRefused } from './clock-refusal.js';
export { ReplayGuard, PresentedIds, type SingleUseStore, type SingleUseTx, type SpendRefusal } from './single-use.js';
export { newConsoleTokenId, signConsoleToken, verifyConsoleToken, type ConsoleClaims, type ConsoleTokenKind } from './console-token.js';
