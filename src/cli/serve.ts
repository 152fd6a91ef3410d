import { randomUUID } from 'node:crypto';
import { createServer, isIP } from 'node:net';
import { hostname } from 'node:os';
import { join, resolve } from 'node:path';
import { maskDatabaseUrl, type WritConfig } from '../config/index.js';
import { GOVERNANCE_ID } from '../graph/model.js';
import { buildApp } from '../http/index.js';
import { readLiveBundle } from '../policy/index.js';
import { applyManifest, CLOCK_SAMPLE_INTERVAL_MS, checkStoreMark, describeOffset, type ClockState, environmentProblem, issueLoginToken, markStore, MARK_INTERVAL_MS, measureStore, openStore, openWrit, readManifest, readStoreMarks, reconcileReceipts, STORE_MARK_FILE, type WritContext } from '../service/index.js';
import type { WritStore } from '../store/contract.js';
import { WritError } from '../errors.js';
import { CliError } from './cli-error.js';
import { applyCounts } from './format.js';

/**
 * Where to reach a server that listens on `host`: the loopback for a wildcard, an IPv6 address in
 * brackets (`http://:::4000` is no URL). For the links and routes Writ prints or follows itself.
 */
export function httpOrigin(host: string, port: number): string {
  const h = host === '0.0.0.0' || host === '' ? '127.0.0.1' : host === '::' ? '[::1]' : isIP(host) === 6 ? `[${host}]` : host;
  return `http://${h}:${port}`;
}

/** A one-time console login link: the token rides in the fragment, so it reaches no server log nor Referer. */
export async function consoleLoginLink(ctx: WritContext, principal: string, base?: string): Promise<{ url: string; expires_at: number; auditor: boolean }> {
  const t = await issueLoginToken(ctx, principal);
  const origin = (base ?? httpOrigin(ctx.config.host, ctx.config.port)).replace(/\/+$/, '');
  return { url: `${origin}/console/#login=${t.token}`, expires_at: t.expires_at, auditor: t.auditor };
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace'] as const;

/**
 * writ serve's log (JSON lines on stdout): errors only by default, so that an INTERNAL answer's cause is
 * always there to read ("the log has the details"), with no line per request; `WRIT_LOG=info` (or `1`)
 * adds one per request, or another level by name.
 */
export function serveLogger(env: NodeJS.ProcessEnv): { level: (typeof LOG_LEVELS)[number] } {
  const asked = env.WRIT_LOG;
  if (asked === undefined || asked === '') return { level: 'error' };
  if (asked === '1') return { level: 'info' };
  const level = LOG_LEVELS.find((l) => l === asked);
  if (!level) throw new WritError('UNPROCESSABLE', `configuration WRIT_LOG must be one of ${LOG_LEVELS.join(', ')} (or 1 for info), got ${JSON.stringify(asked)}`);
  return { level };
}

export interface ServeOptions {
  graphFile?: string | undefined;
  /** Port of the sample upstream started beside Writ (null: don't start it). */
  upstreamPort: number | null;
  /**
   * Print a one-time console login link for governance at start (`--console-link`, as `npm start` does;
   * also when stderr is a terminal). Not by default: the link is a bearer credential for ten minutes,
   * and a server's output often goes to logs others read; `writ console` prints one on demand.
   */
  consoleLink?: boolean;
}

/** `writ serve`: open the store, bootstrap governance, apply the example graph, listen; on SIGINT/SIGTERM drain (answered requests only), then close and exit 0. */
export async function serve(config: WritConfig, options: ServeOptions): Promise<void> {
  // What fails a start without needing the store is looked at before anything is created in the data
  // directory (the store, keys/, the governance credential): a start refused for a busy port or a
  // missing policy bundle leaves a new data directory as it was. The ports are probed, not reserved:
  // one taken between the probe and the listen still fails there, with the same message.
  await readLiveBundle(config.bundleDir);
  await portFree(config.host, config.port, `port ${config.port}`, LISTEN_REMEDY);
  if (options.upstreamPort !== null) await portFree(config.host, options.upstreamPort, `port ${options.upstreamPort} for the sample upstream`, UPSTREAM_REMEDY);
  const say = (s: string) => process.stderr.write(`${s}\n`);
  const markFile = join(config.dataDir, STORE_MARK_FILE);
  const w = await openWrit(config, config.databaseUrl === null ? {} : { store: await storeNotBehindMark(config, markFile) });
  if (w.credentialCreated) say(`[writ] created the governance admin credential at ${w.credentialPath} (mode 0600) — keep it secret`);
  else if (w.credentialMissing) {
    say(`[writ] no governance admin credential at ${w.credentialPath}: governance exists, so none was made here (governance signs with a key it holds: the admin.jwk of the data directory that made it, or an operator's own registered with \`writ keys add-governance\`; if every one is lost, \`writ keys new ${w.credentialPath}\` then \`writ keys add-governance ${w.credentialPath}\`)`);
  } else if (w.credentialUnreadable !== null) {
    say(`[writ] WARNING: the admin credential at ${w.credentialPath} is not a JWK (${w.credentialUnreadable}): governance calls cannot be signed with it; restore it from a backup, or move it aside and register another with \`writ keys new FILE\` then \`writ keys add-governance FILE\``);
  } else if (w.credentialUnregistered) {
    say(`[writ] WARNING: the admin credential at ${w.credentialPath} is not a key of this store's governance (another store's?): governance calls signed with it are refused; \`writ keys add-governance ${w.credentialPath}\` registers it, if it should be`);
  } else say(`[writ] governance admin credential: ${w.credentialPath}`);
  if (w.signingKeysNew && config.databaseUrl !== null) {
    say(`[writ] WARNING: ${config.dataDir}/keys had no signing key, so this replica made one, but the store has history: decisions and checkpoints this replica signs do not verify on the other replicas, nor theirs here. Give every replica the same keys/ (copy it from the data directory of the others), then restart this one.`);
  } else if (w.signingKeyForeign !== null && config.databaseUrl !== null) {
    // Also at every later start of such a replica, once its own key is in keys/ (or keys/ is another deployment's).
    say(`[writ] WARNING: the store's latest receipt checkpoint was signed by key ${w.signingKeyForeign}, which ${config.dataDir}/keys does not hold: this replica's keys/ is not the other replicas', so decisions and checkpoints it signs do not verify on them, nor theirs here, and it takes no checkpoint. Give every replica the same keys/ (copy it from the data directory of the others), then restart this one.`);
  } else if (w.signingKeyForeign !== null) {
    // The file came without its keys/ (a restore on a new machine, keys/ lost): tamper evidence stops, not only old decisions.
    say(`[writ] WARNING: the store's latest receipt checkpoint was signed by key ${w.signingKeyForeign}, which ${config.dataDir}/keys does not hold (the data directory's keys/ was lost, or not copied with the store): no checkpoint is taken from now on and \`writ audit verify\` reports the log BROKEN at that checkpoint. Put back the keys/ that signed it (from a backup of the data directory), then restart.`);
  }
  const closers: (() => Promise<void>)[] = [];
  let app: Awaited<ReturnType<typeof buildApp>> | undefined;
  /**
   * Runs a start-up step; if it fails (a graph file that does not apply, EADDRINUSE on either port),
   * closes what was opened and fails: the sample upstream or a PostgreSQL listener would otherwise
   * keep the process alive.
   */
  const starting = async <T>(step: () => Promise<T>): Promise<T> => {
    try {
      return await step();
    } catch (e) {
      await app?.close().catch(() => undefined);
      for (const c of closers) await c().catch(() => undefined);
      await w.close().catch(() => undefined);
      throw e;
    }
  };
  // An upstream configured for an environment the policy does not have would never be written to
  // (every write would be NO_UPSTREAM): said at start, with the closest name. Refused when the
  // environment was set (a typo); the default's (production, under a policy without it) is only said.
  await starting(async () => {
    const problems = config.upstreams.map((u) => environmentProblem(w.ctx.policy.data, u.environment, `the upstream for ${u.pattern} (${u.url}): its environment (WRIT_UPSTREAM_ENVIRONMENT)`)).filter((p) => p !== null);
    if (problems.length === 0) return;
    if (process.env.WRIT_UPSTREAM_ENVIRONMENT !== undefined) throw new WritError('UNPROCESSABLE', problems.join('; '));
    say(`[writ] WARNING: ${problems.join('; ')}: writes there will be NO_UPSTREAM (set WRIT_UPSTREAM_ENVIRONMENT)`);
  });
  if (options.graphFile) {
    const graphFile = options.graphFile;
    const r = await starting(() => {
      const { manifest, baseDir } = readManifest(graphFile);
      return applyManifest(w.ctx, GOVERNANCE_ID, manifest, baseDir);
    });
    say(`[writ] applied ${graphFile}: ${applyCounts(r)}; graph revision ${r.graph_revision}`);
  }
  // The mark follows the database from here on: at start, every MARK_INTERVAL_MS, and at shutdown.
  let keepMark = async (): Promise<void> => {};
  if (config.databaseUrl !== null) {
    const database = maskDatabaseUrl(config.databaseUrl);
    let warned = false;
    const databaseUrl = config.databaseUrl;
    keepMark = async () => {
      if ((await markStore(markFile, w.ctx.store, databaseUrl)) || warned) return;
      warned = true;
      say(`[writ] WARNING: the database ${database} went behind this replica's mark (${markFile}) while it ran, with no epoch bump since: it was restored to an earlier point under a running Writ. Stop every replica and run \`writ lease bump-epochs --by N --reason TEXT --database ${database}\` (the next start says N)`);
    };
    await starting(keepMark);
    backgroundJob(closers, MARK_INTERVAL_MS, async () => {
      await keepMark().catch((e: unknown) => say(`[writ] store mark ${markFile} not written: ${(e as Error).message} (will retry)`));
    }).later();
  }
  const upstreamPort = options.upstreamPort;
  if (upstreamPort !== null) {
    const upstream = await starting(async () => {
      const { startSampleUpstream } = await import('../upstream/index.js');
      return startSampleUpstream({ port: upstreamPort, host: config.host, dbFile: `${config.dataDir}/upstream.sqlite` }).catch((e: unknown) => {
        throw inUse(e, `port ${upstreamPort} for the sample upstream`, UPSTREAM_REMEDY);
      });
    });
    closers.push(async () => { await upstream.app.close(); });
    say(`[writ] sample upstream (a stand-in for a real CMS) on ${httpOrigin(config.host, upstreamPort)}`);
  } else if (!process.env.WRIT_UPSTREAM_URL) {
    // No sample upstream and none named: the default URL may be anyone's (on a shared host, another Writ's sample upstream).
    say(`[writ] WARNING: --no-upstream and WRIT_UPSTREAM_URL is not set: writes go to the default ${config.upstreams.map((u) => u.url).join(', ')}, whatever answers there (set WRIT_UPSTREAM_URL to your upstream)`);
  }
  for (const u of config.upstreams) say(`[writ] writes to ${u.pattern} in ${u.environment} go to ${u.url}`);
  // PENDING receipts (a crash or a timeout between intent and completion) are settled against the
  // upstream in the background once they are past twice the upstream timeout: every write is sent with
  // a Writ-Deadline the upstream enforces, so by then "not applied" is final, and younger receipts may
  // be writes another process sharing this store still has in flight.
  const settleAge = Math.max(1_000, 2 * Math.max(...config.upstreams.map((u) => u.timeoutMs)));
  const reconcile = backgroundJob(closers, settleAge, async () => {
    try {
      const r = await reconcileReceipts(w.ctx, { olderThanMs: settleAge });
      if (r.examined > 0) say(`[writ] reconciled ${r.examined} PENDING receipt(s): ${r.completed.length} completed, ${r.failed.length} failed, ${r.unresolved.length} unresolved`);
    } catch (e) {
      say(`[writ] reconciliation of PENDING receipts failed: ${(e as Error).message} (will retry)`);
    }
  });
  // PostgreSQL: this replica's clock against the database's, measured every CLOCK_SAMPLE_INTERVAL_MS
  // (the metric writ_clock_offset_seconds, GET /readyz), and said when it goes past a limit and when it is back.
  const databaseClock = w.ctx.databaseClock;
  let clockSaid: ClockState = 'ok';
  if (databaseClock) await backgroundJob(closers, CLOCK_SAMPLE_INTERVAL_MS, async () => {
    try {
      const o = await databaseClock.sample();
      const state = databaseClock.stateOf(o);
      if (state !== clockSaid) {
        say(state === 'ok'
          ? `[writ] clock: this replica's clock is back within WRIT_CLOCK_OFFSET_WARN_MS of the database's (${describeOffset(o)} it)`
          : `[writ] WARNING: ${databaseClock.problem(o)!}${state === 'skewed' ? '; GET /readyz answers 503 CLOCK_SKEW until then' : ''}`);
        clockSaid = state;
      }
    } catch {
      // The database did not answer: readiness says so, and the next measurement tries again.
    }
  }).now();
  // A signed checkpoint over all receipt chain heads, every interval (only when a chain moved): what
  // bounds how much of the log a rewrite can hide (README "Receipts and audit"). One replica at a time
  // takes them, in its turn (renewed at each of its checkpoints, three intervals long): the others look
  // every interval, and take over once the turn has run out (its holder stopped).
  const holder = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  let inTurn: boolean | undefined;
  const checkpoint = backgroundJob(closers, config.receiptCheckpointIntervalMs, async () => {
    try {
      const { turn } = await w.ctx.receipts.checkpointInTurn(holder, 3 * config.receiptCheckpointIntervalMs);
      if (turn !== inTurn) say(turn ? `[writ] receipt checkpoints: this replica takes them (${holder})` : '[writ] receipt checkpoints: another replica takes them');
      inTurn = turn;
    } catch (e) {
      say(`[writ] receipt checkpoint failed: ${(e as Error).message} (will retry)`);
    }
  });
  // Printed before "listening on" (which tools wait for), so whoever reads that line has the link too.
  if (options.consoleLink || process.stderr.isTTY) {
    const link = await starting(() => consoleLoginLink(w.ctx, GOVERNANCE_ID));
    say(`[writ] console (one-time login link for governance, valid 10 min; \`writ console\` prints another): ${link.url}`);
  } else {
    say(`[writ] console at ${httpOrigin(config.host, config.port)}/console/ (\`writ console\` prints a one-time login link)`);
  }
  const server = await starting(async () => {
    app = await buildApp(w.ctx, { logger: serveLogger(process.env) });
    await app.listen({ port: config.port, host: config.host }).catch((e: unknown) => {
      throw inUse(e, `port ${config.port}`, LISTEN_REMEDY);
    });
    return app;
  });
  void reconcile.now();
  if (config.receiptCheckpointIntervalMs > 0) checkpoint.later();
  const url = httpOrigin(config.host, config.port);
  const store = config.databaseUrl === null ? `SQLite ${config.dbFile}` : `PostgreSQL ${maskDatabaseUrl(config.databaseUrl)}`;
  // The signing key too: replicas must all sign with the same one, and comparing this line is how an operator sees it.
  say(`[writ] listening on ${url}  (store: ${store}, graph revision ${(await w.ctx.graph.current()).revision}, policy ${w.ctx.policy.revision}, signing key ${w.ctx.keys.current().kid})`);
  say(`[writ] try:  curl ${url}/healthz   ·   curl ${url}/.well-known/jwks.json   ·   curl ${url}/openapi.json`);
  const on = storeFlags(config);
  say(`[writ]       node bin/writ trace seo-agent-7 update_post wp:post:1024 --fields title,meta_description${on}`);
  say(`[writ]       node bin/writ graph export --format dot${on}`);
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    say(`[writ] ${signal}: draining (new requests get 503 OVERLOADED); ${server.writDrain.inflight()} request(s) in flight, waiting up to ${config.drainTimeoutMs} ms`);
    // Queued lease acquisitions may wait far longer than a drain: they are told to retry instead.
    const drain = server.writDrain.drain(config.drainTimeoutMs);
    w.ctx.leases.stopWaiting();
    const drained = await drain;
    if (drained.drained) say('[writ] drained: every admitted request has been answered');
    else {
      say(`[writ] drain timed out with ${drained.inflight} request(s) still running; closing their connections`);
      server.server.closeAllConnections();
    }
    // Nothing admitted is left, but a connection can still be open that Node does not count idle (it
    // does not close it; server.close() waits for it, up to the 60 s headers timeout): one of a client
    // whose requests it gave up while Writ was paused (SIGSTOP): test/sdk/with-lease-paused-writ.test.ts.
    // The lease streams' close frames (preClose) go first; whatever is still open a second later is closed.
    const stragglers = setTimeout(() => server.server.closeAllConnections(), CLOSE_GRACE_MS);
    await server.close();
    clearTimeout(stragglers);
    if (!drained.drained) {
      // The requests still running can answer no one now (their connections and streams are closed). A
      // lease one of them grants from now on is given back by the request itself (its caller is gone: see
      // acquireLeases' callerGone), which needs the store open: the store waits for them, a while.
      const left = await server.writDrain.drain(GIVE_BACK_GRACE_MS);
      say(left.drained
        ? '[writ] the requests still running have ended (a lease granted after their connections closed was given back)'
        : `[writ] ${left.inflight} request(s) still running after ${GIVE_BACK_GRACE_MS} ms more; closing the store (a lease they grant now lapses at its TTL)`);
    }
    await w.ctx.decisionLog.close();
    for (const c of closers) await c();
    await keepMark().catch((e: unknown) => say(`[writ] store mark ${markFile} not written: ${(e as Error).message}`));
    await w.close();
    process.exit(0);
  };
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('SIGTERM', () => void stop('SIGTERM'));
}

/**
 * The PostgreSQL store, refused (STORE_BEHIND_MARK, closed again) when it is behind this data directory's
 * mark of it with no epoch bump since (see service/store-mark.ts). Looked at before anything is made or
 * changed: the mark is read first (one that cannot be read refuses the start), and the store is opened
 * without migrating (a schema older than this Writ's is migrated first, as every start does).
 */
/**
 * A background job of `writ serve` (the store mark, the PENDING sweep, the clock measurement, the receipt
 * checkpoint): `run` again `intervalMs` after each run has ended, so two never overlap, until the server
 * closes; its timer never keeps the process alive. `run` says what failed itself and must not throw.
 * Started with `now()` (run at once; resolves when that first run has ended) or `later()` (first run
 * after one interval).
 */
function backgroundJob(closers: (() => Promise<void>)[], intervalMs: number, run: () => Promise<void>): { now: () => Promise<void>; later: () => void } {
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  const later = (): void => {
    if (stopped) return;
    timer = setTimeout(() => void now(), intervalMs);
    timer.unref();
  };
  const now = async (): Promise<void> => {
    await run();
    later();
  };
  closers.push(async () => {
    stopped = true;
    clearTimeout(timer);
  });
  return { now, later };
}

async function storeNotBehindMark(config: WritConfig, markFile: string): Promise<WritStore> {
  readStoreMarks(markFile);
  // Only a schema older than this Writ's (a new database included) is migrated first; any other failure is the start's.
  const store = await openStore(config, { migrate: false }).catch((e: unknown) => {
    if (e instanceof WritError && e.code === 'UNPROCESSABLE' && e.details?.known_version !== undefined) return openStore(config);
    throw e;
  });
  try {
    const figures = await measureStore(store);
    if (figures !== null) checkStoreMark(markFile, figures, maskDatabaseUrl(config.databaseUrl ?? ''));
    return store;
  } catch (e) {
    await store.close().catch(() => undefined);
    throw e;
  }
}

/** After the drain, how long the close waits for connections to end before closing them (see stop). */
const CLOSE_GRACE_MS = 1_000;
/**
 * After a drain that timed out, how long the requests still running may go on before the store closes,
 * so that a lease they grant to a caller no longer there is given back (see stop): PostgreSQL's
 * lock_timeout as the store sets it (5 s), the longest a statement waits behind a lock.
 */
const GIVE_BACK_GRACE_MS = 5_000;

const LISTEN_REMEDY = 'pass --port N (0: any free port), or stop the server that has it';
const UPSTREAM_REMEDY = 'pass --upstream-port N, or --no-upstream (WRIT_UPSTREAM_URL names a real one)';

/** Refuses, as the listen would (inUse), a port another socket has; port 0 (any free port) is always free. */
async function portFree(host: string, port: number, what: string, remedy: string): Promise<void> {
  if (port === 0) return;
  const probe = createServer();
  await new Promise<void>((resolve, reject) => {
    probe.once('error', reject);
    probe.listen(port, host, () => probe.close(() => resolve()));
  }).catch((e: unknown) => {
    throw inUse(e, what, remedy);
  });
}

/** EADDRINUSE as one line that says what to do (a CliError); any other error as it is. */
function inUse(e: unknown, what: string, remedy: string): unknown {
  if ((e as { code?: unknown } | null)?.code !== 'EADDRINUSE') return e;
  const at = (e as { address?: unknown }).address;
  return new CliError(`${what}${typeof at === 'string' ? ` on ${at}` : ''} is in use (EADDRINUSE): ${remedy}`);
}

/**
 * The flags that point a `writ` command at this server's store, for the commands it suggests: a command
 * reads ./data unless told otherwise, so a server on another data directory or on PostgreSQL names it
 * (the database without its password).
 */
function storeFlags(config: WritConfig): string {
  const quote = (s: string) => (/^[\w@%+=:,./…-]+$/.test(s) ? s : `'${s.replaceAll("'", "'\\''")}'`);
  if (config.databaseUrl !== null) return ` --database ${quote(maskDatabaseUrl(config.databaseUrl))}`;
  return config.dataDir === resolve('data') ? '' : ` --data-dir ${quote(config.dataDir)}`;
}
