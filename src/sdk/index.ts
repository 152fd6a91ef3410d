/**
 * Writ's agent SDK (`import { WritClient } from 'writ/sdk'`). No server code is imported.
 */
export {
  WritClient, type WritClientOptions, type Decision, type DecisionRequest, type Lease, type LeaseOptions, type LeaseScope, type ActRequest, type ScopedActRequest, type Receipt,
  type JobScope, type RunExclusiveOptions, type RunExclusiveResult,
  type Capabilities, type ChainEdge, type ChainVerdict, type DelegateRequest, type DelegationBody, type Edge, type EdgeRevoked, type EdgeWritten, type ExplainRequest, type Explanation, type Incident, type ScopeInput, type LeaseGrant, type LeaseRecord, type LeaseRelease, type LeaseRenewal, type LeaseStreamReply, type LeaseStreamRequest, type Obligations, type ReceiptEntry, type WireTime,
} from './client.js';
/** A new lease token for `acquireLease({token})` and the lease stream's `acquire`: one per lease, never reused (asking again with it means "the same acquisition"). */
export { newLeaseToken } from '../wire/lease-token.js';
export { LeaseStream, LeaseStreamClosedError, type LeaseHandle, type LeaseStreamOptions } from './lease-stream.js';
export { createCallerAssertion, createApprovalAssertion, generatePrincipalKeyPair, type ApprovalRequest, type CallerAssertionOptions, type PrincipalKeyPair } from './assertion.js';
export { backoffCeiling, backoffDelay, type BackoffOptions } from './backoff.js';
export * from './errors.js';
export type { DecisionClaims } from '../decision/decision-claims.js';
