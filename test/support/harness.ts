import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { FastifyInstance, InjectOptions } from 'fastify';
import type { JWK } from 'jose';
import { ManualClock, systemClock, type Clock } from '../../src/clock.js';
import { loadConfig, type WritConfig } from '../../src/config/index.js';
import { GOVERNANCE_ID } from '../../src/graph/model.js';
import { buildApp } from '../../src/http/index.js';
import { createCallerAssertion } from '../../src/sdk/assertion.js';
import { UpstreamRouter, type UpstreamRouteConfig } from '../../src/gateway/index.js';
import { startSampleUpstream } from '../../src/upstream/index.js';
import { openSqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { SyncFn } from '../../src/store/sqlite/wal-sync.js';
import type { SqliteDatabase } from '../../src/store/sqlite/database.js';
import { applyManifest, openWrit, readAdminCredential, readManifest, type OpenedWrit, type WritContext } from '../../src/service/index.js';
import { createTestDatabase } from '../../scripts/test-database.js';

/** The repository, whether this runs from test/support or, compiled for a bench, from dist/test/support. */
export const REPO = resolve(import.meta.dirname, import.meta.dirname.includes('/dist/') ? '../../..' : '../..');
export const EXAMPLE_GRAPH = join(REPO, 'graph/example.yaml');
/** Built by the test command's set-up step (`writ policy build`). */
export const BUNDLE_DIR = join(REPO, 'build/policy');

export function fixtureKey(principal: string): JWK {
  return JSON.parse(readFileSync(join(REPO, 'fixtures/keys', `${principal}.jwk`), 'utf8')) as JWK;
}

export interface Harness {
  /** Base URL of the sample upstream, when started. */
  upstreamUrl: string | null;
  writ: OpenedWrit;
  ctx: WritContext;
  /** The SQLite file's write connection, for tests that inspect or tamper with the tables (never for writes Writ makes). Throws on PostgreSQL (`databaseUrl`). */
  db: SqliteDatabase;
  app: FastifyInstance;
  clock: Clock;
  config: WritConfig;
  dataDir: string;
  /** Authorization headers with a fresh caller assertion for `principal` (fixture key, or governance's admin key). */
  auth(principal: string, options?: { ttlSeconds?: number; now?: number; claims?: Record<string, unknown> }): Promise<Record<string, string>>;
  /** app.inject as `principal` (no auth header when principal is null); `claims` are added to its assertion. */
  call(principal: string | null, options: InjectOptions, assertion?: { claims?: Record<string, unknown> }): Promise<{ status: number; body: any; headers: Record<string, unknown>; raw: string }>;
  close(): Promise<void>;
}

export interface HarnessOptions {
  clock?: ManualClock;
  example?: boolean;
  config?: Partial<WritConfig>;
  /** Start a sample upstream on a free port and route wp:post:* to it. */
  upstream?: boolean;
  /** Or route to these upstreams instead. */
  upstreamRoutes?: UpstreamRouteConfig[];
  /** How the store syncs its WAL (default fdatasync on libuv's thread pool): a test injects a failing one. */
  sync?: SyncFn;
  /**
   * Run on this PostgreSQL database (test/store/conformance/engines.ts createTestDatabase) instead of a
   * SQLite file. Lease time is then the database's clock: without `clock`, Writ's clock is the system's.
   */
  databaseUrl?: string;
  /** 'postgres': run on a PostgreSQL database of the harness's own, created now and dropped by `close()` (the default is SQLite). */
  engine?: 'sqlite' | 'postgres';
}

/** A Writ with a fresh data directory, the example graph applied, and the fastify app (no socket). */
export async function startHarness(options: HarnessOptions = {}): Promise<Harness> {
  if (options.engine === 'postgres' && options.databaseUrl === undefined) {
    const db = await createTestDatabase('writ_harness');
    const h = await startHarness(Object.assign({}, options, { databaseUrl: db.url })).catch(async (e: unknown) => {
      await db.drop();
      throw e;
    });
    const close = h.close;
    return Object.assign(h, { close: async () => close().finally(() => db.drop()) });
  }
  const dataDir = mkdtempSync(join(tmpdir(), 'writ-test-'));
  const config = loadConfig({ dataDir, bundleDir: BUNDLE_DIR, policiesDir: join(REPO, 'policies'), ...(options.databaseUrl ? { databaseUrl: options.databaseUrl } : {}), ...options.config }, {});
  const clock = options.clock ?? (options.databaseUrl ? systemClock : new ManualClock(Date.UTC(2026, 5, 1, 12, 0, 0)));
  let upstream: { app: { close(): Promise<unknown> }; url: string } | undefined;
  let upstreams: UpstreamRouter | undefined;
  if (options.upstream) {
    upstream = await startSampleUpstream({ port: 0, host: '127.0.0.1', dbFile: join(dataDir, 'upstream.sqlite'), clock });
    upstreams = UpstreamRouter.fromConfig([{ pattern: 'wp:post:*', url: upstream.url, timeoutMs: 5000, environment: 'production' }]);
  }
  if (options.upstreamRoutes) upstreams = UpstreamRouter.fromConfig(options.upstreamRoutes);
  const store = options.databaseUrl ? null : await openSqliteStore(config.dbFile, options.sync ? { sync: options.sync } : {});
  const writ = await openWrit(config, { clock, ...(store ? { store } : {}), ...(upstreams ? { upstreams } : {}) });
  if (options.example !== false) {
    const { manifest, baseDir } = readManifest(EXAMPLE_GRAPH);
    await applyManifest(writ.ctx, GOVERNANCE_ID, manifest, baseDir);
  }
  const app = await buildApp(writ.ctx);
  const admin = readAdminCredential(dataDir);
  const keyOf = (principal: string): JWK => (principal === GOVERNANCE_ID ? (admin.privateJwk as JWK) : fixtureKey(principal));
  const auth = async (principal: string, o: { ttlSeconds?: number; now?: number; claims?: Record<string, unknown> } = {}) => ({
    authorization: `Bearer ${await createCallerAssertion({ principal, privateJwk: keyOf(principal), now: o.now ?? clock.now(), ...(o.ttlSeconds ? { ttlSeconds: o.ttlSeconds } : {}), ...(o.claims ? { claims: o.claims } : {}) })}`,
  });
  return {
    upstreamUrl: upstream?.url ?? null,
    writ,
    ctx: writ.ctx,
    get db(): SqliteDatabase {
      if (!store) throw new Error('h.db: this harness runs on PostgreSQL');
      return store.writer;
    },
    app,
    clock,
    config,
    dataDir,
    auth,
    async call(principal, inject, assertion = {}) {
      const headers = { ...(inject.headers ?? {}), ...(principal ? await auth(principal, assertion) : {}) };
      const res = await app.inject({ ...inject, headers });
      let body: unknown = res.body;
      try {
        body = JSON.parse(res.body);
      } catch {
        /* not JSON (DOT, metrics) */
      }
      return { status: res.statusCode, body, headers: res.headers as Record<string, unknown>, raw: res.body };
    },
    async close() {
      await app.close();
      await writ.close();
      await upstream?.app.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
