import { loadConfig, type WritConfig } from '../config/index.js';
import { buildPolicyBundle, checkPolicyData, loadCandidatePolicy, readLiveBundle, RELOAD_CHECK_INPUTS, type PolicyEngine } from '../policy/index.js';
import { damagedKeysMessage, KeyRing, writePrivateFile } from '../decision/index.js';
import { systemClock } from '../clock.js';
import { GOVERNANCE_ID, PRINCIPAL_KINDS, type Edge } from '../graph/model.js';
import {
  analyseImpact, applyManifest, listLeases, environmentProblem, explainForEach, graphAt, manifestYaml, policyImpact, capabilitiesOf, expiringEdges, explain, exportGraph, migrateStore, openWrit, orphanedDelegations, readManifest, recentDecisionFailures, revokeEdge, revokePrincipal, whyReceipt, type LeaseListQuery, type OpenedWrit, type RecentDecisionsCheck, type WritContext,
} from '../service/index.js';
import { exportChainDot, exportChainMermaid, isEdgeLive, patternsOverlap, type AuthorityGraph } from '../graph/index.js';
import { WritError } from '../errors.js';
import { UsageError } from './cli-error.js';
import { findOpa } from './opa.js';
import { applyCounts, formatCapabilities, formatWho, withApproval, formatEdgeList, formatExplanation, formatImpact, formatPolicyImpact, formatWhy } from './format.js';
import { consoleLoginLink, httpOrigin, serve } from './serve.js';
import { chainEdgeToWire, edgeToWire, explanationToWire, graphExportToWire, impactToWire, leaseRecordToWire, policyImpactToWire, receiptToWire, whyToWire } from '../http/wire.js';
import { toWireTime, toWireTimeOrNull } from '../wire/time.js';
import { spawnSync } from 'node:child_process';
import { tmpdir, userInfo } from 'node:os';
import { backupSqliteStore, openForBackup, restoreSqliteStore } from '../store/sqlite/backup.js';
import { liftStoreMove, readStoreMove, sqliteDamage, storeDamagedError } from '../store/sqlite/database.js';
import { copySqliteToPostgres } from '../store/copy-to-postgres.js';
import { postgresHoldsGraph, postgresHoldsStore } from '../store/postgres/index.js';
import { LEASE_PAGE, MAX_KEY_LENGTH, type EpochBump } from '../lease/index.js';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import type { JWK } from 'jose';
import { createApprovalAssertion } from '../wire/assertions.js';
import { generatePrincipalKeyPair } from '../wire/principal-keys.js';
import { DECISION_ID_FILTER, isHeadsCheckpoint, ReceiptLog, RECEIPT_PAGE, RECEIPT_STATUSES, verifyArchiveFile, verifyGraphEvents, type GraphEventLink, type ReceiptChainVerdict, type ReceiptQuery, type ReceiptStatus } from '../audit/index.js';
import { decodeCompactJws, publicKeyFromJwk } from '../decision/jws.js';
import { addGovernanceKey, verifyCheckpoint, verifyPostgresReceipts } from '../service/index.js';

export interface CommandArgs {
  values: Record<string, string | boolean | undefined>;
  positionals: string[];
}

export interface Command {
  name: string;
  summary: string;
  /** Its arguments: positional ones first, in capitals (FILE, PRINCIPAL); one that starts with an option, or none, takes no positional argument (main.ts refuses any). */
  usage?: string;
  options?: Record<string, { type: 'string' | 'boolean'; short?: string }>;
  run(args: CommandArgs): Promise<number>;
  /** The exit code of its failures (a WritError, a bug; not a usage error, 2) where 1 is a finding: `writ audit verify`'s BROKEN. Default 1. */
  failureExit?: number;
}

export function configFrom(values: CommandArgs['values']): WritConfig {
  const overrides: Partial<WritConfig> = {};
  if (typeof values['data-dir'] === 'string') overrides.dataDir = values['data-dir'];
  if (typeof values.port === 'string') overrides.port = portOption('--port', values.port);
  if (typeof values.host === 'string') overrides.host = values.host;
  if (typeof values.database === 'string') overrides.databaseUrl = values.database;
  return loadConfig(overrides);
}

/**
 * Opens the data directory, runs `fn`, closes: every command that reads or changes Writ's state goes
 * through here. Only a command that makes the store (`create`) makes a signing key where there is none,
 * and only in a SQLite data directory, which is its server's own, keys included (`writ serve` makes one
 * on its first start). Against PostgreSQL a command run from elsewhere must not sign with a key no
 * server has; and a copy of a data directory without its keys/ (an auditor's) stays without one.
 */
async function withWrit<T>(values: CommandArgs['values'], fn: (w: OpenedWrit) => Promise<T> | T, config: WritConfig = configFrom(values), options: { migrate?: boolean; bootstrapGovernance?: boolean; create?: boolean; allowMovedStore?: boolean } = {}): Promise<T> {
  const { create = false, ...open } = options;
  if (!create) await requireStore(config);
  // The bundle only for what judges: reading receipts, chains and the graph needs none (WRIT_BUNDLE_DIR is ./build/policy,
  // beside a checkout). A command that may make the store loads it first, as before: without one it makes nothing.
  const w = await openWrit(config, { makeSigningKey: create && config.databaseUrl === null, policyOnUse: !create, ...open });
  warnDamagedKeys(w.ctx.keys);
  try {
    return await fn(w);
  } catch (e) {
    // A damaged page that opening did not read (a receipts table, say), met by the command: said as opening says it.
    const damage = config.databaseUrl === null ? sqliteDamage(e) : null;
    throw damage === null ? e : storeDamagedError(config.dbFile, damage, null);
  } finally {
    await w.close();
  }
}

/** A ring that only verifies goes on without a damaged key file (what it signed will not verify): said, naming the file. */
function warnDamagedKeys(ring: KeyRing): void {
  if (ring.damaged.length > 0) process.stderr.write(`writ: WARNING: ${damagedKeysMessage(ring.damaged)}\n`);
}

/**
 * NOT_FOUND, naming where it looked, when there is no Writ store there: only the commands meant to make
 * one (serve, graph apply, keys add-governance) may, and a mistyped --data-dir must not give an empty
 * store (with a new governance credential) that every read then reports on as if it were the real one.
 */
async function requireStore(config: WritConfig): Promise<void> {
  if (config.databaseUrl !== null) {
    if (!(await postgresHoldsStore(config.databaseUrl))) throw new WritError('NOT_FOUND', 'the PostgreSQL database (--database / WRIT_DATABASE_URL) holds no Writ store: name the one the servers use (writ serve makes one on its first start); nothing was created');
    return;
  }
  if (!existsSync(config.dbFile)) {
    const dir = !existsSync(config.dataDir) ? 'does not exist' : statSync(config.dataDir).isDirectory() ? `holds no ${basename(config.dbFile)}` : 'is not a directory';
    throw new WritError('NOT_FOUND', `no Writ store in ${config.dataDir} (it ${dir}): name the data directory the servers use with --data-dir or WRIT_DATA_DIR (writ serve makes one on its first start); nothing was created`);
  }
}

/**
 * withWrit for a command that signs with Writ's key what the servers must verify (a checkpoint, a
 * console login link): refused, saying where the key is, when the data directory holds none.
 */
function withSigningWrit<T>(what: string, values: CommandArgs['values'], fn: (w: OpenedWrit) => Promise<T> | T): Promise<T> {
  return withWrit(values, (w) => {
    if (!w.ctx.keys.canSign) {
      throw new WritError('UNPROCESSABLE', `${w.ctx.config.dataDir}/keys holds no signing key, and ${what} is signed with the servers' key: run this with --data-dir naming the data directory the servers use (writ serve makes its key on its first start)`);
    }
    return fn(w);
  });
}

/**
 * `writ approve --env`: why a decision under the local policy bundle (the one a server here would run) could
 * not use the approval, or null: the bundle does not declare that environment. A warning, not a refusal: the
 * bundle read here may not be the server's. Without a readable bundle there is nothing to say (the decision
 * that uses the approval names a mismatch).
 */
async function approvedEnvironmentProblem(config: WritConfig, environment: string): Promise<string | null> {
  let data: unknown;
  try {
    data = JSON.parse((await readLiveBundle(config.bundleDir)).data.toString('utf8'));
    checkPolicyData(data, config.bundleDir);
  } catch {
    return null;
  }
  const problem = environmentProblem(data, environment, 'the environment');
  return problem === null ? null : `${problem}, in the policy bundle at ${config.bundleDir}: a decision under that policy would not use this approval`;
}

/**
 * `writ trace`, `writ who` and `writ can` answer with a policy bundle: one that fails on what was asked lately (a Rego
 * error only some inputs reach) is one a server refuses to take (it keeps the bundle it has) or answers
 * those requests INTERNAL with, so the answer may not be the server's. Checked as a server checks a rebuild
 * (its last RELOAD_CHECK_INPUTS inputs; here the last recorded decisions, replayed as `writ policy impact`
 * replays them), and said on stderr, saying what to do; the answer is still given.
 */
async function warnIfBundleFails(ctx: WritContext, engine: PolicyEngine, candidateDir: string | null): Promise<void> {
  const bundle = candidateDir === null ? `the live bundle of ${ctx.config.bundleDir}` : `the candidate ${candidateDir}`;
  let check: RecentDecisionsCheck;
  try {
    check = await recentDecisionFailures(ctx, engine, RELOAD_CHECK_INPUTS);
  } catch (e) {
    if (!(e instanceof WritError)) throw e;
    process.stderr.write(`writ: WARNING: policy ${engine.revision} (${bundle}) could not be checked against the recent decisions (${e.code}: ${e.message}); this answer is given without that check\n`);
    return;
  }
  const first = check.failures[0];
  if (first === undefined) return;
  const q = first.request;
  const todo = candidateDir !== null
    ? `fix it before deploying it: writ policy impact ${candidateDir} lists every decision it fails on`
    : `a server refuses such a rebuild and keeps the bundle it has (GET /readyz names it, and this one under policy_refused), or answers those requests INTERNAL, so this answer may not be the server's: fix the policies, check them with writ policy impact POLICIES_DIR (it lists every decision a candidate fails on) and rebuild (writ policy build)`;
  process.stderr.write(`writ: WARNING: policy ${engine.revision} (${bundle}) fails on ${check.failures.length} of the last ${check.checked} recorded decisions (${check.source === 'decision_log' ? 'decision log' : 'receipts'}), first ${first.decision_id} (${q.principal} ${q.action} ${q.resource} in ${q.environment}${q.fields.length ? ` fields [${q.fields.join(', ')}]` : ''}): ${first.code}: ${first.error}; ${todo}\n`);
}

function print(value: unknown, json: boolean | string | undefined, text: () => string): void {
  console.log(json ? JSON.stringify(value, null, 2) : text());
}

/** The value of a port option: a whole number from `min` (0 lets the system pick) to 65,535, else a UsageError naming the option. */
function portOption(option: string, value: string, min = 0): number {
  const n = /^\d{1,5}$/.test(value) ? Number(value) : NaN;
  if (!(n >= min && n <= 65_535)) throw new UsageError(`${option} must be a port number from ${min} to 65535${min === 0 ? ' (0: any free port)' : ''}, got "${value}"`);
  return n;
}

/** NOT_FOUND, before anything is opened, when the folder a command is to write `file` into does not exist (or is no folder). */
function outputFolderMustExist(file: string, what: string): void {
  const dir = dirname(resolve(file));
  if (!existsSync(dir) || !statSync(dir).isDirectory()) throw new WritError('NOT_FOUND', `cannot write ${what} ${file}: ${dir} is not an existing directory (create it first); nothing was written`);
}

/** `--fields a,b` as a list (spaces around names and empty entries dropped), or undefined when not given. */
function fieldsOption(value: string | boolean | undefined): string[] | undefined {
  return typeof value === 'string' ? value.split(',').map((f) => f.trim()).filter(Boolean) : undefined;
}

function duration(s: string): number {
  const m = /^(\d+)(ms|s|m|h|d)$/.exec(s.trim());
  if (!m) throw new WritError('UNPROCESSABLE', `"${s}" is not a duration like 90s, 15m, 1h, 2d`);
  return Number(m[1]) * { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[m[2] as 'ms' | 's' | 'm' | 'h' | 'd'];
}

/** A checkpoint's (or manifest's) `at` as an RFC 3339 string, as everywhere on the wire. */
function withWireCheckpoint(v: { checkpoint?: { at: number }; manifest?: { at: number } }): unknown {
  const out: Record<string, unknown> = { ...v };
  if (v.checkpoint) out.checkpoint = { ...v.checkpoint, at: toWireTime(v.checkpoint.at) };
  if (v.manifest) out.manifest = { ...v.manifest, at: toWireTime(v.manifest.at) };
  return out;
}

function formatVerdict(v: ReceiptChainVerdict): string {
  return v.graph ? `${formatReceiptsVerdict(v)}\n${formatGraphVerdict(v.graph, v.checkpoint)}` : formatReceiptsVerdict(v);
}

function formatGraphVerdict(g: NonNullable<ReceiptChainVerdict['graph']>, c: ReceiptChainVerdict['checkpoint']): string {
  const signed = c?.graph_revision !== undefined ? `, checkpoint ${c.seq} signed revision ${c.graph_revision}` : ' (no checkpoint signed the graph log yet)';
  const unhashed = g.unhashed > 0 ? `; ${g.unhashed} newer event(s) appended by a Writ from before the graph chain are not hashed yet (the next append of this Writ hashes them)` : '';
  return g.ok
    ? `OK: graph log, ${g.events} events hashed through revision ${g.revision} (hash ${g.hash})${signed}${unhashed}`
    : `BROKEN in the graph log at revision ${g.firstBadRevision}: ${g.problem} (${g.events} sound events before it${signed})`;
}

function formatReceiptsVerdict(v: ReceiptChainVerdict): string {
  const receiptsOk = v.graph ? v.problem === undefined : v.ok;
  const against = v.checkpoint ? ` against checkpoint ${v.checkpoint.seq} of ${toWireTime(v.checkpoint.at)} (${v.checkpoint.chains} chains)` : ' (no checkpoint yet)';
  return receiptsOk
    ? `OK: ${v.entries} entries in ${v.chains} chains${against}, heads root ${v.head}`
    : v.chain !== undefined
      ? `BROKEN in chain ${JSON.stringify(v.chain)} at ${v.firstBadPos}${v.firstBadSeq !== undefined ? ` (seq ${v.firstBadSeq})` : ''}: ${v.problem} (${v.entries} sound entries before it${against})`
      : `BROKEN: ${v.problem}${v.entries > 0 ? ` (${v.entries} entries in ${v.chains} chains sound${against})` : ''}`;
}

/** The keys of a saved `/.well-known/jwks.json`; MALFORMED_REQUEST, saying why, when it cannot be read or is not a JWKS. */
function readJwksFile(file: string): { kid?: unknown }[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(file, 'utf8'));
  } catch (e) {
    throw new WritError('MALFORMED_REQUEST', `cannot read the JWKS ${file}: ${(e as Error).message}`);
  }
  const keys = (parsed as { keys?: unknown } | null)?.keys;
  if (!Array.isArray(keys) || !keys.every((k) => typeof k === 'object' && k !== null)) {
    throw new WritError('MALFORMED_REQUEST', `${file} is not a JWKS: it needs a "keys" array of JWK objects (save /.well-known/jwks.json)`);
  }
  return keys as { kid?: unknown }[];
}

/** The public key of a kid among JWKS keys, if there is one. */
function keyIn(keys: { kid?: unknown }[]): (kid: string) => ReturnType<typeof publicKeyFromJwk> | undefined {
  return (kid) => {
    const jwk = keys.find((k) => k.kid === kid);
    return jwk ? publicKeyFromJwk(jwk as Parameters<typeof publicKeyFromJwk>[0]) : undefined;
  };
}

/**
 * The receipt log `writ audit verify` checks: the store's, with the data directory's keys, or with the
 * public keys of a saved JWKS (`--jwks FILE`): an auditor checking a PostgreSQL store from elsewhere
 * needs no copy of the servers' private keys/. It signs nothing.
 */
function receiptsToVerify(w: OpenedWrit, jwksFile: string | undefined): ReceiptLog {
  if (jwksFile === undefined) return w.ctx.receipts;
  const keys = readJwksFile(jwksFile);
  return new ReceiptLog({
    store: w.ctx.store,
    clock: w.ctx.clock,
    requireGraphHashes: w.ctx.config.graphRequireHashes,
    checkpoints: {
      sign: () => {
        throw new WritError('INTERNAL', 'writ audit verify --jwks signs nothing');
      },
      verify: (jws) => verifyCheckpoint(jws, keyIn(keys), () => `the keys of ${jwksFile} (${keys.length})`),
    },
  });
}

/**
 * The public keys an offline check (`--archive`, `--checkpoint`) verifies a signature with: those of
 * --jwks FILE, else the data directory's keys/. NOT_FOUND when that holds none: nothing to check a
 * signature with is not a forgery, said as such, not BROKEN (exit 1 would read as altered).
 */
async function offlineKeys(values: CommandArgs['values'], what: 'archive' | 'checkpoint'): Promise<{ keys: { kid?: unknown }[]; from: string }> {
  if (typeof values.jwks === 'string') {
    const keys = readJwksFile(values.jwks);
    return { keys, from: `the keys of ${values.jwks} (${keys.length})` };
  }
  const keysDir = `${configFrom(values).dataDir}/keys`;
  const ring = await KeyRing.open(keysDir, systemClock, { makeSigningKey: false }); // it only verifies
  warnDamagedKeys(ring);
  const keys = ring.jwks().keys;
  if (keys.length === 0) {
    throw new WritError('NOT_FOUND', `no keys to check the ${what}'s signature with: ${keysDir} holds none; pass --jwks FILE (the /.well-known/jwks.json saved with the ${what}) or --data-dir naming the servers' data directory; nothing was checked`);
  }
  return { keys, from: `the keys read from ${keysDir} (${keys.length})` };
}

/** `writ audit verify --archive FILE`: offline, with the keys of --jwks FILE or else the data directory's key files. */
async function verifyArchiveCommand(values: CommandArgs['values']): Promise<number> {
  const file = values.archive as string;
  if (!existsSync(file)) throw new WritError('NOT_FOUND', `no archive file ${file}`);
  // Its read failing would be reported as a broken (altered) archive.
  if (statSync(file).isDirectory()) throw new WritError('UNPROCESSABLE', `${file} is a directory, not an archive: name the file writ audit archive --out wrote`);
  const { keys } = await offlineKeys(values, 'archive');
  const v = verifyArchiveFile(file, (jws) => verifyCheckpoint(jws, keyIn(keys)));
  print(withWireCheckpoint(v), values.json, () => (v.ok ? `OK: ${file} holds ${v.entries} entries of ${v.ranges!.length} chain(s), its signed ${v.version === 1 ? 'checkpoint' : 'manifest'} verified` : `BROKEN${v.chain !== undefined ? ` in chain ${JSON.stringify(v.chain)} at ${v.firstBadPos}` : ''}: ${v.problem}`));
  return v.ok ? 0 : 1;
}

/**
 * `writ audit verify --graph-events FILE [--graph-head REVISION:HASH | --checkpoint FILE [--jwks FILE]]`:
 * offline, no store. FILE holds what GET /v1/graph/events answered: one page, or an array of pages (or of
 * their events), oldest first. The head is taken as given (--graph-head), or from a checkpoint whose
 * signature is checked here (--checkpoint): a checkpoint that does not verify is BROKEN, nothing else judged.
 */
async function verifyGraphEventsCommand(values: CommandArgs['values']): Promise<number> {
  const file = values['graph-events'] as string;
  if (typeof values['graph-head'] === 'string' && typeof values.checkpoint === 'string') {
    throw new UsageError('--graph-head and --checkpoint both name the graph head: give one (--checkpoint FILE, checked with --jwks FILE, takes it from the signed checkpoint)');
  }
  let head: { revision: number; hash: string } | undefined;
  let signedBy: { seq: number; at: number; kid: string; file: string } | undefined;
  if (typeof values.checkpoint === 'string') {
    const checkpointFile = values.checkpoint;
    const signed = await signedGraphHead(values, checkpointFile);
    if ('problem' in signed) {
      print({ ok: false, checkpoint_file: checkpointFile, problem: signed.problem }, values.json, () => `BROKEN: the checkpoint of ${checkpointFile} does not verify: ${signed.problem}; nothing in ${file} was checked against it`);
      return 1;
    }
    head = signed.head;
    signedBy = { ...signed.checkpoint, file: checkpointFile };
  } else if (typeof values['graph-head'] === 'string') {
    head = graphHeadOption(values['graph-head']);
  }
  const events = readGraphEventsFile(file);
  if (head !== undefined && !events.some((e) => e.revision === head.revision)) {
    const span = events.length === 0 ? 'none' : `${events[0]!.revision}..${events[events.length - 1]!.revision}`;
    throw new WritError('NOT_FOUND', `revision ${head.revision} of --graph-head is not among the events of ${file} (${span}): nothing was checked against it; save the pages up to it`);
  }
  const v = verifyGraphEvents(events, head);
  const span = v.first === 0 ? 'no events' : `graph events ${v.first}..${v.last}`;
  const unhashed = v.unhashed > 0 ? `; the last ${v.unhashed} not hashed yet (appended by a Writ from before the graph chain)` : '';
  const by = signedBy ? ` (checkpoint ${signedBy.seq} of ${toWireTime(signedBy.at)}, its signature verified with key ${signedBy.kid})` : '';
  const anchored = v.signed
    ? `; revision ${v.signed.revision} has the signed hash${by}: events ${v.first}..${v.signed.revision} are the ones signed`
    : v.first === 1 ? '' : ` (from the prev_hash of event ${v.first} as given: pass --checkpoint or --graph-head to anchor them)`;
  const answer = signedBy ? { ...v, checkpoint: { seq: signedBy.seq, at: toWireTime(signedBy.at), kid: signedBy.kid, file: signedBy.file } } : v;
  print(answer, values.json, () => (v.ok
    ? `OK: ${span} of ${file}, ${v.events} hashed, recompute and link${anchored}${unhashed}`
    : `BROKEN in ${file} at revision ${v.firstBadRevision}: ${v.problem} (${v.events} sound events before it)`));
  return v.ok ? 0 : 1;
}

/**
 * The graph head a checkpoint signed, from `--checkpoint FILE`: its compact JWS, or a JSON answer holding
 * it (GET /v1/audit/verify, `writ audit verify --json`: `checkpoint.jws`). The signature is checked with
 * offlineKeys (--jwks FILE, else the data directory's keys/), and the head taken from the verified payload,
 * never from an answer's unsigned members (which, when given, must say the same). `problem`: it does not
 * verify (BROKEN). A file that holds no checkpoint, or one that signs no graph head, is thrown: nothing checked.
 */
async function signedGraphHead(values: CommandArgs['values'], file: string): Promise<{ head: { revision: number; hash: string }; checkpoint: { seq: number; at: number; kid: string } } | { problem: string }> {
  const { jws, stated } = readCheckpointFile(file);
  const { keys, from } = await offlineKeys(values, 'checkpoint');
  const verified = verifyCheckpoint(jws, keyIn(keys), () => from);
  if ('problem' in verified) return verified;
  const p = verified.payload;
  if (!isHeadsCheckpoint(p)) throw new WritError('UNPROCESSABLE', `${file} holds a signed ${'kind' in p ? 'archive manifest' : 'legacy (version 1) checkpoint'}, not a checkpoint over the chain heads: it signs no graph head; nothing was checked`);
  // An answer's members beside the JWS are not signed: when given, they must be what it signs.
  for (const k of ['seq', 'chains', 'root', 'archived', 'graph_revision', 'graph_hash'] as const) {
    if (k in stated && stated[k] !== p[k]) return { problem: `the answer's checkpoint.${k} (${JSON.stringify(stated[k])}) is not what its JWS signs (${JSON.stringify(p[k] ?? null)}): the answer was altered` };
  }
  if (p.graph_revision === undefined || p.graph_hash === undefined) {
    throw new WritError('UNPROCESSABLE', `checkpoint ${p.seq} of ${file} (version ${p.v}) signs no graph head: it was taken before the graph log's hash chain; save one taken since (GET /v1/audit/verify after writ audit checkpoint); nothing was checked`);
  }
  return { head: { revision: p.graph_revision, hash: p.graph_hash }, checkpoint: { seq: p.seq, at: p.at, kid: String(decodeCompactJws(jws).header.kid) } };
}

/**
 * The compact JWS `--checkpoint FILE` holds (as it is, or as a JSON string), or that of the checkpoint of
 * a saved verify answer, with the answer's other members of it (`stated`, unsigned); refusals say why, nothing checked.
 */
function readCheckpointFile(file: string): { jws: string; stated: Record<string, unknown> } {
  if (!existsSync(file)) throw new WritError('NOT_FOUND', `no checkpoint file ${file}`);
  if (statSync(file).isDirectory()) throw new WritError('UNPROCESSABLE', `${file} is a directory, not a checkpoint: name the file the checkpoint's JWS or GET /v1/audit/verify's answer was saved to`);
  const text = readFileSync(file, 'utf8').trim();
  if (/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/.test(text)) return { jws: text, stated: {} };
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  if (typeof parsed === 'string') return { jws: parsed, stated: {} }; // the JWS as a JSON string
  if (typeof parsed !== 'object' || parsed === null || (!('checkpoint' in parsed) && !('ok' in parsed))) {
    throw new WritError('MALFORMED_REQUEST', `${file} is not a checkpoint: it needs the checkpoint's compact JWS, or the JSON answer of GET /v1/audit/verify (or writ audit verify --json) holding checkpoint.jws; nothing was checked`);
  }
  const c = (parsed as { checkpoint?: unknown }).checkpoint;
  if (typeof c !== 'object' || c === null) throw new WritError('NOT_FOUND', `${file} holds no checkpoint (none had been taken when it was saved: writ audit checkpoint takes one, and servers every WRIT_RECEIPT_CHECKPOINT_INTERVAL_MS); nothing was checked`);
  const jws = (c as { jws?: unknown }).jws;
  if (typeof jws !== 'string') throw new WritError('MALFORMED_REQUEST', `the checkpoint in ${file} carries no jws (saved from a Writ that did not answer it): save GET /v1/audit/verify again, or the JWS alone; nothing was checked`);
  return { jws, stated: c as Record<string, unknown> };
}

/** `--graph-head REVISION:HASH` (a checkpoint's graph_revision and graph_hash). */
function graphHeadOption(value: string): { revision: number; hash: string } {
  const m = /^(\d{1,15}):([0-9a-f]{64})$/.exec(value.trim());
  if (!m) throw new UsageError(`--graph-head must be REVISION:HASH (a checkpoint's graph_revision and graph_hash: a number, a colon, 64 hex digits), got "${value}"`);
  return { revision: Number(m[1]), hash: m[2]! };
}

/** The events of a saved GET /v1/graph/events answer (or an array of them, or of events), `at` in ms; MALFORMED_REQUEST naming what is wrong. */
function readGraphEventsFile(file: string): GraphEventLink[] {
  if (!existsSync(file)) throw new WritError('NOT_FOUND', `no file ${file}`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(file, 'utf8'));
  } catch (e) {
    throw new WritError('MALFORMED_REQUEST', `cannot read the graph events ${file}: ${(e as Error).message}`);
  }
  const isPage = (v: unknown): v is { events: unknown[] } => typeof v === 'object' && v !== null && Array.isArray((v as { events?: unknown }).events);
  const raw = isPage(parsed) ? parsed.events : Array.isArray(parsed) ? parsed.flatMap((p) => (isPage(p) ? p.events : [p])) : null;
  if (raw === null) throw new WritError('MALFORMED_REQUEST', `${file} is not what GET /v1/graph/events answers: it needs an "events" array, or an array of such pages`);
  return raw.map((e, i) => {
    const o = (typeof e === 'object' && e !== null ? e : {}) as Record<string, unknown>;
    const at = typeof o.at === 'string' ? Date.parse(o.at) : NaN;
    const hashOrNull = (v: unknown) => v === null || (typeof v === 'string' && /^[0-9a-f]{64}$/.test(v));
    if (!Number.isSafeInteger(o.revision) || Number.isNaN(at) || typeof o.actor !== 'string' || typeof o.type !== 'string' || typeof o.payload !== 'string' || !hashOrNull(o.prev_hash) || !hashOrNull(o.hash)) {
      throw new WritError('MALFORMED_REQUEST', `event ${i} of ${file} is not a graph event as GET /v1/graph/events answers it (revision, at as RFC 3339, actor, type, payload, prev_hash and hash: 64 hex digits or null)`);
    }
    return { revision: o.revision as number, at, actor: o.actor, type: o.type, payload: o.payload, prev_hash: o.prev_hash as string | null, hash: o.hash as string | null };
  });
}

/** A key file (a JWK) named on the command line, parsed; a UsageError saying why when it cannot be read. */
function readJwkFile(file: string): Record<string, unknown> {
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
  } catch (e) {
    throw new UsageError(`cannot read the key ${file}: ${(e as Error).message}`);
  }
}

/** What `writ revoke NAME` and `writ impact revoke NAME` name: an edge's id, unless --principal says it is a principal's or no edge has it. */
function namedEdge(graph: AuthorityGraph, name: string, values: CommandArgs['values']): Edge | undefined {
  return values.principal ? undefined : graph.edge(name);
}

/** Exactly `n` positional arguments: one too many is refused too (`writ revoke a b` would revoke a alone; `--reason two words` unquoted would keep "two"). */
function need(positionals: string[], n: number, usage: string): void {
  if (positionals.length < n) throw new UsageError(`usage: ${usage}`);
  if (positionals.length > n) throw new UsageError(`${positionals.length - n === 1 ? 'one argument' : `${positionals.length - n} arguments`} too many (${positionals.slice(n).map((p) => JSON.stringify(p)).join(' ')}; quote a value with spaces); usage: ${usage}`);
}

export const COMMANDS: Command[] = [
  {
    name: 'serve',
    summary: 'run the Writ service (and apply --graph FILE first)',
    usage: '[--graph FILE] [--port N] [--host H] [--upstream-port N] [--no-upstream] [--console-link]',
    options: { graph: { type: 'string' }, port: { type: 'string' }, host: { type: 'string' }, 'upstream-port': { type: 'string' }, 'no-upstream': { type: 'boolean' }, 'console-link': { type: 'boolean' } },
    run: async ({ values }) => {
      const config = configFrom(values);
      const upstreamPort = values['no-upstream'] ? null : portOption('--upstream-port', (values['upstream-port'] as string | undefined) ?? '4100', 1);
      if (upstreamPort !== null && !process.env.WRIT_UPSTREAM_URL) {
        // Unless WRIT_UPSTREAM_URL names another, wp:post:* goes to the sample upstream started here, on whichever port.
        const sample = httpOrigin(config.host, upstreamPort);
        config.upstreams = config.upstreams.map((u) => (u.pattern === 'wp:post:*' ? { ...u, url: sample } : u));
      }
      await serve(config, { graphFile: values.graph as string | undefined, upstreamPort, consoleLink: values['console-link'] === true });
      return 0;
    },
  },
  {
    name: 'console',
    summary: 'print a one-time login link to the web console (for governance, or --principal ID)',
    usage: '[--principal ID] [--url BASE] [--port N] [--host H] [--json]',
    options: { principal: { type: 'string' }, url: { type: 'string' }, port: { type: 'string' }, host: { type: 'string' }, json: { type: 'boolean' } },
    run: ({ values }) =>
      withSigningWrit('a console login link', values, async (w) => {
        const principal = (values.principal as string | undefined) ?? GOVERNANCE_ID;
        const link = await consoleLoginLink(w.ctx, principal, values.url as string | undefined);
        print({ principal, url: link.url, expires_at: toWireTime(link.expires_at), auditor: link.auditor }, values.json, () => [
          `console login link for ${principal} (works once, until ${toWireTime(link.expires_at)}${link.auditor ? '' : '; no audit grant: shows only its own receipts and capabilities'}):`,
          `  ${link.url}`,
        ].join('\n'));
        return 0;
      }),
  },
  {
    name: 'graph apply',
    summary: 'apply a graph manifest as governance, all or nothing (idempotent); --dry-run: say what it would change, change nothing; --skip-expired: leave out (and list) the edges that expired already, which are refused otherwise',
    usage: 'FILE [--dry-run] [--skip-expired]',
    options: { 'dry-run': { type: 'boolean' }, 'skip-expired': { type: 'boolean' } },
    run: async ({ values, positionals }) => {
      need(positionals, 1, 'writ graph apply FILE [--dry-run] [--skip-expired]');
      const dryRun = values['dry-run'] === true;
      const config = configFrom(values);
      // A dry run against a store that does not exist yet (a CI check of a manifest for a new install:
      // no SQLite file, or a PostgreSQL database no Writ has opened) judges it against a new, empty
      // store made aside and removed, as the new one would be: it creates nothing where it was pointed
      // (opening the real one would bootstrap governance there, and put a credential in this data directory).
      const none = !dryRun ? null
        : config.databaseUrl === null ? (existsSync(config.dbFile) ? null : `there is none at ${config.dbFile}`)
        : (await postgresHoldsGraph(config.databaseUrl)) ? null : 'the PostgreSQL database holds none yet';
      const aside = none === null ? null : mkdtempSync(join(tmpdir(), 'writ-dry-run-'));
      try {
        const judged = aside === null ? config : { ...config, dataDir: aside, dbFile: join(aside, 'writ.sqlite'), databaseUrl: null };
        return await withWrit(values, async (w) => {
          const { manifest, baseDir } = readManifest(positionals[0]!);
          const r = await applyManifest(w.ctx, GOVERNANCE_ID, manifest, baseDir, { dryRun, skipExpired: values['skip-expired'] === true });
          console.log(dryRun
            ? `${positionals[0]} applied to ${none === null ? `the graph at revision ${r.graph_revision}` : `a new store (${none})`} would give: ${applyCounts(r)} (dry run: nothing written)`
            : `applied ${positionals[0]}: ${applyCounts(r)}; graph revision ${r.graph_revision}`);
          for (const c of r.created) console.log(`  + ${c}`);
          for (const c of r.updated) console.log(`  ~ ${c} (its keys replaced by the manifest's)`);
          for (const c of r.skipped) console.log(`  - ${c.id ?? '(an edge without id)'} skipped: ${c.why}`);
          for (const c of r.revoked) console.log(`  ! ${c} is revoked: the manifest does not restore it (a revoked edge stays revoked; give it a new id to grant it again)`);
          return 0;
        }, judged, { migrate: !dryRun || aside !== null, create: true }); // a dry run against an older schema (either engine) says so, and migrates nothing; the new store made aside is made whole
      } finally {
        if (aside !== null) rmSync(aside, { recursive: true, force: true });
      }
    },
  },
  {
    name: 'graph export',
    summary: 'print the graph (now or --at REVISION|TIME) as JSON, DOT, or a manifest writ graph apply reads (its live principals and edges)',
    usage: '[--at REV|TIME] [--format json|dot|manifest]',
    options: { at: { type: 'string' }, format: { type: 'string' } },
    run: async ({ values }) => {
      const format = (values.format as string | undefined) ?? 'json';
      if (format !== 'json' && format !== 'dot' && format !== 'manifest') throw new UsageError('--format is json, dot or manifest');
      return withWrit(values, async (w) => {
        const at = values.at as string | undefined;
        if (format === 'manifest') process.stdout.write(manifestYaml(w.ctx, await graphAt(w.ctx, at), w.ctx.clock.now()));
        else console.log(format === 'dot' ? await exportGraph(w.ctx, at, 'dot') : JSON.stringify(graphExportToWire(await exportGraph(w.ctx, at, 'json')), null, 2));
        return 0;
      });
    },
  },
  {
    name: 'trace',
    summary: 'explain for humans whether PRINCIPAL may do ACTION on RESOURCE, chain by chain (--policy DIR: under a candidate bundle or policies folder, before deploying it)',
    usage: 'PRINCIPAL ACTION RESOURCE [--env ENV] [--fields a,b] [--policy BUNDLE_OR_POLICIES_DIR] [--json]',
    options: { env: { type: 'string' }, fields: { type: 'string' }, policy: { type: 'string' }, json: { type: 'boolean' } },
    run: async ({ values, positionals }) => {
      need(positionals, 3, 'writ trace PRINCIPAL ACTION RESOURCE [--env ENV] [--fields a,b] [--policy BUNDLE_OR_POLICIES_DIR] [--json]');
      const [principal, action, resource] = positionals as [string, string, string];
      // A candidate is judged exactly as the running bundle would be: the same graph, the same explain.
      const candidate = typeof values.policy === 'string' ? (await loadCandidatePolicy(values.policy, findOpa)).engine : null;
      return withWrit(values, async (w) => {
        const fields = fieldsOption(values.fields) ?? [];
        const ctx = candidate ? { ...w.ctx, policy: candidate } : w.ctx;
        await warnIfBundleFails(w.ctx, ctx.policy, candidate ? (values.policy as string) : null);
        const x = await explain(ctx, GOVERNANCE_ID, { principal, action, resource, environment: (values.env as string | undefined) ?? 'production', fields });
        print(explanationToWire(x), values.json, () => formatExplanation(x));
        return x.allow ? 0 : 3;
      });
    },
  },
  {
    name: 'keys new',
    summary: "make a principal's Ed25519 key pair: the private JWK in FILE (mode 0600, for the agent only; never overwritten), the public one beside it (NAME.jwk → NAME.pub.jwk), to register",
    usage: 'FILE [--kid KID] [--json]',
    options: { kid: { type: 'string' }, json: { type: 'boolean' } },
    run: async ({ values, positionals }) => {
      need(positionals, 1, 'writ keys new FILE [--kid KID] [--json]');
      const file = positionals[0]!;
      if (file.endsWith('.pub.jwk')) throw new UsageError(`${file} names a public key file: name the private one (e.g. ${file.slice(0, -'.pub.jwk'.length)}.jwk); its public half goes beside it`);
      const name = basename(file).replace(/\.jwk$/, '');
      const publicFile = `${file.replace(/\.jwk$/, '')}.pub.jwk`;
      for (const f of [file, publicFile]) if (existsSync(f)) throw new UsageError(`${f} exists: a key file is never overwritten (pick another name, or remove it first)`);
      const kid = values.kid as string | undefined;
      if (kid !== undefined && !/^[A-Za-z0-9._:@-]{1,128}$/.test(kid)) throw new UsageError(`--kid must be 1-128 letters, digits and . _ : @ -, got "${kid}"`);
      const { publicJwk, privateJwk } = await generatePrincipalKeyPair(kid);
      const cannot = (f: string, e: unknown) => new UsageError(`cannot write ${f}: ${(e as Error).message}`);
      try {
        writePrivateFile(file, `${JSON.stringify(privateJwk, null, 2)}\n`, { overwrite: false });
      } catch (e) {
        throw cannot(file, e);
      }
      try {
        writeFileSync(publicFile, `${JSON.stringify(publicJwk, null, 2)}\n`, { flag: 'wx' });
      } catch (e) {
        rmSync(file);
        throw cannot(publicFile, e);
      }
      print({ private_file: file, public_file: publicFile, public_jwk: publicJwk }, values.json, () => [
        `private key: ${file} (mode 0600) — it signs as the principal: give it to that agent only (WritClient's privateJwk)`,
        `public key:  ${publicFile} (kid ${publicJwk.kid}) — register it as governance, e.g. in a graph manifest:`,
        '  principals:',
        `    - { id: ${name}, kind: agent, key_files: [${basename(publicFile)}] }`,
        '  then writ graph apply FILE (or POST /v1/principals with it in keys)',
      ].join('\n'));
      return 0;
    },
  },
  {
    name: 'approve',
    summary: "sign, as an approver, a single-use approval of one request (PRINCIPAL doing ACTION on RESOURCE in --env, touching at most --fields; * for every field and the whole resource) for that principal to pass as its decision's context.approval; prints the assertion alone on stdout",
    usage: 'PRINCIPAL ACTION RESOURCE --as APPROVER --key FILE --fields a,b|* [--env ENV] [--ttl 5m] [--json]',
    options: { as: { type: 'string' }, key: { type: 'string' }, env: { type: 'string' }, fields: { type: 'string' }, ttl: { type: 'string' }, json: { type: 'boolean' } },
    run: async ({ values, positionals }) => {
      const usage = 'writ approve PRINCIPAL ACTION RESOURCE --as APPROVER --key FILE --fields a,b|* [--env ENV] [--ttl 5m] [--json]';
      need(positionals, 3, usage);
      if (typeof values.as !== 'string' || typeof values.key !== 'string') throw new UsageError(`--as APPROVER and --key FILE (the approver's private JWK) are required; usage: ${usage}`);
      const fields = fieldsOption(values.fields);
      if (fields === undefined || fields.length === 0) throw new UsageError(`--fields is required: the fields the request may touch (* for every field and the whole resource); usage: ${usage}`);
      const [principal, action, resource] = positionals as [string, string, string];
      const config = configFrom(values);
      const ttlText = (values.ttl as string | undefined) ?? `${config.maxAssertionTtlMs / 1000}s`;
      const ttlMs = /^\d+(s|m)$/.test(ttlText) ? duration(ttlText) : NaN;
      if (!(ttlMs >= 1_000 && ttlMs <= config.maxAssertionTtlMs)) throw new UsageError(`--ttl is whole seconds or minutes from 1s to ${config.maxAssertionTtlMs / 1000}s (Writ refuses longer assertions), got "${ttlText}"`);
      const privateJwk = readJwkFile(values.key) as JWK;
      if (typeof privateJwk !== 'object' || privateJwk === null || typeof privateJwk.d !== 'string') throw new UsageError(`${values.key} is not a private JWK (writ keys new makes one)`);
      const approve = { principal, action, resource, environment: (values.env as string | undefined) ?? 'production', fields: [...new Set(fields)].sort() };
      const environmentWarning = await approvedEnvironmentProblem(config, approve.environment);
      if (environmentWarning !== null) console.error(`[writ] WARNING: ${environmentWarning}`);
      const now = Date.now();
      const assertion = await createApprovalAssertion({ approver: values.as, privateJwk, approve, ttlSeconds: ttlMs / 1000, audience: `${config.audience}:approval`, now }).catch((e: unknown) => {
        throw new UsageError(`cannot sign with ${values.key}: ${(e as Error).message}`);
      });
      const expiresAt = toWireTime(Math.floor(now / 1000) * 1000 + ttlMs);
      if (values.json) {
        print({ assertion, approver: values.as, approve, expires_at: expiresAt }, true, () => '');
      } else {
        // stdout holds the assertion alone (for $(writ approve …)); what it is goes to stderr.
        console.error(`approval by ${values.as} of ${principal} ${action} ${resource} in ${approve.environment} on fields [${approve.fields.join(', ')}]: single use, until ${expiresAt}; it counts through a live approves edge ${values.as} → ${principal} whose scope and risk_max cover the request (pass it as context.approval)`);
        console.log(assertion);
      }
      return 0;
    },
  },
  {
    name: 'keys add-governance',
    summary: "register the public key of FILE (a JWK: writ keys new makes a pair) as one more key of governance, after its admin credential was lost; nothing else ever adds one. On a new store: create governance with this key alone, writing no credential (keep the private half yourself)",
    usage: 'FILE [--json]',
    options: { json: { type: 'boolean' } },
    run: async ({ values, positionals }) => {
      need(positionals, 1, 'writ keys add-governance FILE [--json]');
      const jwk = readJwkFile(positionals[0]!);
      const config = configFrom(values);
      // Not bootstrapped first: on a new store governance is made with this key alone, and no credential is written.
      return withWrit(values, async (w) => {
        const r = await addGovernanceKey(w.ctx, operator(), jwk);
        if (r.raced) console.error(`[writ] WARNING: governance was created meanwhile by another process (a server starting?), with its own key: ${r.kid} was added beside it (governance's keys: ${r.keys.join(', ')}); that process's admin.jwk is a governance credential as well`);
        print(r, values.json, () => r.created
          ? `governance created with key ${r.kid} as its only key (graph revision ${r.graph_revision}); no credential was written to ${config.dataDir}: sign as governance with the private half of ${positionals[0]}`
          : `governance key ${r.kid} registered (graph revision ${r.graph_revision}); governance's keys now: ${r.keys.join(', ')}`);
        return 0;
      }, config, { bootstrapGovernance: false, create: true });
    },
  },
  {
    name: 'keys rotate',
    summary: "rotate Writ's own signing key (decisions, checkpoints); old public keys stay in the JWKS until their decisions expire",
    run: async ({ values }) => {
      const config = configFrom(values);
      // The store is opened first: one that cannot be (moved, damaged, in use, of a newer Writ) is refused before any key is made.
      return withWrit(values, async (w) => {
        // Against PostgreSQL, rotating where there is no key yet would make keys no server has.
        const ring = await KeyRing.open(`${config.dataDir}/keys`, systemClock, { maxTokenTtlMs: config.decisionTtlMs, makeSigningKey: config.databaseUrl === null });
        if (!ring.canSign) throw new WritError('UNPROCESSABLE', `${config.dataDir}/keys holds no signing key: rotate in the data directory the servers use (its keys/), then give the others the result`);
        // Rotated by the opened Writ's own ring (it re-reads the directory first), whose checkpoint signer then signs with the new key.
        const next = await w.ctx.keys.rotate();
        console.log(`signing key is now ${next.kid}; JWKS has ${w.ctx.keys.jwks().keys.length} key(s)`);
        // The receipt chain's latest checkpoint must verify once the old key leaves the JWKS: sign it again now.
        const resigned = await w.ctx.receipts.resignCheckpoint();
        if (resigned) console.log(`receipt chain heads signed again with the new key as checkpoint ${resigned.seq} (${resigned.chains} chains)`);
        return 0;
      }, config);
    },
  },
  {
    name: 'policy build',
    summary: 'compile policies/ ($WRIT_POLICIES_DIR) to a wasm bundle in build/policy ($WRIT_BUNDLE_DIR), data.json checked first; a running service picks it up without a restart',
    run: async ({ values }) => {
      const config = configFrom(values);
      const r = await buildPolicyBundle({ opaPath: findOpa(), policiesDir: config.policiesDir, outDir: config.bundleDir });
      console.log(`policy bundle ${r.revision} written to ${config.bundleDir}`);
      console.log(`a running service takes it within a second (it watches the folder, and looks again on GET /readyz and on decisions), unless it fails on the requests it answered last: GET /readyz names the live policy_revision, or this one under policy_refused with why`);
      return 0;
    },
  },
  {
    name: 'policy impact',
    summary: 'replay recent decisions against a candidate bundle (or policies folder) and list every verdict that would flip or fail; changes nothing; exit 4 when something would change, 5 when some decisions could not be replayed, 6 when there were none (--allow-empty: 0)',
    usage: 'BUNDLE_OR_POLICIES_DIR [--decision-log FILE | --receipts] [--limit N] [--allow-empty] [--json]',
    options: { 'decision-log': { type: 'string' }, receipts: { type: 'boolean' }, limit: { type: 'string' }, 'allow-empty': { type: 'boolean' }, json: { type: 'boolean' } },
    run: async ({ values, positionals }) => {
      need(positionals, 1, 'writ policy impact BUNDLE_OR_POLICIES_DIR [--decision-log FILE | --receipts] [--limit N] [--allow-empty] [--json]');
      const limit = typeof values.limit === 'string' ? Number(values.limit) : undefined;
      const { engine } = await loadCandidatePolicy(positionals[0]!, findOpa);
      return withWrit(values, async (w) => {
        const decisionLogFile = values.receipts ? null : typeof values['decision-log'] === 'string' ? values['decision-log'] : undefined;
        const r = await policyImpact(w.ctx, engine, { ...(decisionLogFile !== undefined ? { decisionLogFile } : {}), ...(limit !== undefined ? { limit } : {}) });
        print(values.json ? policyImpactToWire(r) : r, values.json, () => formatPolicyImpact(r, w.ctx.config.bundleDir));
        // A gate must not pass on what it did not check: 4 a change, 5 decisions it could not replay, 6 none at all.
        if (r.flips.length > 0 || r.failures.length > 0 || r.stranded_edges.length > 0) return 4;
        if (r.skipped.length > 0) return 5;
        if (r.replayed === 0 && !values['allow-empty']) return 6;
        return 0;
      });
    },
  },
  {
    name: 'policy test',
    summary: 'run the Rego unit tests (opa test policies/, or $WRIT_POLICIES_DIR), then build the folder as `policy build` would, without publishing it (compiles, data.json checked)',
    run: async ({ values }) => {
      const config = configFrom(values);
      const opa = findOpa();
      // opa's own words, streamed as it writes them: failing tests print their traces, megabytes that a
      // captured buffer would cut short, losing the summary (PASS: n/m, FAIL: k/m) at its end.
      const tested = spawnSync(opa, ['test', '--v1-compatible', '-v', config.policiesDir], { stdio: 'inherit' });
      if (tested.error) throw new WritError('POLICY_UNAVAILABLE', `${opa} could not run the Rego tests: ${tested.error.message}`);
      if (tested.status !== 0) return 1;
      // Tests pass on data a service would refuse (a typo in data.json): build it too, into a temporary folder.
      try {
        const { engine } = await loadCandidatePolicy(config.policiesDir, () => opa);
        console.log(`and ${config.policiesDir} builds into a usable bundle (${engine.revision}; not published: \`writ policy build\` does that)`);
        return 0;
      } catch (e) {
        if (!(e instanceof WritError)) throw e;
        console.error(`the Rego tests pass, but ${config.policiesDir} does not build into a usable bundle: ${e.code}: ${e.message}`);
        return 1;
      }
    },
  },
  {
    name: 'demo',
    summary: 'play the stories Writ exists for, with real agents over HTTP, against a throw-away Writ',
    run: async () => {
      const { openStage, playStories } = await import('../demo/index.js');
      const stage = await openStage(process.cwd());
      console.log(`Writ demo: Writ on ${stage.url}, sample upstream (a stand-in CMS) on ${stage.upstreamUrl}, graph/example.yaml`);
      try {
        const results = await playStories(stage, (line) => console.log(line));
        const failed = results.filter((r) => !r.ok);
        console.log(`\n${results.length - failed.length} of ${results.length} stories ended the way they said.`);
        return failed.length === 0 ? 0 : 1;
      } finally {
        await stage.close();
      }
    },
  },
  {
    name: 'receipts',
    summary: `list receipts by resource, principal, status or decision, oldest first (--order newest: the latest first), ${RECEIPT_PAGE.defaultLimit} at a time (--limit N, at most ${RECEIPT_PAGE.maxLimit}); says how to get the next page`,
    usage: '[--resource KEY] [--principal ID] [--status S] [--decision ID] [--order oldest|newest] [--limit N] [--after N | --before N] [--json]',
    options: { resource: { type: 'string' }, principal: { type: 'string' }, status: { type: 'string' }, decision: { type: 'string' }, order: { type: 'string' }, limit: { type: 'string' }, after: { type: 'string' }, before: { type: 'string' }, json: { type: 'boolean' } },
    run: ({ values }) => {
      // As GET /v1/receipts checks its query: the same statuses, bounds and paging rules.
      const q: ReceiptQuery = {};
      if (values.status !== undefined) {
        if (!(RECEIPT_STATUSES as readonly unknown[]).includes(values.status)) throw new UsageError(`--status is one of ${RECEIPT_STATUSES.join(', ')}, got "${String(values.status)}"`);
        q.status = values.status as ReceiptStatus;
      }
      if (values.order !== undefined && values.order !== 'oldest' && values.order !== 'newest') throw new UsageError(`--order is oldest or newest, got "${String(values.order)}"`);
      const newest = values.order === 'newest';
      const whole = (option: string, min: number, max: number): number | undefined => {
        const v = values[option];
        if (v === undefined) return undefined;
        const n = typeof v === 'string' && /^\d{1,16}$/.test(v) ? Number(v) : NaN;
        if (!(n >= min && n <= max)) throw new UsageError(`--${option} is a whole number from ${min} to ${max}, got "${String(v)}"`);
        return n;
      };
      q.limit = whole('limit', 1, RECEIPT_PAGE.maxLimit) ?? RECEIPT_PAGE.defaultLimit;
      const after = whole('after', 0, Number.MAX_SAFE_INTEGER);
      const before = whole('before', 0, Number.MAX_SAFE_INTEGER);
      if (newest && after !== undefined) throw new UsageError('--order newest pages with --before, not --after');
      if (!newest && before !== undefined) throw new UsageError('--before pages receipts newest first: add --order newest');
      if (after !== undefined) q.after = after;
      if (before !== undefined) q.before = before;
      if (newest) q.newestFirst = true;
      if (typeof values.resource === 'string') q.resource = values.resource;
      if (typeof values.principal === 'string') q.principal = values.principal;
      if (typeof values.decision === 'string') {
        // An empty one (an unset shell variable) would list nothing, as if no write had used the decision.
        const { minLength, maxLength } = DECISION_ID_FILTER;
        if (values.decision.length < minLength || values.decision.length > maxLength) throw new UsageError(`--decision is a decision id of ${minLength} to ${maxLength} characters, got ${values.decision.length}`);
        q.decision_id = values.decision;
      }
      return withWrit(values, async (w) => {
        const page = await w.ctx.receipts.query(q);
        print({ ...page, receipts: page.receipts.map(receiptToWire) }, values.json, () =>
          page.receipts.length === 0
            ? '(no receipts)'
            : page.receipts
                .map((r) => `${r.receipt_id}  ${r.status.padEnd(9)} ${toWireTime(r.created_at)}  ${r.principal} ${r.action} ${r.resource_key} [${r.fields.join(',')}] v${r.expected_version ?? '-'}→${r.final_version ?? '-'}${r.error ? `  ${r.error.code}` : ''}`)
                .join('\n'));
        // A page cut short says so (on stderr, so the list stays the list), and how to go on.
        if (!values.json && page.next !== null) {
          console.error(`(${page.receipts.length} shown; more ${newest ? 'older' : 'newer'} receipts: add ${newest ? '--before' : '--after'} ${page.next}${newest ? '' : ', or --order newest for the latest first'})`);
        }
        return 0;
      });
    },
  },
  {
    name: 'why',
    summary: 'why was this write allowed: receipt → decision → chain → each edge\'s creator, reason, time and scope',
    usage: 'RECEIPT_ID [--format text|json|dot|mermaid]',
    options: { format: { type: 'string' } },
    run: ({ values, positionals }) => {
      need(positionals, 1, 'writ why RECEIPT_ID');
      const format = (values.format as string | undefined) ?? 'text';
      if (!['text', 'json', 'dot', 'mermaid'].includes(format)) throw new UsageError('--format is text, json, dot or mermaid');
      return withWrit(values, async (w) => {
        const report = await whyReceipt(w.ctx, positionals[0]!);
        const edges = report.chain.map((l) => l.edge);
        if (format === 'json') console.log(JSON.stringify(whyToWire(report), null, 2));
        else if (format === 'dot') console.log(exportChainDot(edges));
        else if (format === 'mermaid') console.log(exportChainMermaid(edges));
        else console.log(formatWhy(report));
        return 0;
      });
    },
  },
  {
    name: 'who',
    summary: 'who may do ACTION on RESOURCE now (in --env, on --fields): every live principal the policy allows, through which chain; --all also those it denies, with why',
    usage: 'ACTION RESOURCE [--env ENV] [--fields a,b] [--risk N] [--kind agent|human|service|control_plane] [--all] [--json]',
    options: { env: { type: 'string' }, fields: { type: 'string' }, risk: { type: 'string' }, kind: { type: 'string' }, all: { type: 'boolean' }, json: { type: 'boolean' } },
    run: ({ values, positionals }) => {
      need(positionals, 2, 'writ who ACTION RESOURCE [--env ENV] [--fields a,b] [--risk N] [--kind KIND] [--all] [--json]');
      const risk = values.risk === undefined ? undefined : Number(values.risk);
      if (risk !== undefined && !(Number.isInteger(risk) && risk >= 0)) throw new UsageError(`--risk is a whole number from 0 (the request's risk, when above the action's), got "${String(values.risk)}"`);
      const [action, resource] = positionals as [string, string];
      const kind = values.kind as string | undefined;
      if (kind !== undefined && !(PRINCIPAL_KINDS as readonly string[]).includes(kind)) throw new UsageError(`--kind is one of ${PRINCIPAL_KINDS.filter((k) => k !== 'governance').join(', ')}, got "${kind}"`);
      return withWrit(values, async (w) => {
        const fields = fieldsOption(values.fields);
        const environment = (values.env as string | undefined) ?? 'production';
        await warnIfBundleFails(w.ctx, w.ctx.policy, null);
        const answers = await explainForEach(w.ctx, GOVERNANCE_ID, { action, resource, environment, ...(fields ? { fields } : {}), ...(risk !== undefined ? { context: { risk } } : {}) }, kind);
        const shown = values.all ? answers : answers.filter((x) => x.allow || withApproval(x));
        print(shown.map(explanationToWire), values.json, () => formatWho({ action, resource, environment, fields: fields ?? [] }, answers, values.all === true));
        return 0;
      });
    },
  },
  {
    name: 'can',
    summary: 'what a principal could do (now or --at TIME), and through which chains',
    usage: 'PRINCIPAL [--at TIME] [--json]',
    options: { at: { type: 'string' }, json: { type: 'boolean' } },
    run: ({ values, positionals }) => {
      need(positionals, 1, 'writ can PRINCIPAL [--at TIME]');
      return withWrit(values, async (w) => {
        let at: number | undefined;
        if (typeof values.at === 'string') {
          at = Date.parse(values.at);
          if (Number.isNaN(at)) throw new WritError('UNPROCESSABLE', `--at must be an ISO-8601 time, got "${values.at}"`);
        }
        await warnIfBundleFails(w.ctx, w.ctx.policy, null);
        const c = await capabilitiesOf(w.ctx, positionals[0]!, at);
        const wire = { ...c, at: toWireTime(c.at), capabilities: c.capabilities.map((k) => ({ ...k, chain: k.chain.map(chainEdgeToWire) })) };
        print(wire, values.json, () => formatCapabilities(positionals[0]!, c));
        return 0;
      });
    },
  },
  {
    name: 'expiring',
    summary: 'live grants and delegations that expire within a window',
    usage: '--within 1h [--json]',
    options: { within: { type: 'string' }, json: { type: 'boolean' } },
    run: ({ values }) => {
      const within = duration((values.within as string | undefined) ?? '1h');
      return withWrit(values, async (w) => {
        const edges = await expiringEdges(w.ctx, within);
        print(edges.map(edgeToWire), values.json, () => formatEdgeList(edges, (e) => `expires ${toWireTime(e.expires_at!)}: "${e.reason}"`));
        return 0;
      });
    },
  },
  {
    name: 'orphans',
    summary: 'live edges that count for nothing or less than they say: delegations whose delegator no longer holds what it gave, edges part of whose scope can never apply under the policy\'s registry',
    usage: '[--json]',
    options: { json: { type: 'boolean' } },
    run: ({ values }) =>
      withWrit(values, async (w) => {
        const orphans = await orphanedDelegations(w.ctx);
        print(orphans.map((o) => ({ ...o, edge: edgeToWire(o.edge) })), values.json, () =>
          orphans.length === 0 ? '(none)' : orphans.map((o) => `${o.edge.id}: ${o.edge.from} → ${o.edge.to}\n${o.violations.map((v) => `    ${v}`).join('\n')}`).join('\n'));
        return 0;
      }),
  },
  {
    name: 'revoke',
    summary: 'revoke an edge or a principal now, as governance (every chain through it stops counting), and say what that ended; writ impact revoke shows it first without changing anything',
    usage: 'EDGE|PRINCIPAL --reason TEXT [--principal] [--json]',
    options: { reason: { type: 'string' }, principal: { type: 'boolean' }, json: { type: 'boolean' } },
    run: ({ values, positionals }) => {
      need(positionals, 1, 'writ revoke EDGE|PRINCIPAL --reason TEXT [--principal] [--json]');
      const reason = typeof values.reason === 'string' ? values.reason.trim() : '';
      // Auditors read it later (writ why, the console, the graph's event log): no default.
      if (reason === '') throw new UsageError('--reason TEXT is required: it is kept with the revocation for whoever audits it');
      if (reason.length > 2000) throw new UsageError(`--reason is at most 2000 characters (as over HTTP), got ${reason.length}`);
      return withWrit(values, async (w) => {
        const name = positionals[0]!;
        const graph = await w.ctx.graph.current();
        const edge = namedEdge(graph, name, values);
        const what = edge ? `edge ${name} (${edge.from} → ${edge.to} [${edge.kind}])` : `principal ${name}`;
        const already = (revokedAt: number, revision: number) => {
          print({ revoked: false, graph_revision: revision, revoked_at: toWireTime(revokedAt) }, values.json, () => `${what} was already revoked at ${toWireTime(revokedAt)}; nothing changed`);
          return 0;
        };
        const revokedAt = edge ? edge.revoked_at : (graph.principal(name)?.revoked_at ?? null);
        if (revokedAt !== null) return already(revokedAt, graph.revision);
        // What it ends, analysed on the graph it is about to change (a copy; the revocation is the next write).
        const impact = await analyseImpact(w.ctx, GOVERNANCE_ID, { revoke: edge ? { edge: name } : { principal: name } });
        const r = edge
          ? await revokeEdge(w.ctx, GOVERNANCE_ID, name, reason).then((x) => ({ revoked: x.revoked, revoked_at: x.edge.revoked_at, graph_revision: x.graph_revision }))
          : await revokePrincipal(w.ctx, GOVERNANCE_ID, name, reason).then((x) => ({ revoked: x.revoked, revoked_at: x.principal.revoked_at, graph_revision: x.graph_revision }));
        // Another process may have revoked it meanwhile: then this changed nothing.
        if (!r.revoked) return already(r.revoked_at!, r.graph_revision);
        print({ revoked: true, graph_revision: r.graph_revision, impact: impactToWire(impact) }, values.json, () =>
          formatImpact(impact, { header: `revoked ${what} at graph revision ${r.graph_revision}: "${reason}"; a running Writ refuses writes on decisions made before it. What it ended (analysed at revision ${impact.graph_revision}, just before):` }));
        return 0;
      });
    },
  },
  {
    name: 'impact revoke',
    summary: 'who would lose what if an edge or a principal were revoked (computed on a copy; changes nothing)',
    usage: 'EDGE|PRINCIPAL [--principal] [--json]',
    options: { principal: { type: 'boolean' }, json: { type: 'boolean' } },
    run: ({ values, positionals }) => {
      need(positionals, 1, 'writ impact revoke EDGE|PRINCIPAL [--principal]');
      return withWrit(values, async (w) => {
        const name = positionals[0]!;
        const r = await analyseImpact(w.ctx, GOVERNANCE_ID, { revoke: namedEdge(await w.ctx.graph.current(), name, values) ? { edge: name } : { principal: name } });
        print(values.json ? impactToWire(r) : r, values.json, () => formatImpact(r));
        return 0;
      });
    },
  },
  {
    name: 'impact delegate',
    summary: 'what a principal would gain from a proposed delegation (computed on a copy; changes nothing); --environments, --fields and --risk-max left out are what FROM holds now',
    usage: 'FROM TO --actions A,B --resources P,Q [--environments E] [--fields F] [--risk-max N] [--max-depth N] [--reason TEXT] [--json]',
    options: {
      actions: { type: 'string' }, resources: { type: 'string' }, environments: { type: 'string' }, fields: { type: 'string' },
      'risk-max': { type: 'string' }, 'max-depth': { type: 'string' }, reason: { type: 'string' }, json: { type: 'boolean' },
    },
    run: ({ values, positionals }) => {
      need(positionals, 2, 'writ impact delegate FROM TO --actions A,B --resources P,Q');
      const list = (name: string) => (typeof values[name] === 'string' ? (values[name] as string).split(',').map((v) => v.trim()).filter((v) => v !== '') : undefined);
      const int = (name: string) => {
        if (typeof values[name] !== 'string') return undefined;
        const n = Number(values[name]);
        if (!Number.isInteger(n) || n < 0) throw new WritError('UNPROCESSABLE', `--${name} must be a non-negative integer, got "${values[name] as string}"`);
        return n;
      };
      const actions = list('actions');
      const resources = list('resources');
      if (!actions || !resources) throw new WritError('UNPROCESSABLE', 'writ impact delegate needs --actions and --resources');
      const environments = list('environments');
      const fields = list('fields');
      const riskMax = int('risk-max');
      const maxDepth = int('max-depth');
      return withWrit(values, async (w) => {
        // What is not said is what FROM holds now for these actions and resources (its live grants and
        // delegations that give any of them: another edge's environments or risk would widen the proposal
        // past every chain FROM has); the proposal is judged on what it does say.
        const held = (await w.ctx.graph.current()).incoming(positionals[0]!, ['grant', 'delegate']).filter((e) => isEdgeLive(e, w.ctx.clock.now())
          && (e.scope.actions.includes('*') || actions.some((a) => e.scope.actions.includes(a)))
          && e.scope.resources.some((p) => resources.some((r) => patternsOverlap(p, r))));
        const union = (pick: (e: Edge) => readonly string[]) => (held.length === 0 ? undefined : [...new Set(held.flatMap(pick))]);
        const heldRisk = held.map((e) => e.scope.constraints.risk_max).filter((n): n is number => typeof n === 'number');
        if (riskMax === undefined && heldRisk.length === 0) throw new UsageError(`--risk-max N is needed: ${positionals[0]!} holds no live grant or delegation for ${actions.join(', ')} on ${resources.join(', ')} to take it from`);
        const scope = {
          actions, resources,
          environments: environments ?? union((e) => e.scope.environments),
          fields: fields ?? union((e) => e.scope.fields),
          risk_max: riskMax ?? (heldRisk.length > 0 ? Math.max(...heldRisk) : undefined),
        };
        const r = await analyseImpact(w.ctx, GOVERNANCE_ID, {
          delegate: {
            from: positionals[0]!, to: positionals[1]!, reason: (values.reason as string | undefined) ?? 'impact analysis',
            scope: Object.fromEntries(Object.entries(scope).filter(([, v]) => v !== undefined)) as typeof scope,
            ...(maxDepth !== undefined ? { max_depth: maxDepth } : {}),
          },
        });
        print(values.json ? impactToWire(r) : r, values.json, () => formatImpact(r));
        return 0;
      });
    },
  },
  {
    name: 'migrate',
    summary: 'apply the store\'s numbered migrations (the SQLite file, or --database postgres://…) and print its schema version',
    run: async ({ values }) => {
      const config = configFrom(values);
      const { engine, version } = await migrateStore(config);
      console.log(`${engine} store ${engine === 'postgres' ? '(WRIT_DATABASE_URL / --database)' : config.dbFile}: schema at version ${version}`);
      return 0;
    },
  },
  {
    name: 'audit verify',
    // 1 is BROKEN: an outage (the database down, an unreadable data directory) or nothing to check with is 3, for a cron job to tell them apart.
    failureExit: 3,
    summary: 'check the receipt hash chains and the graph event log\'s hash chain (exit 1 when either is broken, 3 when it could not check); --archive FILE checks an archive offline; --graph-events FILE checks saved GET /v1/graph/events answers offline (--checkpoint FILE: against the graph head of a saved checkpoint, its JWS or the answer of GET /v1/audit/verify, whose signature is checked; --graph-head REVISION:HASH: against a graph_revision and graph_hash taken on trust); --jwks FILE (a saved /.well-known/jwks.json): check the signed checkpoint with its public keys instead of the data directory\'s keys/',
    usage: '[--archive FILE] [--graph-events FILE [--checkpoint FILE | --graph-head REVISION:HASH]] [--jwks FILE] [--json]',
    options: { json: { type: 'boolean' }, archive: { type: 'string' }, jwks: { type: 'string' }, 'graph-events': { type: 'string' }, 'graph-head': { type: 'string' }, checkpoint: { type: 'string' } },
    run: async ({ values }) => {
      if (typeof values['graph-events'] === 'string') return verifyGraphEventsCommand(values);
      if (typeof values['graph-head'] === 'string') throw new UsageError('--graph-head goes with --graph-events FILE');
      if (typeof values.checkpoint === 'string') throw new UsageError('--checkpoint goes with --graph-events FILE (the store\'s own latest checkpoint is checked without it)');
      if (typeof values.archive === 'string') return verifyArchiveCommand(values);
      const jwks = typeof values.jwks === 'string' ? values.jwks : undefined;
      if (jwks !== undefined) readJwksFile(jwks); // refused before the store is opened
      return withWrit(values, async (w) => {
        const v = await receiptsToVerify(w, jwks).verifyChain(async () => {});
        // With no key at all (a data directory without the servers' keys/, and no --jwks) the latest checkpoint
        // could not be checked, so nothing was: that is not a broken log (BROKEN, exit 1, reads as tampered).
        if (!v.ok && jwks === undefined && v.chain === undefined && v.checkpoint !== undefined && w.ctx.keys.jwks().keys.length === 0) {
          throw new WritError('NOT_FOUND', `nothing was checked: ${v.problem}; pass --jwks FILE (a saved /.well-known/jwks.json) or --data-dir naming the servers' data directory`);
        }
        const restores = (await w.ctx.leases.epochBumps()).filter((b) => b.kind === 'RESTORE');
        print(restores.length === 0 ? withWireCheckpoint(v) : { ...(withWireCheckpoint(v) as object), restores }, values.json, () =>
          [formatVerdict(v), ...restores.map(formatRestore)].join('\n'));
        return v.ok ? 0 : 1;
      });
    },
  },
  {
    name: 'audit archive',
    summary: 'move settled receipts older than --older-than (e.g. 30d) out of the store into --out FILE (JSON lines), behind a signed checkpoint',
    usage: '--older-than DURATION --out FILE [--json]',
    options: { 'older-than': { type: 'string' }, out: { type: 'string' }, json: { type: 'boolean' } },
    run: ({ values }) => {
      if (typeof values['older-than'] !== 'string' || typeof values.out !== 'string') throw new UsageError('usage: writ audit archive --older-than DURATION --out FILE');
      const olderThanMs = duration(values['older-than']);
      const file = values.out;
      outputFolderMustExist(file, 'the archive');
      return withSigningWrit('the checkpoint the archive records', values, async (w) => {
        const r = await w.ctx.receipts.archive({ olderThanMs, file });
        print(r.archived ? withWireCheckpoint(r) : r, values.json, () =>
          r.archived
            ? `archived ${r.entries} entries (${r.receipts} receipts) of ${r.ranges.length} chain(s) to ${r.file}; checkpoint ${r.checkpoint.seq} raised their floors, heads root ${r.checkpoint.root}`
            : `nothing archived: ${r.reason}`);
        return 0;
      });
    },
  },
  {
    name: 'audit checkpoint',
    summary: 'sign a checkpoint over all receipt chain heads now (servers take one every WRIT_RECEIPT_CHECKPOINT_INTERVAL_MS)',
    usage: '[--json]',
    options: { json: { type: 'boolean' } },
    run: ({ values }) =>
      withSigningWrit('a checkpoint', values, async (w) => {
        const c = await w.ctx.receipts.checkpoint();
        print(c ? withWireCheckpoint({ checkpoint: c }) : { checkpoint: null }, values.json, () =>
          c ? `checkpoint ${c.seq}: ${c.chains} chains, heads root ${c.root}${c.graph_hash !== undefined ? `; graph log through revision ${c.graph_revision} (hash ${c.graph_hash})` : ''}` : 'no chain nor the graph log moved since the latest checkpoint: none taken');
        return 0;
      }),
  },
  {
    name: 'backup',
    summary: 'take a consistent copy of the SQLite store into FILE, online (Writ may keep serving)',
    usage: 'FILE [--json]',
    options: { json: { type: 'boolean' } },
    run: async ({ values, positionals }) => {
      need(positionals, 1, 'writ backup FILE');
      const config = configFrom(values);
      if (config.databaseUrl !== null) throw postgresHasItsOwn('backup');
      outputFolderMustExist(positionals[0]!, 'the backup');
      await requireStore(config);
      const db = openForBackup(config.dbFile);
      try {
        const b = await backupSqliteStore(db, positionals[0]!);
        print(b, values.json, () =>
          `backed up ${config.dbFile} to ${b.file}: ${b.bytes} bytes, schema ${b.schema_version}, receipt head seq ${b.receipt_head.seq} (hash ${b.receipt_head.hash ?? '—: no entries'}), ${graphHeadText(b.graph_revision, b.graph_head)}, ${b.lease_keys} lease keys (highest epoch ${b.max_epoch})`);
        return 0;
      } finally {
        db.close();
      }
    },
  },
  {
    name: 'restore',
    summary: 'put a backup in place of a stopped Writ\'s SQLite store; fencing epochs rise by --epoch-margin N (or --trust-backup)',
    usage: 'FILE (--epoch-margin N | --trust-backup) [--replace-damaged] [--reason TEXT] [--json]',
    options: { 'epoch-margin': { type: 'string' }, 'trust-backup': { type: 'boolean' }, 'replace-damaged': { type: 'boolean' }, reason: { type: 'string' }, json: { type: 'boolean' } },
    run: async ({ values, positionals }) => {
      need(positionals, 1, 'writ restore FILE (--epoch-margin N | --trust-backup)');
      const config = configFrom(values);
      if (config.databaseUrl !== null) throw postgresHasItsOwn('restore');
      const margin = epochMarginOf(values);
      const r = await restoreSqliteStore(positionals[0]!, config.dbFile, {
        epochMargin: margin,
        actor: operator(),
        reason: typeof values.reason === 'string' ? values.reason : `restore of ${positionals[0]!}`,
        now: systemClock.now(),
        replaceDamaged: values['replace-damaged'] === true,
      });
      print(r, values.json, () =>
        [
          `restored ${r.restored_from.file} into ${r.data_file}${r.previous_kept_at ? ` (the replaced file is kept at ${r.previous_kept_at})` : ''}`,
          ...(typeof r.bump.detail.replaced_damaged === 'string' ? [`the replaced store was damaged (${r.bump.detail.replaced_damaged}): its epochs were not read, only the margin keeps them from repeating`] : []),
          margin > 0
            ? `fencing epochs raised by ${margin} on ${r.bump.keys} keys (highest now ${r.bump.max_epoch}); keys leased for the first time start above ${r.bump.floor}; ${r.bump.leases_ended} live leases of the backup ended`
            : 'fencing epochs unchanged (--trust-backup): only safe if nothing was leased after the backup was taken',
          formatRestore(r.bump),
        ].join('\n'));
      return 0;
    },
  },
  {
    name: 'store copy',
    summary: "move a stopped Writ from its SQLite file to PostgreSQL (--to postgres://…, a database no Writ has used), for several replicas: the graph's history, leases and fencing epochs, spent single-use ids, receipts and checkpoints, incidents, in one transaction; then checks the copy's receipt chains",
    usage: '--to postgres://… [--json]',
    options: { to: { type: 'string' }, json: { type: 'boolean' } },
    run: async ({ values }) => {
      const usage = 'writ store copy --to postgres://USER@HOST:PORT/DATABASE [--data-dir DIR] [--json]';
      if (typeof values.to !== 'string' || !/^postgres(ql)?:\/\//.test(values.to)) throw new UsageError(`--to takes the PostgreSQL database to copy into (postgres://…); usage: ${usage}`);
      const config = configFrom(values);
      if (config.databaseUrl !== null) throw new UsageError('writ store copy reads the data directory\'s SQLite file: leave out --database (and WRIT_DATABASE_URL); the database it copies into is --to');
      const r = await copySqliteToPostgres(config.dbFile, values.to);
      // The copy read as every replica will read it: the receipt chains, and the checkpoint with the
      // data directory's keys. Nothing is written to the copy (no migration, policy or bootstrap), and a
      // failure here does not hide that the copy is committed.
      const keysDir = join(config.dataDir, 'keys');
      let verdict: ReceiptChainVerdict | null = null;
      let unverified: string | null = null;
      try {
        verdict = await verifyPostgresReceipts(values.to, existsSync(keysDir) ? keysDir : null);
      } catch (e) {
        unverified = `the copy is committed, but it could not be verified here (${(e as Error).message}): run writ audit verify --database … where the replicas run`;
      }
      print({ ...r, verify: verdict === null ? { ok: false, problem: unverified } : withWireCheckpoint(verdict) }, values.json, () =>
        [
          r.unfinished_copy === 'had committed'
            ? `an earlier writ store copy of ${r.from} into this PostgreSQL database (schema ${r.schema_version}) had committed before it was stopped: nothing was copied again, and the file's mark is confirmed. The database holds:`
            : `copied ${r.from} into the PostgreSQL database (schema ${r.schema_version}), in one transaction${r.unfinished_copy === 'copied again' ? ' (an earlier copy into it had been stopped before it committed)' : ''}:`,
          `  graph: ${r.copied.graph_events} events (revision ${r.graph_revision})`,
          `  leases: ${r.lease_keys} keys (highest fencing epoch ${r.max_epoch}), ${r.copied.leases} leases, ${r.copied.lease_history} history events, ${r.copied.lease_epoch_bumps} epoch bumps and restores`,
          `  single-use ids spent: ${r.copied.single_use_ids} (an assertion, a decision or an approval spent on the file stays spent)`,
          `  receipts: ${r.copied.receipts} (${r.copied.receipt_entries} entries on ${r.copied.receipt_chains} chains, head seq ${r.receipt_head.seq}), ${r.copied.receipt_head_checkpoints + r.copied.receipt_checkpoints} checkpoints; incidents: ${r.copied.incidents}`,
          ...(r.not_copied.waiting_callers > 0 ? [`  not copied: ${r.not_copied.waiting_callers} callers waiting in lease queues (they waited on the stopped server and ask again)`] : []),
          verdict === null ? unverified! : formatVerdict(verdict),
          `next: start every replica with --database (WRIT_DATABASE_URL) and this data directory's keys/ and admin.jwk (the keys that signed its decisions and checkpoints). ${r.from} is marked as moved: a server started on it refuses it (STORE_MOVED). To go back to the file after replicas have run, raise its epochs and lift the mark (writ lease bump-epochs --by N --reason TEXT --lift-move-mark on it, N at least the highest epoch issued on the database): what was written on the database (receipts, spent ids) is not in the file`,
        ].join('\n'));
      return verdict?.ok === true ? 0 : 1;
    },
  },
  {
    name: 'lease bump-epochs',
    summary:
      'raise every fencing epoch (and the floor of new keys) by N, ending live leases: after a database was recovered to an earlier point. On a SQLite file moved to PostgreSQL (writ store copy) it is refused unless --lift-move-mark, which also lifts the mark so that servers start on the file again: the file cannot know the epochs the database issued since, so N must be at least the database\'s highest fencing epoch, or epochs it issued are issued again',
    usage: '--by N --reason TEXT [--lift-move-mark] [--json]',
    options: { by: { type: 'string' }, reason: { type: 'string' }, 'lift-move-mark': { type: 'boolean' }, json: { type: 'boolean' } },
    run: async ({ values }) => {
      const by = typeof values.by === 'string' && /^\d+$/.test(values.by) ? Number(values.by) : NaN;
      if (!(by >= 1)) throw new WritError('UNPROCESSABLE', '--by N (a positive integer) is required');
      if (typeof values.reason !== 'string') throw new WritError('UNPROCESSABLE', '--reason TEXT is required (it is recorded)');
      const reason = values.reason;
      const config = configFrom(values);
      // The deliberate way back to a SQLite file moved to PostgreSQL (writ store copy): its epochs are
      // raised first, then its refusal (STORE_MOVED) is lifted, so a server may start on it again. Only
      // when asked: whether N is enough depends on what the database issued, which the file cannot tell.
      const lift = values['lift-move-mark'] === true;
      if (lift && config.databaseUrl !== null) {
        throw new UsageError("--lift-move-mark lifts the mark writ store copy leaves on the data directory's SQLite file; with --database (or WRIT_DATABASE_URL) the bump runs on PostgreSQL, which has no such mark. To raise the database's epochs, leave out --lift-move-mark; to take a moved SQLite file back, leave out --database and unset WRIT_DATABASE_URL");
      }
      if (config.databaseUrl === null && !lift && existsSync(config.dbFile)) {
        const moved = readStoreMove(config.dbFile);
        if (moved !== null) {
          const finish = moved.pending ? ' (a copy that did not finish: running writ store copy --to … again finishes it)' : '';
          throw new WritError('STORE_MOVED', `${config.dbFile} is marked as moved to the PostgreSQL database ${moved.moved_to}${finish}. Bumping its epochs takes the file back only with --lift-move-mark, which then lifts the mark so that servers start on the file again: give it only when N (here ${by}) is at least the highest fencing epoch the database issued (the file cannot know them: with less, epochs the database issued are issued again); nothing was changed`, { moved_to: moved.moved_to, moved_at: moved.at });
        }
      }
      const b = await withWrit(values, (w) => w.ctx.leases.bumpEpochs({ kind: 'BUMP', margin: by, actor: operator(), reason, detail: {} }), config, { allowMovedStore: lift });
      const movedTo = lift ? liftStoreMove(config.dbFile, operator(), reason, systemClock.now()) : null;
      print(movedTo === null ? b : { ...b, taken_back_from: movedTo }, values.json, () => [
        `fencing epochs raised by ${b.margin} on ${b.keys} keys (highest now ${b.max_epoch}); keys leased for the first time start above ${b.floor}; ${b.leases_ended} live leases ended`,
        ...(movedTo === null ? [] : [`${config.dbFile} had been moved to ${movedTo} (writ store copy): servers may start on it again; what was written on the database is not in it`]),
      ].join('\n'));
      return 0;
    },
  },
  {
    name: 'lease prune-history',
    summary: 'retention: delete lease history events older than an age (each key keeps its latest; epochs are never pruned)',
    usage: '--older-than 90d',
    options: { 'older-than': { type: 'string' } },
    run: ({ values }) => {
      if (typeof values['older-than'] !== 'string') throw new WritError('UNPROCESSABLE', 'say how old: --older-than 90d');
      const olderThan = values['older-than'];
      const olderThanMs = duration(olderThan);
      return withWrit(values, async (w) => {
        const n = await w.ctx.leases.pruneHistory(olderThanMs);
        console.log(`pruned ${n} lease history event(s) older than ${olderThan}`);
        return 0;
      });
    },
  },
  {
    name: 'lease bumps',
    summary: 'every restore and epoch bump recorded, oldest first',
    usage: '[--json]',
    options: { json: { type: 'boolean' } },
    run: ({ values }) =>
      withWrit(values, async (w) => {
        const bumps = await w.ctx.leases.epochBumps();
        print(bumps, values.json, () => (bumps.length === 0 ? '(no restores or epoch bumps)' : bumps.map(formatBump).join('\n')));
        return 0;
      }),
  },
  {
    name: 'lease ls',
    summary: `leases: holder, fencing epoch, expiry, transitions (Kubernetes Lease vocabulary), in key order, ${LEASE_PAGE.defaultLimit} at a time (--limit N, at most ${LEASE_PAGE.maxLimit}; says how to get the next page); --resource KEY: that key, and for a resource its fields' keys (KEY#field); --held: only the keys held now (read as such, not every key ever leased; one answer, not paged)`,
    usage: '[--resource KEY] [--holder ID] [--held] [--limit N] [--after KEY] [--json]',
    options: { resource: { type: 'string' }, holder: { type: 'string' }, held: { type: 'boolean' }, limit: { type: 'string' }, after: { type: 'string' }, json: { type: 'boolean' } },
    run: ({ values }) => {
      // As GET /v1/leases checks its query: the same bounds and paging rules.
      const query: LeaseListQuery = {};
      const resource = typeof values.resource === 'string' ? values.resource : undefined;
      // A resource (a receipt's resource_key) is leased per field (KEY#field): its keys are those too.
      if (resource !== undefined) {
        if (resource.includes('#')) query.key = resource;
        else query.resource = resource;
      }
      if (typeof values.holder === 'string') query.holder = values.holder;
      if (values.held === true) {
        if (values.limit !== undefined || values.after !== undefined) throw new UsageError('--held lists every key held now in one answer: leave out --limit and --after');
        query.state = 'HELD';
      } else {
        const limit = values.limit;
        if (limit !== undefined) {
          const n = typeof limit === 'string' && /^\d{1,16}$/.test(limit) ? Number(limit) : NaN;
          if (!(n >= 1 && n <= LEASE_PAGE.maxLimit)) throw new UsageError(`--limit is a whole number from 1 to ${LEASE_PAGE.maxLimit}, got "${String(limit)}"`);
          query.limit = n;
        }
        if (values.after !== undefined) {
          const after = String(values.after);
          // An empty one (an unset shell variable) would start again from the first key.
          if (after.length < 1 || after.length > MAX_KEY_LENGTH) throw new UsageError(`--after is the key a page ended with (the next it gave), 1 to ${MAX_KEY_LENGTH} characters, got ${after.length}`);
          query.after = after;
        }
      }
      return withWrit(values, async (w) => {
        const page = await listLeases(w.ctx, query);
        const { leases } = page;
        print({ leases: leases.map(leaseRecordToWire), next: page.next }, values.json, () =>
          leases.length === 0
            ? '(no leases)'
            : leases.map((l) => `${l.key.padEnd(36)} ${l.state.padEnd(7)} holder ${l.holderIdentity ?? '—'}  epoch ${l.epoch}  expires ${toWireTimeOrNull(l.expiresAt) ?? '—'}  transitions ${l.leaseTransitions}`).join('\n'));
        // A page cut short says so (on stderr, so the list stays the list), and how to go on.
        if (!values.json && page.next !== null) console.error(`(${leases.length} shown; more keys: add --after '${page.next.replaceAll("'", "'\\''")}')`);
        return 0;
      });
    },
  },
];

function postgresHasItsOwn(what: 'backup' | 'restore'): WritError {
  return new WritError('UNPROCESSABLE', `writ ${what} is for the embedded SQLite store; on PostgreSQL, backups are the database's (pg_dump, or base backups and WAL archiving for point-in-time recovery): after restoring one, run \`writ lease bump-epochs --by N --reason …\` before starting Writ (README, "Backup and restore")`);
}

function epochMarginOf(values: CommandArgs['values']): number {
  const margin = values['epoch-margin'];
  const trust = values['trust-backup'] === true;
  if ((margin === undefined) === !trust) {
    throw new WritError('UNPROCESSABLE', 'say how to keep fencing epochs from repeating: --epoch-margin N (every epoch rises by N; N above the number of acquisitions of any one key since the backup was taken) or --trust-backup (the backup is the latest state: nothing was leased after it), not both');
  }
  if (trust) return 0;
  if (typeof margin !== 'string' || !/^\d+$/.test(margin) || Number(margin) < 1) throw new WritError('UNPROCESSABLE', `--epoch-margin must be a positive integer, not "${String(margin)}"`);
  return Number(margin);
}

function operator(): string {
  try {
    return `operator:${userInfo().username}`;
  } catch {
    return 'operator';
  }
}

/** "graph revision 12 (hash …)": a store's graph log, its newest revision and the head of its hash chain. */
function graphHeadText(revision: number, head: { revision: number; hash: string } | null, hashedByMigration = false): string {
  if (head === null) return `graph revision ${revision} (not hashed: a store from before the graph log's hash chain)`;
  if (revision === 0) return 'graph revision 0 (no events)';
  if (hashedByMigration) return `graph revision ${revision} (hash ${head.hash}, hashed by the restore's migration: the backup is from before the graph log's hash chain)`;
  return head.revision === revision
    ? `graph revision ${revision} (hash ${head.hash})`
    : `graph revision ${revision}, hashed through ${head.revision} (hash ${head.hash}; the ${revision - head.revision} after it appended by a Writ from before the chain)`;
}

function formatBump(b: EpochBump): string {
  return b.kind === 'RESTORE' ? formatRestore(b) : `#${b.seq} ${toWireTime(b.at)} BUMP by ${b.actor}: epochs +${b.margin} on ${b.keys} keys, floor ${b.floor}, ${b.leases_ended} leases ended (${b.reason})`;
}

function formatRestore(b: EpochBump): string {
  const head = b.detail.backup_receipt_head as { seq?: number; hash?: string | null } | undefined;
  const seq = head?.seq ?? 0;
  const held = seq === 0 ? 'the backup held no receipt entries' : `the backup held the receipt log up to entry seq ${seq} (hash ${head?.hash ?? '—'})`;
  // Restores recorded before the graph head was: their detail has the revision alone.
  const graph = typeof b.detail.backup_graph_revision === 'number' && b.detail.backup_graph_head !== undefined
    ? ` and the ${graphHeadText(b.detail.backup_graph_revision, b.detail.backup_graph_head as { revision: number; hash: string } | null, b.detail.backup_graph_hashed_by_migration === true)}`
    : '';
  return `#${b.seq} ${toWireTime(b.at)} RESTORE by ${b.actor} from ${String(b.detail.backup_file)}: ${held}${graph}; entries after seq ${seq} were written after the restore, and whatever the replaced store had after it is not in this chain; epochs +${b.margin}, floor ${b.floor} (${b.reason})`;
}
