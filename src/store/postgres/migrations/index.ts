import { initial } from './001-initial.js';
import { epochBumps } from './002-epoch-bumps.js';
import { receiptCheckpoints } from './003-receipt-checkpoints.js';
import { receiptChains } from './004-receipt-chains.js';
import { receiptHashInSql } from './005-receipt-hash-in-sql.js';
import { incidentEnvironments } from './006-incident-environments.js';
import { epochFloorHighest } from './007-epoch-floor-highest.js';
import { graphEventsAppendOnly } from './008-graph-events-append-only.js';
import { leaseTokenUsedOnce } from './009-lease-token-used-once.js';
import { receiptDecisionIndex } from './010-receipt-decision-index.js';
import { leaseTokenTwins } from './011-lease-token-twins.js';
import { receiptDecisionFromOldWriters } from './012-receipt-decision-from-old-writers.js';
import { graphEventChain } from './013-graph-event-chain.js';
import { leaseKeyReads } from './014-lease-key-reads.js';
import { receiptCheckpointIncremental } from './015-receipt-checkpoint-incremental.js';
import { leaseKeyFamilies } from './016-lease-key-families.js';
import type { PostgresMigration } from './types.js';

/** Numbered, append-only. Never edit a migration that has shipped; add the next number. */
export const POSTGRES_MIGRATIONS: readonly PostgresMigration[] = [
  initial, epochBumps, receiptCheckpoints, receiptChains, receiptHashInSql, incidentEnvironments, epochFloorHighest, graphEventsAppendOnly,
  leaseTokenUsedOnce, receiptDecisionIndex, leaseTokenTwins, receiptDecisionFromOldWriters, graphEventChain, leaseKeyReads, receiptCheckpointIncremental,
  leaseKeyFamilies,
];
