import { isIP } from 'node:net';
import { resolve } from 'node:path';
import { WritError } from '../errors.js';

/** Everything the service needs to know about its surroundings. Loaded from env + CLI flags. */
export interface WritConfig {
  /** Directory for the SQLite file, signing keys, the admin credential and the built policy bundle. */
  dataDir: string;
  /** The embedded store (the default): one SQLite file in the data directory. */
  dbFile: string;
  /**
   * A shared database instead (several replicas): `postgres://…` (WRIT_DATABASE_URL or --database).
   * Null: the SQLite file.
   */
  databaseUrl: string | null;
  host: string;
  port: number;
  /** Rego sources and the directory the built bundle (policy.wasm, data.json, revision) is written to. */
  policiesDir: string;
  bundleDir: string;
  /** The console's built static assets (scripts/build-console.mjs writes them; `writ serve` serves them at /console). */
  consoleDir: string;
  /** Audience of caller assertions (who they are addressed to). */
  audience: string;
  /** Audience of decisions (the enforcement point that accepts them). */
  gatewayAudience: string;
  decisionTtlMs: number;
  maxAssertionTtlMs: number;
  /**
   * Longest lifetime of a caller session (POST /v1/sessions; a session's `ttl_ms` may ask for less, from
   * 1 000 ms); 0 turns caller sessions off (CALLER_SESSIONS_DISABLED).
   */
  callerSessionMaxTtlMs: number;
  bodyLimitBytes: number;
  /**
   * The reverse proxies in front of Writ whose X-Forwarded-* headers are believed (fastify's
   * `trustProxy`: addresses or CIDRs, `loopback`…, comma-separated), so that a request that reached
   * the proxy over TLS counts as TLS (the console's session cookie is then `Secure`), and the client's
   * address and host are the forwarded ones (the decision log's `requested_by`, the AuthZEN metadata's
   * URLs). Null: none (only a TLS socket into Writ itself counts).
   */
  trustProxy: string | null;
  /** Deepest nesting of objects and arrays a JSON body may have (the top-level value is depth 1). */
  jsonMaxDepth: number;
  /** Requests per second each principal may make (a token bucket of `burst`); 0 turns the limit off. Governance is exempt. */
  rateLimit: { perSecond: number; burst: number };
  /** Writes (POST /v1/actions) in flight at once; one more is OVERLOADED (503) with Retry-After. */
  maxInflightWrites: number;
  /**
   * Unrevoked, unexpired delegations one principal may have given one other principal at once; one more is
   * TOO_MANY_DELEGATIONS (409). Anyone who may delegate may delegate to anyone, and each such edge is
   * searched by every resolution of the delegate: this bounds what a third party adds to it.
   */
  maxDelegationsBetween: number;
  /** Lease streams (GET /v1/leases/stream) one principal may have open at once; one more is RATE_LIMITED (429). */
  maxLeaseStreamsPerPrincipal: number;
  /**
   * How often a lease stream is pinged; a peer from which no pong was read for two intervals in a row is
   * cut off (so within two to three intervals). Shorter than a proxy's idle timeout keeps streams open behind it.
   */
  leaseStreamPingMs: number;
  /** On SIGTERM/SIGINT, `writ serve` waits this long for admitted requests to finish (new ones get OVERLOADED) before it closes. */
  drainTimeoutMs: number;
  /** How often a server signs a checkpoint over all receipt chain heads (when a chain moved); 0: never. */
  receiptCheckpointIntervalMs: number;
  /**
   * Every graph event must be hashed (WRIT_GRAPH_REQUIRE_HASHES): once no Writ from before the graph log's
   * hash chain runs on the store, an unhashed event is a break (`writ audit verify`), and a graph change
   * appended over one is refused (GRAPH_LOG_UNHASHED) rather than hashing it. Off by default: during a
   * rolling upgrade older replicas append unhashed events, and the next append hashes them.
   */
  graphRequireHashes: boolean;
  /**
   * The most chains whose latest checkpoint's leaves a server keeps in memory (with their tree, ~170 MB per
   * million chains), so that the next checkpoint costs what moved; above it (or 0) every checkpoint reads and
   * hashes every chain.
   */
  receiptCheckpointKeptChains: number;
  /** How long kept leaves are built on before a checkpoint reads and checks every chain again (0: every time). */
  receiptCheckpointFullPassMs: number;
  /**
   * PostgreSQL: how far this replica's clock may be from the database's (measured, src/service/database-clock.ts)
   * before `writ serve` warns (`warnMs`), and before GET /readyz answers 503 CLOCK_SKEW (`maxMs`; 0: never).
   */
  clockOffset: { warnMs: number; maxMs: number };
  /** Governed priority per priority class; the lease queue uses these, never a caller's claim. */
  priorities: Record<string, number>;
  lease: { minTtlMs: number; maxTtlMs: number; defaultTtlMs: number; maxWaitMs: number; maxWaitersPerKey: number; maxWaitersPerPrincipal: number };
  /** Upstream routes: resource pattern → base URL of the system that holds that state. */
  upstreams: { pattern: string; url: string; timeoutMs: number; environment: string }[];
  /** Where decision log events go (OPA's decision log shape); both sinks off by default. */
  decisionLog: DecisionLogConfig;
}

export interface DecisionLogConfig {
  /** Append events as JSON lines to this file; null = off. */
  file: string | null;
  /** POST gzipped batches to this URL (OPA's decision log service API, e.g. http://127.0.0.1:9000/logs); null = off. */
  url: string | null;
  /** Added to every event's `labels` (besides `id`, `app` and `version`). */
  labels: Record<string, string>;
  /** JSON pointers under /input or /result removed from every event before it leaves (listed in the event's `erased`). */
  mask: string[];
  /** Events held per sink while it is slow or down; beyond this the oldest are dropped (and counted). */
  bufferEvents: number;
  /** At most this many events per upload or file write. */
  batchEvents: number;
  /** A non-full batch is sent after at most this long. */
  flushMs: number;
  /** Retry backoff after a failed upload: exponential from min to max, with jitter. */
  retryMinMs: number;
  retryMaxMs: number;
  /** An upload not answered in this time counts as failed. */
  timeoutMs: number;
}

export const DEFAULT_PRIORITIES: Record<string, number> = {
  incident: 100,
  governance: 90,
  control: 80,
  human: 60,
  service: 40,
  agent: 20,
};

function int(name: string, value: string | undefined, fallback: number): number {
  if (value === undefined || value === '') return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new WritError('UNPROCESSABLE', `configuration ${name} must be a non-negative integer, got "${value}"`);
  return n;
}

function flag(name: string, value: string | undefined): boolean {
  if (value === undefined || value === '' || value === '0' || value === 'false') return false;
  if (value === '1' || value === 'true') return true;
  throw new WritError('UNPROCESSABLE', `configuration ${name} must be 1 or true (on), 0 or false (off), got "${value}"`);
}

function list(value: string | undefined): string[] {
  return (value ?? '').split(',').map((v) => v.trim()).filter((v) => v !== '');
}

function decisionLogConfig(env: NodeJS.ProcessEnv): DecisionLogConfig {
  const labels: Record<string, string> = {};
  for (const pair of list(env.WRIT_DECISION_LOG_LABELS)) {
    const i = pair.indexOf('=');
    if (i <= 0) throw new WritError('UNPROCESSABLE', `configuration WRIT_DECISION_LOG_LABELS must be key=value pairs separated by commas, got "${pair}"`);
    labels[pair.slice(0, i).trim()] = pair.slice(i + 1).trim();
  }
  const file = env.WRIT_DECISION_LOG_FILE ? resolve(env.WRIT_DECISION_LOG_FILE) : null;
  return {
    file,
    url: env.WRIT_DECISION_LOG_URL || null,
    labels,
    mask: list(env.WRIT_DECISION_LOG_MASK),
    bufferEvents: int('WRIT_DECISION_LOG_BUFFER_EVENTS', env.WRIT_DECISION_LOG_BUFFER_EVENTS, 10_000),
    batchEvents: int('WRIT_DECISION_LOG_BATCH_EVENTS', env.WRIT_DECISION_LOG_BATCH_EVENTS, 500),
    flushMs: int('WRIT_DECISION_LOG_FLUSH_MS', env.WRIT_DECISION_LOG_FLUSH_MS, 1_000),
    retryMinMs: int('WRIT_DECISION_LOG_RETRY_MIN_MS', env.WRIT_DECISION_LOG_RETRY_MIN_MS, 100),
    retryMaxMs: int('WRIT_DECISION_LOG_RETRY_MAX_MS', env.WRIT_DECISION_LOG_RETRY_MAX_MS, 30_000),
    timeoutMs: int('WRIT_DECISION_LOG_TIMEOUT_MS', env.WRIT_DECISION_LOG_TIMEOUT_MS, 5_000),
  };
}

/** A decision log configuration that can work: a URL Writ can POST to, masks it can apply, sane sizes. */
export function checkDecisionLogConfig(c: DecisionLogConfig): void {
  const bad = (what: string) => new WritError('UNPROCESSABLE', `decision log configuration: ${what}`);
  if (c.url !== null) {
    let url: URL;
    try {
      url = new URL(c.url);
    } catch {
      throw bad(`WRIT_DECISION_LOG_URL "${c.url}" is not a URL`);
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw bad(`WRIT_DECISION_LOG_URL must be http(s), got "${c.url}"`);
  }
  for (const pointer of c.mask) {
    if (!/^\/(input|result)(\/[^/]+)+$/.test(pointer)) throw bad(`mask "${pointer}" must be a JSON pointer below /input or /result (e.g. /input/properties/subject/email)`);
  }
  if (c.bufferEvents < 1 || c.batchEvents < 1) throw bad('buffer and batch sizes must be at least 1 event');
  if (c.flushMs < 1 || c.timeoutMs < 1 || c.retryMinMs < 1 || c.retryMaxMs < c.retryMinMs) throw bad('flush, timeout and retry times must be at least 1 ms, and retry max >= retry min');
}

/**
 * WRIT_TRUST_PROXY: the proxies' addresses (IPv4/IPv6, with an optional /prefix of at least /8 or /16)
 * and the names `loopback`, `linklocal`, `uniquelocal`; never "everyone" (any client could then claim
 * TLS, another address in the decision log, another host in the AuthZEN metadata).
 */
function trustProxyOf(value: string | undefined): string | null {
  const v = value?.trim();
  if (!v) return null;
  const bad = v.split(',').map((p) => p.trim()).filter((p) => {
    if (['loopback', 'linklocal', 'uniquelocal'].includes(p)) return false;
    const [address = '', prefix, ...rest] = p.split('/');
    const kind = isIP(address);
    // A prefix wider than /8 (IPv4) or /16 (IPv6) is "everyone" in all but name (0.0.0.0/0, ::/0).
    return kind === 0 || rest.length > 0 || (prefix !== undefined && !(/^\d+$/.test(prefix) && Number(prefix) >= (kind === 4 ? 8 : 16) && Number(prefix) <= (kind === 4 ? 32 : 128)));
  });
  if (bad.length > 0) throw new WritError('UNPROCESSABLE', `configuration WRIT_TRUST_PROXY must name the proxies in front of Writ (addresses or CIDRs no wider than /8 for IPv4 or /16 for IPv6, loopback, linklocal, uniquelocal; comma-separated), got "${bad.join(', ')}"`);
  return v;
}

/**
 * A database URL fit to print: its password (if any) and any query or fragment (which may carry one)
 * become "…"; the user, host and database stay, for the reader to check. Read as the driver reads it
 * (WHATWG URL: the user part ends at the last "@", so a password may hold an "@" unencoded). A URL the
 * driver cannot read, or reads with no user but has an "@" further on, shows nothing before its last
 * "@"; a string that is no URL at all (libpq's `host=… password=…`) shows none of its password.
 * Masking a masked URL changes nothing.
 */
export function maskDatabaseUrl(url: string): string {
  const scheme = /^[a-z][a-z0-9+.-]*:\/\//i.exec(url)?.[0];
  if (scheme === undefined) return url.replace(/(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S*)/gi, '$1…').replace(/[?#][^]*$/, (m) => `${m[0]}…`);
  let u: URL | undefined;
  try {
    u = new URL(url);
  } catch {
    u = undefined;
  }
  // An "@" the driver took for part of a port, path, query or fragment may end a password all the same.
  if (u !== undefined && u.username === '' && u.password === '' && url.includes('@')) u = undefined;
  if (u === undefined) {
    const at = url.lastIndexOf('@');
    const rest = at < scheme.length ? url.slice(scheme.length) : url.slice(at + 1);
    return `${scheme}${at < scheme.length ? '' : '…@'}${rest.replace(/[?#][^]*$/, (m) => `${m[0]}…`)}`;
  }
  // The user as written (u.username is percent-encoded: a masked URL's "…" would become %E2%80%A6).
  const user = (u.username === '' ? '' : /^[^:@]*/.exec(url.slice(scheme.length))![0]) + (u.password === '' ? '' : ':…');
  return `${u.protocol}//${user}${user === '' ? '' : '@'}${u.host}${u.pathname}${u.search === '' ? '' : '?…'}${u.hash === '' ? '' : '#…'}`;
}

/** Reads configuration from environment variables (WRIT_*), with overrides from the caller (CLI flags). */
export function loadConfig(overrides: Partial<WritConfig> = {}, env: NodeJS.ProcessEnv = process.env): WritConfig {
  const dataDir = resolve(overrides.dataDir ?? env.WRIT_DATA_DIR ?? 'data');
  const upstreamUrl = env.WRIT_UPSTREAM_URL || 'http://127.0.0.1:4100';
  const base: WritConfig = {
    dataDir,
    dbFile: resolve(dataDir, 'writ.sqlite'),
    databaseUrl: env.WRIT_DATABASE_URL || null,
    host: env.WRIT_HOST ?? '127.0.0.1',
    port: int('WRIT_PORT', env.WRIT_PORT, 4000),
    policiesDir: resolve(env.WRIT_POLICIES_DIR ?? 'policies'),
    bundleDir: resolve(env.WRIT_BUNDLE_DIR ?? 'build/policy'),
    consoleDir: resolve(env.WRIT_CONSOLE_DIR ?? 'build/console'),
    audience: env.WRIT_AUDIENCE ?? 'writ',
    gatewayAudience: env.WRIT_GATEWAY_AUDIENCE ?? 'writ-gateway',
    decisionTtlMs: int('WRIT_DECISION_TTL_MS', env.WRIT_DECISION_TTL_MS, 30_000),
    maxAssertionTtlMs: 5 * 60_000,
    callerSessionMaxTtlMs: int('WRIT_CALLER_SESSION_MAX_TTL_MS', env.WRIT_CALLER_SESSION_MAX_TTL_MS, 3_600_000),
    bodyLimitBytes: int('WRIT_BODY_LIMIT', env.WRIT_BODY_LIMIT, 256 * 1024),
    trustProxy: trustProxyOf(env.WRIT_TRUST_PROXY),
    jsonMaxDepth: int('WRIT_JSON_MAX_DEPTH', env.WRIT_JSON_MAX_DEPTH, 64),
    rateLimit: {
      perSecond: int('WRIT_RATE_LIMIT_PER_S', env.WRIT_RATE_LIMIT_PER_S, 0),
      burst: int('WRIT_RATE_LIMIT_BURST', env.WRIT_RATE_LIMIT_BURST, 2 * int('WRIT_RATE_LIMIT_PER_S', env.WRIT_RATE_LIMIT_PER_S, 0)),
    },
    maxInflightWrites: int('WRIT_MAX_INFLIGHT_WRITES', env.WRIT_MAX_INFLIGHT_WRITES, 256),
    maxDelegationsBetween: int('WRIT_MAX_DELEGATIONS_BETWEEN', env.WRIT_MAX_DELEGATIONS_BETWEEN, 16),
    maxLeaseStreamsPerPrincipal: int('WRIT_LEASE_STREAMS_PER_PRINCIPAL', env.WRIT_LEASE_STREAMS_PER_PRINCIPAL, 64),
    leaseStreamPingMs: int('WRIT_LEASE_STREAM_PING_MS', env.WRIT_LEASE_STREAM_PING_MS, 30_000),
    drainTimeoutMs: int('WRIT_DRAIN_TIMEOUT_MS', env.WRIT_DRAIN_TIMEOUT_MS, 15_000),
    receiptCheckpointIntervalMs: int('WRIT_RECEIPT_CHECKPOINT_INTERVAL_MS', env.WRIT_RECEIPT_CHECKPOINT_INTERVAL_MS, 60_000),
    graphRequireHashes: flag('WRIT_GRAPH_REQUIRE_HASHES', env.WRIT_GRAPH_REQUIRE_HASHES),
    receiptCheckpointKeptChains: int('WRIT_RECEIPT_CHECKPOINT_KEPT_CHAINS', env.WRIT_RECEIPT_CHECKPOINT_KEPT_CHAINS, 4_000_000),
    receiptCheckpointFullPassMs: int('WRIT_RECEIPT_CHECKPOINT_FULL_PASS_MS', env.WRIT_RECEIPT_CHECKPOINT_FULL_PASS_MS, 3_600_000),
    clockOffset: {
      warnMs: int('WRIT_CLOCK_OFFSET_WARN_MS', env.WRIT_CLOCK_OFFSET_WARN_MS, 1_000),
      maxMs: int('WRIT_CLOCK_OFFSET_MAX_MS', env.WRIT_CLOCK_OFFSET_MAX_MS, 60_000),
    },
    priorities: DEFAULT_PRIORITIES,
    lease: {
      minTtlMs: int('WRIT_LEASE_MIN_TTL_MS', env.WRIT_LEASE_MIN_TTL_MS, 500),
      maxTtlMs: int('WRIT_LEASE_MAX_TTL_MS', env.WRIT_LEASE_MAX_TTL_MS, 5 * 60_000),
      defaultTtlMs: int('WRIT_LEASE_DEFAULT_TTL_MS', env.WRIT_LEASE_DEFAULT_TTL_MS, 15_000),
      maxWaitMs: int('WRIT_LEASE_MAX_WAIT_MS', env.WRIT_LEASE_MAX_WAIT_MS, 60_000),
      maxWaitersPerKey: int('WRIT_LEASE_MAX_WAITERS', env.WRIT_LEASE_MAX_WAITERS, 64),
      maxWaitersPerPrincipal: int('WRIT_LEASE_MAX_WAITERS_PER_PRINCIPAL', env.WRIT_LEASE_MAX_WAITERS_PER_PRINCIPAL, 16),
    },
    upstreams: [
      {
        pattern: 'wp:post:*',
        url: upstreamUrl,
        timeoutMs: int('WRIT_UPSTREAM_TIMEOUT_MS', env.WRIT_UPSTREAM_TIMEOUT_MS, 5_000),
        environment: env.WRIT_UPSTREAM_ENVIRONMENT ?? 'production',
      },
    ],
    decisionLog: decisionLogConfig(env),
  };
  const merged = { ...base, ...overrides };
  if (merged.rateLimit.perSecond > 0 && merged.rateLimit.burst < 1) throw new WritError('UNPROCESSABLE', 'WRIT_RATE_LIMIT_BURST must be at least 1 when a rate limit is set');
  if (merged.port > 65_535) throw new WritError('UNPROCESSABLE', `configuration WRIT_PORT must be a port number from 0 to 65535, got "${merged.port}"`);
  if (merged.callerSessionMaxTtlMs !== 0 && merged.callerSessionMaxTtlMs < 1_000) throw new WritError('UNPROCESSABLE', `WRIT_CALLER_SESSION_MAX_TTL_MS must be 0 (caller sessions off) or at least 1000, got ${merged.callerSessionMaxTtlMs}`);
  if (merged.maxInflightWrites < 1) throw new WritError('UNPROCESSABLE', 'WRIT_MAX_INFLIGHT_WRITES must be at least 1');
  if (merged.maxDelegationsBetween < 1) throw new WritError('UNPROCESSABLE', 'WRIT_MAX_DELEGATIONS_BETWEEN must be at least 1');
  if (merged.maxLeaseStreamsPerPrincipal < 1) throw new WritError('UNPROCESSABLE', 'WRIT_LEASE_STREAMS_PER_PRINCIPAL must be at least 1');
  // Node clamps a longer interval to 1 ms, which would cut every stream at once.
  if (merged.leaseStreamPingMs < 100 || merged.leaseStreamPingMs > 2_147_483_647) throw new WritError('UNPROCESSABLE', 'WRIT_LEASE_STREAM_PING_MS must be between 100 and 2147483647');
  if (merged.lease.maxWaitersPerKey < 1) throw new WritError('UNPROCESSABLE', 'WRIT_LEASE_MAX_WAITERS must be at least 1');
  if (merged.lease.maxWaitersPerPrincipal < 1) throw new WritError('UNPROCESSABLE', 'WRIT_LEASE_MAX_WAITERS_PER_PRINCIPAL must be at least 1');
  for (const u of merged.upstreams) {
    if (u.timeoutMs < 1) throw new WritError('UNPROCESSABLE', `the upstream timeout for ${u.pattern} must be at least 1 ms`);
  }
  checkDecisionLogConfig(merged.decisionLog);
  if (merged.databaseUrl !== null && !/^postgres(ql)?:\/\//.test(merged.databaseUrl)) {
    throw new WritError('UNPROCESSABLE', `the database URL must be postgres://… (or leave it unset for the embedded SQLite file), got "${maskDatabaseUrl(merged.databaseUrl)}"`);
  }
  if (overrides.dataDir && !overrides.dbFile) merged.dbFile = resolve(merged.dataDir, 'writ.sqlite');
  return merged;
}

