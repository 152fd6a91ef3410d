/** The lease manager: coordination leases, tokens, fencing epochs, the wait queue and preemption. */
export { LeaseManager, AcquisitionWithdrawn, checkEpochBump, LEASE_PAGE, MAX_EPOCH_MARGIN, type LeaseTx, type AlsoCommit } from './lease-manager.js';
export { canonicalKeyOrder, MAX_KEY_LENGTH, MAX_KEYS_PER_LEASE } from './canonical-order.js';
export { hashLeaseToken } from './token.js';
export { toLeaseRecord } from './lease-record.js';
export { DEFAULT_LEASE_OPTIONS } from './options.js';
export { checkBumpHeadroom, MAX_BUMPED_EPOCH, NEWCOMER_TICKET } from './repository.js';
export type {
  LeaseRepository,
  AcquireCommand,
  AcquireOutcome,
  RenewCommand,
  RenewOutcome,
  ReleaseCommand,
  ReleaseOutcome,
  LeaseRefusal,
  WaiterEntry,
  WaiterRow,
  KeyWaiterRow,
  HolderWaiting,
  LeaseKeyRow,
  LeaseKeyQuery,
  LeaseKeyPage,
  LeaseRow,
  LeaseState,
  FenceState,
  LeaseAuthorityRepository,
  IncidentRecord,
  IncidentRepository,
  EpochBump,
  EpochBumpCommand,
  EpochBumpKind,
} from './repository.js';
export type {
  AcquireRequest,
  LeaseGrant,
  PreemptedLease,
  RenewedLease,
  ReleasedLease,
  FenceRequest,
  FenceCheck,
  LeaseRecord,
  LeaseEvent,
  LeaseEventKind,
  LeaseManagerOptions,
} from './types.js';
