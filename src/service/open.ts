import { systemClock, type Clock } from '../clock.js';
import type { WritConfig } from '../config/index.js';
import { KeyRing } from '../decision/index.js';
import { LiveGraph } from '../graph/index.js';
import { openReloadingPolicyEngine } from '../policy/index.js';
import { openDatabase } from '../store/sqlite/database.js';
import { SqliteGraphEventLog } from '../store/sqlite/graph-event-log.js';
import { SqliteReplayGuard } from '../store/sqlite/replay-guard.js';
import { ensureGovernance } from './bootstrap.js';
import { silentObserver, type WritContext } from './context.js';

export interface OpenedWrit {
  ctx: WritContext;
  credentialPath: string;
  credentialCreated: boolean;
  close(): void;
}

/** Opens the store, replays the graph, loads keys and the policy bundle, and bootstraps governance. */
export async function openWrit(config: WritConfig, options: { clock?: Clock } = {}): Promise<OpenedWrit> {
  const clock = options.clock ?? systemClock;
  const db = openDatabase(config.dbFile);
  const log = new SqliteGraphEventLog(db);
  const graph = new LiveGraph(log);
  const keys = await KeyRing.open(`${config.dataDir}/keys`, clock, { maxTokenTtlMs: config.decisionTtlMs });
  const policy = await openReloadingPolicyEngine(config.bundleDir);
  const ctx: WritContext = {
    config,
    clock,
    db,
    log,
    graph,
    replay: new SqliteReplayGuard(db),
    keys,
    policy,
    observer: silentObserver,
  };
  const { credentialPath, created } = await ensureGovernance(ctx);
  return {
    ctx,
    credentialPath,
    credentialCreated: created,
    close() {
      (policy as { close?: () => void }).close?.();
      db.close();
    },
  };
}
