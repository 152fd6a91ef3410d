import { ERROR_CATALOGUE, type ErrorCode, type WritError } from '../errors.js';
import type { Edge } from '../wire/v1.js';

/** A problem+json answer from Writ, as a typed error. `code` is stable: switch on it. */
export class WritApiError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly detail: string;
  /** The rest of the problem document (holder, retry_after_ms, receipt_id, violations, …). */
  readonly problem: Record<string, unknown>;
  /** Retry-After in ms, when the server sent one (RESOURCE_BUSY, LEASE_WAIT_TIMEOUT, OVERLOADED). */
  readonly retryAfterMs: number | null;
  /** Who holds the busy lease (RESOURCE_BUSY, LEASE_WAIT_TIMEOUT); null when the problem names no holder. */
  readonly holder: string | null;
  constructor(code: ErrorCode, status: number, detail: string, problem: Record<string, unknown> = {}, retryAfterMs: number | null = null) {
    super(`${code}: ${detail}`);
    this.name = new.target.name;
    this.code = code;
    this.status = status;
    this.detail = detail;
    this.problem = problem;
    this.retryAfterMs = retryAfterMs;
    this.holder = typeof problem.holder === 'string' ? problem.holder : null;
  }
}

type ErrorClass = new (status: number, detail: string, problem?: Record<string, unknown>, retryAfterMs?: number | null) => WritApiError;

function define<C extends ErrorCode>(code: C) {
  const cls = class extends WritApiError {
    declare readonly code: C;
    constructor(status: number, detail: string, problem: Record<string, unknown> = {}, retryAfterMs: number | null = null) {
      super(code, status, detail, problem, retryAfterMs);
    }
  };
  // A class expression returned from a function is anonymous; without this `err.name` would be ''.
  Object.defineProperty(cls, 'name', { value: `${code.toLowerCase().replace(/(^|_)([a-z])/g, (_, __, c: string) => c.toUpperCase())}Error` });
  return cls;
}

export const MalformedRequestError = define('MALFORMED_REQUEST');
export const LoginLinkInvalidError = define('LOGIN_LINK_INVALID');
export const LoginLinkSpentError = define('LOGIN_LINK_SPENT');
export const SessionReadOnlyError = define('SESSION_READ_ONLY');
export const NestingTooDeepError = define('NESTING_TOO_DEEP');
export const UnsupportedMediaTypeError = define('UNSUPPORTED_MEDIA_TYPE');
export const PayloadTooLargeError = define('PAYLOAD_TOO_LARGE');
export const UnprocessableError = define('UNPROCESSABLE');
export const UnknownPrincipalError = define('UNKNOWN_PRINCIPAL');
export const UnknownResourceError = define('UNKNOWN_RESOURCE');
export const UnknownEdgeError = define('UNKNOWN_EDGE');
export const NotFoundError = define('NOT_FOUND');
export const AlreadyExistsError = define('ALREADY_EXISTS');
export const UnauthenticatedError = define('UNAUTHENTICATED');
export const CallerSessionInvalidError = define('CALLER_SESSION_INVALID');
export const CallerSessionsDisabledError = define('CALLER_SESSIONS_DISABLED');
export const ForbiddenError = define('FORBIDDEN');
export const AttenuationViolationError = define('ATTENUATION_VIOLATION');
export const OwnershipConflictError = define('OWNERSHIP_CONFLICT');
export const TooManyDelegationsError = define('TOO_MANY_DELEGATIONS');
export const BudgetExceededError = define('BUDGET_EXCEEDED');
export const PolicyUnavailableError = define('POLICY_UNAVAILABLE');
export const DecisionInvalidError = define('DECISION_INVALID');
export const DecisionExpiredError = define('DECISION_EXPIRED');
export const DecisionMismatchError = define('DECISION_MISMATCH');
export const DecisionReplayedError = define('DECISION_REPLAYED');
export const AuthorityRevokedError = define('AUTHORITY_REVOKED');
export const OwnerChangedError = define('OWNER_CHANGED');
export const ResourceBusyError = define('RESOURCE_BUSY');
export const LeaseRequiredError = define('LEASE_REQUIRED');
export const LeaseExpiredError = define('LEASE_EXPIRED');
export const LeaseNotFoundError = define('LEASE_NOT_FOUND');
export const LeaseTokenMismatchError = define('LEASE_TOKEN_MISMATCH');
export const LeasePreemptedError = define('LEASE_PREEMPTED');
export const LeaseWaitTimeoutError = define('LEASE_WAIT_TIMEOUT');
export const StaleFencingEpochError = define('STALE_FENCING_EPOCH');
export const VersionConflictError = define('VERSION_CONFLICT');
export const VersionRequiredError = define('VERSION_REQUIRED');
export const NoIncidentError = define('NO_INCIDENT');
export const IdempotencyMismatchError = define('IDEMPOTENCY_MISMATCH');
export const UpstreamFailedError = define('UPSTREAM_FAILED');
export const UpstreamTimeoutError = define('UPSTREAM_TIMEOUT');
export const NoUpstreamError = define('NO_UPSTREAM');
export const RateLimitedError = define('RATE_LIMITED');
export const OverloadedError = define('OVERLOADED');
export const ClockSkewError = define('CLOCK_SKEW');
export const SchemaTooNewError = define('SCHEMA_TOO_NEW');
export const SchemaDivergedError = define('SCHEMA_DIVERGED');
export const StoreFailedError = define('STORE_FAILED');
export const StoreInUseError = define('STORE_IN_USE');
export const StoreDamagedError = define('STORE_DAMAGED');
export const StoreMovedError = define('STORE_MOVED');
export const StoreBehindMarkError = define('STORE_BEHIND_MARK');
export const GraphLogUnhashedError = define('GRAPH_LOG_UNHASHED');
export const ReceiptDamagedError = define('RECEIPT_DAMAGED');
export const InternalError = define('INTERNAL');

/**
 * Each class is also a type (`catch (e) { if (e instanceof VersionConflictError) … }`, `let e: VersionConflictError`);
 * test/sdk/typed-errors.test.ts type-checks a use of each catalogued code's.
 */
export type MalformedRequestError = InstanceType<typeof MalformedRequestError>;
export type NestingTooDeepError = InstanceType<typeof NestingTooDeepError>;
export type UnsupportedMediaTypeError = InstanceType<typeof UnsupportedMediaTypeError>;
export type PayloadTooLargeError = InstanceType<typeof PayloadTooLargeError>;
export type UnprocessableError = InstanceType<typeof UnprocessableError>;
export type UnknownPrincipalError = InstanceType<typeof UnknownPrincipalError>;
export type UnknownResourceError = InstanceType<typeof UnknownResourceError>;
export type UnknownEdgeError = InstanceType<typeof UnknownEdgeError>;
export type NotFoundError = InstanceType<typeof NotFoundError>;
export type AlreadyExistsError = InstanceType<typeof AlreadyExistsError>;
export type UnauthenticatedError = InstanceType<typeof UnauthenticatedError>;
export type CallerSessionInvalidError = InstanceType<typeof CallerSessionInvalidError>;
export type CallerSessionsDisabledError = InstanceType<typeof CallerSessionsDisabledError>;
export type ForbiddenError = InstanceType<typeof ForbiddenError>;
export type AttenuationViolationError = InstanceType<typeof AttenuationViolationError>;
export type OwnershipConflictError = InstanceType<typeof OwnershipConflictError>;
export type TooManyDelegationsError = InstanceType<typeof TooManyDelegationsError>;
export type BudgetExceededError = InstanceType<typeof BudgetExceededError>;
export type PolicyUnavailableError = InstanceType<typeof PolicyUnavailableError>;
export type DecisionInvalidError = InstanceType<typeof DecisionInvalidError>;
export type DecisionExpiredError = InstanceType<typeof DecisionExpiredError>;
export type DecisionMismatchError = InstanceType<typeof DecisionMismatchError>;
export type DecisionReplayedError = InstanceType<typeof DecisionReplayedError>;
export type AuthorityRevokedError = InstanceType<typeof AuthorityRevokedError>;
export type OwnerChangedError = InstanceType<typeof OwnerChangedError>;
export type ResourceBusyError = InstanceType<typeof ResourceBusyError>;
export type LeaseRequiredError = InstanceType<typeof LeaseRequiredError>;
export type LeaseExpiredError = InstanceType<typeof LeaseExpiredError>;
export type LeaseNotFoundError = InstanceType<typeof LeaseNotFoundError>;
export type LeaseTokenMismatchError = InstanceType<typeof LeaseTokenMismatchError>;
export type LeasePreemptedError = InstanceType<typeof LeasePreemptedError>;
export type LeaseWaitTimeoutError = InstanceType<typeof LeaseWaitTimeoutError>;
export type StaleFencingEpochError = InstanceType<typeof StaleFencingEpochError>;
export type VersionConflictError = InstanceType<typeof VersionConflictError>;
export type VersionRequiredError = InstanceType<typeof VersionRequiredError>;
export type NoIncidentError = InstanceType<typeof NoIncidentError>;
export type IdempotencyMismatchError = InstanceType<typeof IdempotencyMismatchError>;
export type UpstreamFailedError = InstanceType<typeof UpstreamFailedError>;
export type UpstreamTimeoutError = InstanceType<typeof UpstreamTimeoutError>;
export type NoUpstreamError = InstanceType<typeof NoUpstreamError>;
export type RateLimitedError = InstanceType<typeof RateLimitedError>;
export type OverloadedError = InstanceType<typeof OverloadedError>;
export type SchemaTooNewError = InstanceType<typeof SchemaTooNewError>;
export type SchemaDivergedError = InstanceType<typeof SchemaDivergedError>;
export type StoreFailedError = InstanceType<typeof StoreFailedError>;
export type StoreInUseError = InstanceType<typeof StoreInUseError>;
export type StoreDamagedError = InstanceType<typeof StoreDamagedError>;
export type StoreMovedError = InstanceType<typeof StoreMovedError>;
export type StoreBehindMarkError = InstanceType<typeof StoreBehindMarkError>;
export type GraphLogUnhashedError = InstanceType<typeof GraphLogUnhashedError>;
export type ClockSkewError = InstanceType<typeof ClockSkewError>;
export type ReceiptDamagedError = InstanceType<typeof ReceiptDamagedError>;
export type InternalError = InstanceType<typeof InternalError>;
export type LoginLinkInvalidError = InstanceType<typeof LoginLinkInvalidError>;
export type LoginLinkSpentError = InstanceType<typeof LoginLinkSpentError>;
export type SessionReadOnlyError = InstanceType<typeof SessionReadOnlyError>;

/** code → class; a test checks that every catalogued code has its class. */
export const ERROR_CLASSES: Record<ErrorCode, ErrorClass> = {
  MALFORMED_REQUEST: MalformedRequestError, NESTING_TOO_DEEP: NestingTooDeepError, UNSUPPORTED_MEDIA_TYPE: UnsupportedMediaTypeError, PAYLOAD_TOO_LARGE: PayloadTooLargeError, UNPROCESSABLE: UnprocessableError,
  UNKNOWN_PRINCIPAL: UnknownPrincipalError, UNKNOWN_RESOURCE: UnknownResourceError, UNKNOWN_EDGE: UnknownEdgeError,
  NOT_FOUND: NotFoundError, ALREADY_EXISTS: AlreadyExistsError, UNAUTHENTICATED: UnauthenticatedError, FORBIDDEN: ForbiddenError,
  CALLER_SESSION_INVALID: CallerSessionInvalidError, CALLER_SESSIONS_DISABLED: CallerSessionsDisabledError,
  LOGIN_LINK_INVALID: LoginLinkInvalidError, LOGIN_LINK_SPENT: LoginLinkSpentError, SESSION_READ_ONLY: SessionReadOnlyError,
  ATTENUATION_VIOLATION: AttenuationViolationError, OWNERSHIP_CONFLICT: OwnershipConflictError, TOO_MANY_DELEGATIONS: TooManyDelegationsError,
  BUDGET_EXCEEDED: BudgetExceededError, POLICY_UNAVAILABLE: PolicyUnavailableError, DECISION_INVALID: DecisionInvalidError,
  DECISION_EXPIRED: DecisionExpiredError, DECISION_MISMATCH: DecisionMismatchError, DECISION_REPLAYED: DecisionReplayedError,
  AUTHORITY_REVOKED: AuthorityRevokedError, OWNER_CHANGED: OwnerChangedError, RESOURCE_BUSY: ResourceBusyError,
  LEASE_REQUIRED: LeaseRequiredError, LEASE_EXPIRED: LeaseExpiredError, LEASE_NOT_FOUND: LeaseNotFoundError,
  LEASE_TOKEN_MISMATCH: LeaseTokenMismatchError, LEASE_PREEMPTED: LeasePreemptedError, LEASE_WAIT_TIMEOUT: LeaseWaitTimeoutError,
  STALE_FENCING_EPOCH: StaleFencingEpochError, VERSION_CONFLICT: VersionConflictError, VERSION_REQUIRED: VersionRequiredError,
  NO_INCIDENT: NoIncidentError, IDEMPOTENCY_MISMATCH: IdempotencyMismatchError, UPSTREAM_FAILED: UpstreamFailedError,
  UPSTREAM_TIMEOUT: UpstreamTimeoutError, NO_UPSTREAM: NoUpstreamError, RATE_LIMITED: RateLimitedError, OVERLOADED: OverloadedError, CLOCK_SKEW: ClockSkewError,
  SCHEMA_TOO_NEW: SchemaTooNewError, SCHEMA_DIVERGED: SchemaDivergedError, STORE_FAILED: StoreFailedError, STORE_IN_USE: StoreInUseError, STORE_DAMAGED: StoreDamagedError, STORE_MOVED: StoreMovedError, STORE_BEHIND_MARK: StoreBehindMarkError, GRAPH_LOG_UNHASHED: GraphLogUnhashedError, RECEIPT_DAMAGED: ReceiptDamagedError, INTERNAL: InternalError,
};

/** Builds the typed error for a problem+json body. Unknown codes (a newer server) become WritApiError with INTERNAL. */
export function errorFromProblem(status: number, problem: Record<string, unknown>, retryAfterMs: number | null): WritApiError {
  const code = typeof problem.code === 'string' && problem.code in ERROR_CATALOGUE ? (problem.code as ErrorCode) : null;
  const detail = typeof problem.detail === 'string' ? problem.detail : `HTTP ${status}`;
  if (!code) return new WritApiError('INTERNAL', status, `${String(problem.code ?? 'unknown')}: ${detail}`, problem, retryAfterMs);
  return new ERROR_CLASSES[code](status, detail, problem, retryAfterMs);
}

/** The typed SDK error for a WritError thrown locally (e.g. by offline decision verification). */
export function errorFromWritError(e: WritError): WritApiError {
  return new ERROR_CLASSES[e.code](ERROR_CATALOGUE[e.code].status, e.message, e.details ?? {}, null);
}

/**
 * withDelegation could not revoke the delegation after its task: it may stay live until it expires (unless
 * the revocation landed with only its answer lost, or an edge above it is revoked). `taskSucceeded` says how the task ended: its `value`, or its `taskError`;
 * `cause` is why the revocation failed. Revoke it again with `revoke(edge.id, reason)`.
 */
export class DelegationNotRevokedError extends Error {
  readonly edge: Edge;
  readonly taskSucceeded: boolean;
  readonly value: unknown;
  readonly taskError: unknown;
  constructor(edge: Edge, outcome: { ok: true; value: unknown } | { ok: false; error: unknown }, cause: unknown) {
    super(`delegation ${edge.id} to ${edge.to} may still be live until ${edge.expires_at ?? 'it is revoked'}: revoking it after its task (${outcome.ok ? 'done' : 'failed'}) failed: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.name = 'DelegationNotRevokedError';
    this.edge = edge;
    this.taskSucceeded = outcome.ok;
    this.value = outcome.ok ? outcome.value : undefined;
    this.taskError = outcome.ok ? undefined : outcome.error;
  }
}

/**
 * `act` sent the write and got no answer (the connection failed or was cut, or a `fetch` given to the
 * client gave up): Writ may have written it, or not. Not a WritApiError, since Writ answered nothing. To
 * learn which, act again with the same request and `idempotencyKey`: Writ answers the first attempt's
 * receipt (`replayed` true: COMPLETED, or PENDING while it is under way) and writes nothing twice, or,
 * when the first attempt never arrived, writes now. `cause` is the transport's error.
 */
export class WriteOutcomeUnknownError extends Error {
  /** The Idempotency-Key the write was sent with (the SDK's random one unless the caller gave one). */
  readonly idempotencyKey: string;
  /** The decision the write was sent with (its receipt names it: `decision_id`); null when its token could not be read. */
  readonly decisionId: string | null;
  readonly resource: string;
  constructor(write: { idempotencyKey: string; decisionId: string | null; resource: string }, cause: unknown) {
    super(`the answer to the write on ${write.resource} was lost (${cause instanceof Error ? cause.message : String(cause)}): it may have been written. Act again with the same request and idempotencyKey '${write.idempotencyKey}' to get its receipt; nothing is written twice`, { cause });
    this.name = 'WriteOutcomeUnknownError';
    this.idempotencyKey = write.idempotencyKey;
    this.decisionId = write.decisionId;
    this.resource = write.resource;
  }
}

/**
 * `acquireLease` sent the acquisition and got no answer (the connection failed or was cut): Writ may have
 * granted the lease, or not. Not a WritApiError, since Writ answered nothing. Ask again with the same
 * decisions and `token`: Writ answers with the lease it granted (`replayed` true) while it is live, or takes
 * one now if the first request never arrived; nothing is held twice. (A lease granted and lapsed since is
 * LeaseExpiredError: ask with a new token.) `cause` is the transport's error.
 */
export class LeaseOutcomeUnknownError extends Error {
  /** The lease token the acquisition was sent with (a bearer secret: keep it out of logs). */
  readonly token: string;
  constructor(token: string, cause: unknown) {
    super(`the answer to the lease acquisition was lost (${cause instanceof Error ? cause.message : String(cause)}): it may have been granted. Ask again with the same decisions and this error's token to get that lease; nothing is held twice`, { cause });
    this.name = 'LeaseOutcomeUnknownError';
    this.token = token;
  }
}
