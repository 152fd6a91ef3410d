import { graphEvents } from './001-graph.js';
import { replayGuard } from './002-replay.js';
import { leases } from './003-leases.js';
import { receipts } from './004-receipts.js';
import { incidents } from './005-incidents.js';
import { leaseAuthority } from './006-lease-authority.js';
import { leaseWritePath } from './007-lease-write-path.js';
import { receiptWritePath } from './008-receipt-write-path.js';
import { epochBumps } from './009-epoch-bumps.js';
import { receiptCheckpoints } from './010-receipt-checkpoints.js';
import { receiptChains } from './011-receipt-chains.js';
import { walRestarts } from './012-wal-restarts.js';
import { incidentEnvironments } from './013-incident-environments.js';
import { storeMoves } from './014-store-moves.js';
import { epochFloorHighest } from './015-epoch-floor-highest.js';
import { storeMovePending } from './016-store-move-pending.js';
import { graphEventsAppendOnly } from './017-graph-events-append-only.js';
import { receiptDecisionIndex } from './018-receipt-decision-index.js';
import { receiptDecisionFromOldWriters } from './019-receipt-decision-from-old-writers.js';
import { graphEventChain } from './020-graph-event-chain.js';
import { leaseKeysHeldUntil } from './021-lease-keys-held-until.js';
import { receiptCheckpointTurn } from './022-receipt-checkpoint-turn.js';
import type { Migration } from './types.js';

/** Numbered, append-only. Never edit a migration that has shipped; add the next number. */
export const MIGRATIONS: readonly Migration[] = [graphEvents, replayGuard, leases, receipts, incidents, leaseAuthority, leaseWritePath, receiptWritePath, epochBumps, receiptCheckpoints, receiptChains, walRestarts, incidentEnvironments, storeMoves, epochFloorHighest, storeMovePending, graphEventsAppendOnly, receiptDecisionIndex, receiptDecisionFromOldWriters, graphEventChain, leaseKeysHeldUntil, receiptCheckpointTurn];
