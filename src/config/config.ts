import { resolve } from 'node:path';
import { WritError } from '../errors.js';

/** Everything the service needs to know about its surroundings. Loaded from env + CLI flags. */
export interface WritConfig {
  /** Directory for the SQLite file, signing keys, the admin credential and the built policy bundle. */
  dataDir: string;
  dbFile: string;
  host: string;
  port: number;
  /** Rego sources and the directory the built bundle (policy.wasm, data.json, revision) is written to. */
  policiesDir: string;
  bundleDir: string;
  /** Audience of caller assertions (who they are addressed to). */
  audience: string;
  /** Audience of decisions (the enforcement point that accepts them). */
  gatewayAudience: string;
  decisionTtlMs: number;
  maxAssertionTtlMs: number;
  bodyLimitBytes: number;
  /** Deepest nesting of objects and arrays a JSON body may have (the top-level value is depth 1). */
  jsonMaxDepth: number;
  /** Requests per second each principal may make (a token bucket of `burst`); 0 turns the limit off. Governance is exempt. */
  rateLimit: { perSecond: number; burst: number };
  /** Writes (POST /v1/actions) in flight at once; one more is OVERLOADED (503) with Retry-After. */
  maxInflightWrites: number;
  /** Governed priority per priority class; the lease queue uses these, never a caller's claim. */
  priorities: Record<string, number>;
  lease: { minTtlMs: number; maxTtlMs: number; defaultTtlMs: number; maxWaitMs: number };
  /** Upstream routes: resource pattern → base URL of the system that holds that state. */
  upstreams: { pattern: string; url: string; timeoutMs: number; environment: string }[];
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

/** Reads configuration from environment variables (WRIT_*), with overrides from the caller (CLI flags). */
export function loadConfig(overrides: Partial<WritConfig> = {}, env: NodeJS.ProcessEnv = process.env): WritConfig {
  const dataDir = resolve(overrides.dataDir ?? env.WRIT_DATA_DIR ?? 'data');
  const upstreamUrl = env.WRIT_UPSTREAM_URL ?? 'http://127.0.0.1:4100';
  const base: WritConfig = {
    dataDir,
    dbFile: resolve(dataDir, 'writ.sqlite'),
    host: env.WRIT_HOST ?? '127.0.0.1',
    port: int('WRIT_PORT', env.WRIT_PORT, 4000),
    policiesDir: resolve(env.WRIT_POLICIES_DIR ?? 'policies'),
    bundleDir: resolve(env.WRIT_BUNDLE_DIR ?? 'build/policy'),
    audience: env.WRIT_AUDIENCE ?? 'writ',
    gatewayAudience: env.WRIT_GATEWAY_AUDIENCE ?? 'writ-gateway',
    decisionTtlMs: int('WRIT_DECISION_TTL_MS', env.WRIT_DECISION_TTL_MS, 30_000),
    maxAssertionTtlMs: 5 * 60_000,
    bodyLimitBytes: int('WRIT_BODY_LIMIT', env.WRIT_BODY_LIMIT, 256 * 1024),
    jsonMaxDepth: int('WRIT_JSON_MAX_DEPTH', env.WRIT_JSON_MAX_DEPTH, 64),
    rateLimit: {
      perSecond: int('WRIT_RATE_LIMIT_PER_S', env.WRIT_RATE_LIMIT_PER_S, 0),
      burst: int('WRIT_RATE_LIMIT_BURST', env.WRIT_RATE_LIMIT_BURST, 2 * int('WRIT_RATE_LIMIT_PER_S', env.WRIT_RATE_LIMIT_PER_S, 0)),
    },
    maxInflightWrites: int('WRIT_MAX_INFLIGHT_WRITES', env.WRIT_MAX_INFLIGHT_WRITES, 256),
    priorities: DEFAULT_PRIORITIES,
    lease: {
      minTtlMs: int('WRIT_LEASE_MIN_TTL_MS', env.WRIT_LEASE_MIN_TTL_MS, 500),
      maxTtlMs: int('WRIT_LEASE_MAX_TTL_MS', env.WRIT_LEASE_MAX_TTL_MS, 5 * 60_000),
      defaultTtlMs: int('WRIT_LEASE_DEFAULT_TTL_MS', env.WRIT_LEASE_DEFAULT_TTL_MS, 15_000),
      maxWaitMs: int('WRIT_LEASE_MAX_WAIT_MS', env.WRIT_LEASE_MAX_WAIT_MS, 60_000),
    },
    upstreams: [
      {
        pattern: 'wp:post:*',
        url: upstreamUrl,
        timeoutMs: int('WRIT_UPSTREAM_TIMEOUT_MS', env.WRIT_UPSTREAM_TIMEOUT_MS, 5_000),
        environment: env.WRIT_UPSTREAM_ENVIRONMENT ?? 'production',
      },
    ],
  };
  const merged = { ...base, ...overrides };
  if (merged.rateLimit.perSecond > 0 && merged.rateLimit.burst < 1) throw new WritError('UNPROCESSABLE', 'WRIT_RATE_LIMIT_BURST must be at least 1 when a rate limit is set');
  if (merged.maxInflightWrites < 1) throw new WritError('UNPROCESSABLE', 'WRIT_MAX_INFLIGHT_WRITES must be at least 1');
  for (const u of merged.upstreams) {
    if (u.timeoutMs < 1) throw new WritError('UNPROCESSABLE', `the upstream timeout for ${u.pattern} must be at least 1 ms`);
  }
  if (overrides.dataDir && !overrides.dbFile) merged.dbFile = resolve(merged.dataDir, 'writ.sqlite');
  return merged;
}
