import { systemClock, type Clock } from '../clock.js';
import type { WritConfig } from '../config/index.js';
import { KeyRing } from '../decision/index.js';
import { LiveGraph } from '../graph/index.js';
import { openReloadingPolicyEngine } from '../policy/index.js';
import { startCheckpointer } from '../store/sqlite/checkpointer.js';
import { openDatabase } from '../store/sqlite/database.js';
import { SqliteGraphEventLog } from '../store/sqlite/graph-event-log.js';
import { GroupCommit } from '../store/sqlite/group-commit.js';
import { SqliteReplayGuard } from '../store/sqlite/replay-guard.js';
import { ensureGovernance } from './bootstrap.js';
import { LeaseManager } from '../lease/index.js';
import { ReceiptLog } from '../audit/index.js';
import { UpstreamRouter } from '../gateway/upstream-router.js';
import { SqliteLeaseRepository } from '../store/sqlite/lease-repository.js';
import { SqliteReceiptRepository } from '../store/sqlite/receipt-repository.js';
import { SqliteIncidentRepository } from '../store/sqlite/incident-repository.js';
import { SqliteLeaseAuthorityRepository } from '../store/sqlite/lease-authority-repository.js';
import { openDecisionLog, type DecisionLog } from '../decision-log/index.js';
import { silentObserver, type WritContext } from './context.js';
import { writVersion } from './version.js';

export interface OpenedWrit {
  ctx: WritContext;
  credentialPath: string;
  credentialCreated: boolean;
  close(): void;
}

/** Opens the store, replays the graph, loads keys and the policy bundle, and bootstraps governance. */
export async function openWrit(config: WritConfig, options: { clock?: Clock; upstreams?: UpstreamRouter; decisionLog?: DecisionLog } = {}): Promise<OpenedWrit> {
  const clock = options.clock ?? systemClock;
  const db = openDatabase(config.dbFile);
  const checkpointer = startCheckpointer(db);
  try {
    const groupCommit = new GroupCommit(db);
    const log = new SqliteGraphEventLog(db);
    const graph = new LiveGraph(log);
    const keys = await KeyRing.open(`${config.dataDir}/keys`, clock, { maxTokenTtlMs: config.decisionTtlMs });
    const policy = await openReloadingPolicyEngine(config.bundleDir);
    const decisionLog = options.decisionLog ?? openDecisionLog(config.decisionLog, { version: writVersion() });
    const ctx: WritContext = {
      config,
      clock,
      db,
      log,
      graph,
      replay: new SqliteReplayGuard(db),
      keys,
      policy,
      leases: new LeaseManager(new SqliteLeaseRepository(db, groupCommit), clock, {
        minTtlMs: config.lease.minTtlMs,
        maxTtlMs: config.lease.maxTtlMs,
        maxWaitMs: config.lease.maxWaitMs,
      }),
      leaseAuthority: new SqliteLeaseAuthorityRepository(db),
      incidents: new SqliteIncidentRepository(db),
      receipts: new ReceiptLog({ repository: new SqliteReceiptRepository(db), clock }),
      upstreams: options.upstreams ?? UpstreamRouter.fromConfig(config.upstreams),
      decisionLog,
      atomically: (fn) => db.transaction(fn).immediate(),
      observer: silentObserver,
    };
    const { credentialPath, created } = await ensureGovernance(ctx);
    return {
      ctx,
      credentialPath,
      credentialCreated: created,
      close() {
        // The decision log's last flush runs on; serve awaits it before closing the store (see cli/serve.ts).
        void decisionLog.close();
        (policy as { close?: () => void }).close?.();
        groupCommit.flush();
        checkpointer.stop();
        db.close();
      },
    };
  } catch (e) {
    // Nothing half-open stays behind (the checkpoint worker holds the file too).
    checkpointer.stop();
    db.close();
    throw e;
  }
}
