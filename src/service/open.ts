import { existsSync } from 'node:fs';
import { systemClock, type Clock } from '../clock.js';
import type { WritConfig } from '../config/index.js';
import { KeyRing, ReplayGuard, useEd25519 } from '../decision/index.js';
// Imported here only, where the server is composed: the SDK and the domain never load the native addon.
import { libsodiumEd25519 } from '../decision/ed25519-libsodium.js';
import { LiveGraph } from '../graph/index.js';
import { openReloadingPolicyEngine, type PolicyEngine } from '../policy/index.js';
import { WritError } from '../errors.js';
import { openSqliteStore } from '../store/sqlite/sqlite-store.js';
import { openPostgresStore, POSTGRES_MIGRATIONS } from '../store/postgres/index.js';
import { SQLITE_SCHEMA_VERSION } from '../store/sqlite/database.js';
import type { WritStore } from '../store/contract.js';
import { adminCredentialPath, ensureGovernance } from './bootstrap.js';
import { LeaseManager } from '../lease/index.js';
import { ReceiptLog, type ReceiptChainVerdict } from '../audit/index.js';
import { UpstreamRouter } from '../gateway/upstream-router.js';
import { openDecisionLog, type DecisionLog } from '../decision-log/index.js';
import { silentObserver, type WritContext } from './context.js';
import { writVersion } from './version.js';
import { DatabaseClock } from './database-clock.js';
import { checkpointSignerUnpublished, keyRingCheckpointSigner } from './checkpoint-signer.js';

export interface OpenedWrit {
  ctx: WritContext;
  credentialPath: string;
  credentialCreated: boolean;
  /** Governance exists and this data directory holds no admin credential (none was made: see ensureGovernance). */
  credentialMissing: boolean;
  /** The data directory holds an admin credential whose key is not governance's (another store's?). */
  credentialUnregistered: boolean;
  /** The data directory's admin credential is not a JWK (why), or null. */
  credentialUnreadable: string | null;
  /**
   * This open made the signing key of a store that has history: the data directory is not the one the
   * store's other processes sign with (their keys/ was not given to it), or its keys were lost.
   */
  signingKeysNew: boolean;
  /**
   * The kid of the key that signed the store's latest checkpoint, when this data directory's keys/ does
   * not publish it (null otherwise): at every start, not only the one that made a key, this process signs
   * with keys the others do not have, or lacks theirs.
   */
  signingKeyForeign: string | null;
  close(): Promise<void>;
}

/**
 * Opens the store, replays the graph, loads keys and the policy bundle, and bootstraps governance.
 * The one place where an engine is chosen and wired to the domain's ports.
 */
export async function openWrit(config: WritConfig, options: { clock?: Clock; upstreams?: UpstreamRouter; store?: WritStore; decisionLog?: DecisionLog; makeSigningKey?: boolean; migrate?: boolean; bootstrapGovernance?: boolean; allowMovedStore?: boolean; policyOnUse?: boolean } = {}): Promise<OpenedWrit> {
  const clock = options.clock ?? systemClock;
  // Every Ed25519 signature and check of this process through libsodium (see decision/ed25519.ts).
  useEd25519(libsodiumEd25519);
  const store = options.store ?? (await openStore(config, { migrate: options.migrate ?? true, allowMovedStore: options.allowMovedStore ?? false }));
  const closers: (() => Promise<void>)[] = [];
  try {
    const graph = new LiveGraph({
      // The head only decides whether to catch up (or, past it, to look again through a catch-up), and
      // the catch-up's own read waits until the events it applies are durable: the head need not wait
      // for the commits in flight (receipts, spends).
      head: () => store.read((tx) => tx.graph.head(), { waitsFor: () => false }),
      read: (after, upTo) => store.read((tx) => tx.graph.read(after, upTo)),
      revisionAt: (time) => store.read((tx) => tx.graph.revisionAt(time)),
    }, { fed: store.watchGraphHead !== undefined });
    // Where the store can tell when the graph changed (PostgreSQL: NOTIFY), no request reads the head.
    const watch = store.watchGraphHead ? await store.watchGraphHead((head) => graph.feedHead(head)) : null;
    closers.push(async () => watch?.close());
    const keys = await KeyRing.open(`${config.dataDir}/keys`, clock, { maxTokenTtlMs: config.decisionTtlMs, makeSigningKey: options.makeSigningKey ?? true });
    const policy = await openReloadingPolicyEngine(config.bundleDir).catch((e: unknown) => {
      if (options.policyOnUse && e instanceof WritError && e.code === 'POLICY_UNAVAILABLE') return unavailablePolicy(e);
      throw e;
    });
    const decisionLog = options.decisionLog ?? openDecisionLog(config.decisionLog, { version: writVersion() });
    const leases = new LeaseManager(store, clock, {
      minTtlMs: config.lease.minTtlMs,
      maxTtlMs: config.lease.maxTtlMs,
      maxWaitMs: config.lease.maxWaitMs,
      maxWaitersPerKey: config.lease.maxWaitersPerKey,
      maxWaitersPerPrincipal: config.lease.maxWaitersPerPrincipal,
    });
    // Where the store can tell (PostgreSQL: NOTIFY), a release on any replica wakes this one's waiters.
    const releases = store.watchLeaseReleases ? await store.watchLeaseReleases(() => leases.released()) : null;
    closers.push(async () => releases?.close());
    const ctx: WritContext = {
      config,
      clock,
      store,
      graph,
      replay: new ReplayGuard(store),
      keys,
      policy,
      leases,
      receipts: new ReceiptLog({ store, clock, checkpoints: keyRingCheckpointSigner(keys), requireGraphHashes: config.graphRequireHashes, keptChains: config.receiptCheckpointKeptChains, keptForMs: config.receiptCheckpointFullPassMs }),
      upstreams: options.upstreams ?? UpstreamRouter.fromConfig(config.upstreams),
      decisionLog,
      ...(store.readClock ? { databaseClock: new DatabaseClock(() => store.readClock!(), clock, config.clockOffset) } : {}),
      observer: silentObserver,
    };
    // A store holding what a key signed before (a receipt names a decision, a checkpoint is signed)
    // whose data directory had no signing key: what this process signs verifies nowhere else, nor what
    // others signed here. A store only bootstrapped or given its graph (by commands, which sign nothing
    // against PostgreSQL) is not that.
    const latestCheckpoint = await store.read(async (tx) => tx.receipts.latestCheckpoint());
    const signingKeysNew = keys.madeSigningKey && (latestCheckpoint !== null || (await store.read(async (tx) => (await tx.receipts.entriesFrom(null, 1)).length > 0)));
    const signingKeyForeign = latestCheckpoint === null ? null : checkpointSignerUnpublished(keys, latestCheckpoint.jws);
    // Not bootstrapped: for `writ keys add-governance`, which on a new store creates governance with its own key.
    const { credentialPath, created, missing, unregistered, unreadable } = options.bootstrapGovernance === false
      ? notBootstrapped(adminCredentialPath(config.dataDir))
      : await ensureGovernance(ctx);
    return {
      ctx,
      credentialPath,
      credentialCreated: created,
      credentialMissing: missing,
      credentialUnregistered: unregistered,
      credentialUnreadable: unreadable ?? null,
      signingKeysNew,
      signingKeyForeign,
      async close() {
        await decisionLog.close();
        (policy as { close?: () => void }).close?.();
        for (const close of closers) await close();
        await store.close();
      },
    };
  } catch (e) {
    // Nothing half-open stays behind (the checkpoint worker holds the file too).
    for (const close of closers) await close().catch(() => undefined);
    await store.close();
    throw e;
  }
}

/**
 * In place of a bundle that could not be loaded (`policyOnUse`): refuses every use with the error loading
 * gave. A command that reads the store and judges nothing (`writ audit verify`, `receipts`, `why`), run
 * where no bundle is (an auditor's machine against PostgreSQL), answers; one that judges fails as before.
 */
function unavailablePolicy(error: WritError): PolicyEngine {
  const refuse = (): never => {
    throw new WritError('POLICY_UNAVAILABLE', error.message);
  };
  return {
    get revision(): string {
      return refuse();
    },
    get data(): never {
      return refuse();
    },
    decide: refuse,
    checkDelegation: refuse,
  };
}

/**
 * The engine the configuration names: PostgreSQL for a `postgres://` URL (several replicas on one
 * database), else the embedded SQLite file. Either applies its missing migrations on open (under a
 * lock, so replicas starting together migrate once) and refuses a schema newer than it knows.
 */
/** `writ migrate`: opens the configured store (which applies the migrations it lacks), closes it, and says where it stands. */
export async function migrateStore(config: WritConfig): Promise<{ engine: WritStore['engine']; version: number }> {
  const store = await openStore(config);
  await store.close();
  return { engine: store.engine, version: store.engine === 'postgres' ? Math.max(...POSTGRES_MIGRATIONS.map((m) => m.version)) : SQLITE_SCHEMA_VERSION };
}

/**
 * Verifies the receipt chains of the PostgreSQL database at `url` (and its latest checkpoint with the
 * keys in `keysDir`, when there are any) and nothing else: no migration, no policy, no bootstrap, so
 * that checking a copy writes nothing to it (`writ store copy`). Without keys a checkpoint cannot be
 * checked and the verdict says so.
 */
export async function verifyPostgresReceipts(url: string, keysDir: string | null, clock: Clock = systemClock): Promise<ReceiptChainVerdict> {
  useEd25519(libsodiumEd25519);
  const store = await openPostgresStore(url, { migrate: false, poolSize: 2, applicationName: `writ-verify-${process.pid}` });
  try {
    const keys = keysDir === null ? null : await KeyRing.open(keysDir, clock, { makeSigningKey: false }); // it only verifies
    return await new ReceiptLog({ store, clock, ...(keys ? { checkpoints: keyRingCheckpointSigner(keys) } : {}) }).verifyChain(async () => {});
  } finally {
    await store.close();
  }
}

/**
 * The store `config` names. `migrate: false` (a command that must write nothing, such as a dry run)
 * refuses a schema older than this Writ's instead of migrating it, on either engine. A SQLite file
 * moved to PostgreSQL is refused (STORE_MOVED) unless `allowMovedStore` (the way back, bump-epochs).
 */
export async function openStore(config: WritConfig, options: { migrate?: boolean; allowMovedStore?: boolean } = {}): Promise<WritStore> {
  if (config.databaseUrl !== null) return openPostgresStore(config.databaseUrl, { applicationName: `writ-${process.pid}`, migrate: options.migrate ?? true });
  return openSqliteStore(config.dbFile, { migrate: options.migrate ?? true, moved: options.allowMovedStore === true ? 'allow' : 'refuse' });
}

/** What openWrit says of the credential when it did not bootstrap governance: nothing made, nothing checked. */
function notBootstrapped(credentialPath: string) {
  return { credentialPath, created: false, missing: !existsSync(credentialPath), unregistered: false, unreadable: undefined as string | undefined };
}
