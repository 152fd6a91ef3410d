export type { WritContext, ServiceObserver, AbandonedAcquisition } from './context.js';
export { forOneOperation } from './context.js';
export { openWrit, openStore, migrateStore, verifyPostgresReceipts, type OpenedWrit } from './open.js';
export { STORE_MARK_FILE, MARK_INTERVAL_MS, measureStore, markStore, readStoreMarks, checkStoreMark, writeStoreMark, type StoreFigures } from './store-mark.js';
export { addGovernanceKey, ensureGovernance, readAdminCredential, adminCredentialPath, type AdminCredential } from './bootstrap.js';
export { registerPrincipal, revokePrincipal, getPrincipal, type PrincipalInput } from './principals.js';
export {
  createGrant, createDelegation, createOwnership, createApproval, createPreemption, revokeEdge,
  type GrantInput, type DelegationInput, type OwnershipInput, type ApprovalInput, type PreemptionInput, type EdgeResult,
} from './edges.js';
export { decide, explain, type DecisionRequestInput, type DecisionOutcome, type DecideOptions, type Explanation } from './decide.js';
export { evaluateAccess, evaluateAccessBatch, toDecisionRequest } from './authzen.js';
export { explainForEach, searchSubjects, searchResources, searchActions } from './authzen-search.js';
export { mayAskAbout, checkMayAskAbout, whomMayAsk, mayReadEdge, readableEdge, unknownEdge, AUDIT_READ, auditKey, EVERY_ENVIRONMENT, type AsksAbout } from './ask-about.js';
export { applyManifest, manifestOf, manifestYaml, readManifest, type GraphManifest, type ApplyReport } from './manifest.js';
export { exportGraph, graphAt, graphEvents, graphDiff, revocationOf, type GraphEventSummary, type GraphDiff, type Revocation } from './graph-queries.js';
export { canonicalResource, checkQuerySpelling, checkResourceType, environmentProblem, resourceTypeOf } from './resources.js';
export { parseTime } from './time.js';
export { acquireLeases, abandonGrant, CallerNoLongerValid, renewLease, releaseLease, listLeases, waitQueues, verifyDecisionFor, type LeaseRequestInput, type LeaseOutcome, type AcquireOptions, type LeaseListQuery, type LeaseListPage } from './leases.js';
export { declareIncident, resolveIncident, activeIncidents, type Incident } from './incidents.js';
export { reconcileReceipts } from './reconcile.js';
export { checkDatabaseClock, checkStoreAnswers, READINESS_TIMEOUT_MS } from './readiness.js';
export { CLOCK_SAMPLE_INTERVAL_MS, DatabaseClock, describeOffset, type ClockOffset, type ClockState, type DatabaseClockOptions } from './database-clock.js';
export { performAction, type ActionInput, type ActionCredentials, type ActionOutcome, type ActionTimings } from './actions.js';
export { policyImpact, recentDecisionFailures, type RecentDecisionsCheck, type RecentDecisionFailure, type PolicyImpactReport, type PolicyImpactOptions, type PolicyFailure, type PolicyFlip, type StrandedEdge } from './policy-impact.js';
export { analyseImpact, type ImpactChange, type ImpactReport, type PrincipalImpact, type CapabilityDelta, type LeaseImpact, type EdgeImpact } from './impact.js';
export { whyReceipt, noReceipt, capabilitiesOf, capabilitiesIn, orphansIn, expiringEdges, orphanedDelegations, type WhyReport, type Capability, type Orphan } from './audit-queries.js';
export { keyRingCheckpointSigner, signCheckpoint, verifyCheckpoint } from './checkpoint-signer.js';
export { issueLoginToken, exchangeLoginToken, consoleSession, endConsoleSession, isAuditor, LOGIN_LINK_TTL_MS, CONSOLE_SESSION_TTL_MS, type ConsoleSession } from './console-sessions.js';
export { openCallerSession, MIN_CALLER_SESSION_TTL_MS, type CallerSessionInput, type OpenedCallerSession } from './caller-sessions.js';
