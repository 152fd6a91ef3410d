/** Receipts and audit: the hash-chained receipt log, its storage port and restart reconciliation. */
export { ReceiptLog, type ArchiveResult, type ReceiptLogOptions, type ReceiptTx } from './receipt-log.js';
export { verifyArchiveFile, type ArchiveHeader, type ArchiveVerdict } from './archive-file.js';
export {
  CHECKPOINT_TYP,
  headsRoot,
  headsRootYielding,
  isHeadsCheckpoint,
  signedPayloadOf,
  type ArchivePayload,
  type ArchiveRange,
  type CheckpointLeaf,
  type CheckpointPayload,
  type CheckpointSigner,
  type LegacyCheckpointPayload,
  type SignedPayload,
  type StoredCheckpoint,
  type StoredLegacyCheckpoint,
} from './checkpoint.js';
export { reconcilePending, type ReconcileReport, type UpstreamLookup } from './reconcile.js';
export { canonicalJson } from './canonical-json.js';
export { GENESIS_HASH, LEGACY_CHAIN, chainEntryHash, chainOf, entryHash, hashOf, linkEntry, requestHash, type ChainHead, type ChainId, type ReceiptChainVerdict } from './hash-chain.js';
export { foldReceipt } from './fold.js';
export { verifyGraphEvents, type GraphEventLink, type GraphEventsVerdict } from './graph-chain.js';
export {
  ENTRY_KINDS,
  RECEIPT_PAGE,
  DECISION_ID_FILTER,
  RECEIPT_STATUSES,
  type EntryKind,
  type Receipt,
  type ReceiptCompletion,
  type ReceiptConflict,
  type ReceiptEntryRef,
  type ReceiptError,
  type ReceiptIntent,
  type PresentedLease,
  type PresentedLeaseKey,
  type ReceiptPage,
  type ReceiptQuery,
  type ReceiptRejection,
  type ReceiptStatus,
  type ReconcileOutcome,
  type StoredEntry,
} from './receipt.js';
export type { FoundReceipt, IndexedReceipt, IntentAppend, NewEntry, ReceiptFilter, ReceiptIndexRow, ReceiptRepository, SettlementAppend, SettlingEntry } from './repository.js';
