import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { loadConfig } from '../../src/config/index.js';
import { UpstreamRouter } from '../../src/gateway/index.js';
import { GOVERNANCE_ID } from '../../src/graph/model.js';
import { applyManifest, decide, openWrit, readManifest, type OpenedWrit, type WritContext } from '../../src/service/index.js';
import type { StoreTx, WritStore } from '../../src/store/contract.js';
import { startSampleUpstream } from '../../src/upstream/index.js';
import { createTestDatabase } from '../../scripts/test-database.js';
import { BUNDLE_DIR, EXAMPLE_GRAPH, REPO } from './harness.js';

/**
 * Two Writ replicas (A and B) on one fresh PostgreSQL database, the example graph applied, wp:post:*
 * routed to a sample upstream: for tests that interleave their transactions on purpose.
 */
export interface PostgresReplicas {
  url: string;
  a: WritContext;
  b: WritContext;
  upstreamUrl: string;
  close(): Promise<void>;
}

export async function twoReplicas(prefix = 'writ_replicas'): Promise<PostgresReplicas> {
  const cleanups: (() => Promise<unknown> | void)[] = [];
  const close = async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  };
  try {
    const db = await createTestDatabase(prefix);
    cleanups.push(db.drop);
    const dataDir = mkdtempSync(join(tmpdir(), 'writ-replicas-'));
    cleanups.push(() => rmSync(dataDir, { recursive: true, force: true }));
    const upstream = await startSampleUpstream({ port: 0, host: '127.0.0.1', dbFile: join(dataDir, 'upstream.sqlite') });
    cleanups.push(() => upstream.app.close());
    const config = loadConfig({ dataDir, bundleDir: BUNDLE_DIR, policiesDir: join(REPO, 'policies'), databaseUrl: db.url }, {});
    const upstreams = UpstreamRouter.fromConfig([{ pattern: 'wp:post:*', url: upstream.url, timeoutMs: 5000, environment: 'production' }]);
    const a: OpenedWrit = await openWrit(config, { upstreams });
    cleanups.push(() => a.close());
    const { manifest, baseDir } = readManifest(EXAMPLE_GRAPH);
    await applyManifest(a.ctx, GOVERNANCE_ID, manifest, baseDir);
    const b: OpenedWrit = await openWrit(config, { upstreams });
    cleanups.push(() => b.close());
    return { url: db.url, a: a.ctx, b: b.ctx, upstreamUrl: upstream.url, close };
  } catch (e) {
    await close();
    throw e;
  }
}

/** An allow decision's token (the service's decide, no HTTP). */
export async function allowToken(ctx: WritContext, principal: string, req: { action: string; resource: string; fields: string[]; environment?: string }): Promise<string> {
  const d = await decide(ctx, principal, { environment: 'production', ...req });
  if (!d.allow || !d.token) throw new Error(`expected an allow decision for ${principal}: ${d.reasons.join('; ')}`);
  return d.token;
}

export interface HeldTransaction {
  /** Settles once the transaction has had its answer to the call and is held open. */
  reached: Promise<void>;
  /** Lets the held transaction go on (to its commit). */
  release(): void;
}

/**
 * Holds open the next `readWrite` transaction of `store` that calls `tx[port][method]`, right after that
 * call has answered (its statement ran; the transaction has not committed), until `release()`. Only the
 * first such call is held (a callback the engine runs again is not held again).
 */
export function holdTransactionAfter<P extends keyof StoreTx>(store: WritStore, port: P, method: keyof StoreTx[P] & string): HeldTransaction {
  let reached!: () => void;
  let release!: () => void;
  const reachedP = new Promise<void>((r) => (reached = r));
  const released = new Promise<void>((r) => (release = r));
  let armed = true;
  const readWrite = store.readWrite.bind(store);
  const held = (tx: StoreTx): StoreTx => {
    const target = tx[port] as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>;
    const wrapped = Object.create(target) as typeof target;
    wrapped[method] = async (...args: unknown[]) => {
      const answer = await target[method]!.apply(target, args);
      if (armed) {
        armed = false;
        reached();
        await released;
      }
      return answer;
    };
    return { ...tx, [port]: wrapped };
  };
  (store as { readWrite: WritStore['readWrite'] }).readWrite = (fn, options) => readWrite((tx) => fn(armed ? held(tx) : tx), options);
  return { reached: reachedP, release };
}

/**
 * Waits until `p` has settled or some session of the database at `url` waits for a lock, whichever
 * comes first (a deterministic "did it get through, or is it held back?"), within `timeoutMs`.
 */
export async function settledOrWaitingForLock(p: Promise<unknown>, url: string, timeoutMs = 3_000): Promise<'settled' | 'waiting'> {
  let settled = false;
  p.then(() => (settled = true), () => (settled = true));
  const c = new pg.Client(url);
  await c.connect();
  try {
    for (const end = Date.now() + timeoutMs; Date.now() < end; ) {
      if (settled) return 'settled';
      const { rows } = await c.query<{ n: string }>("SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'");
      if (Number(rows[0]!.n) > 0) return 'waiting';
      await new Promise((r) => setTimeout(r, 5));
    }
    throw new Error(`neither settled nor waiting for a lock within ${timeoutMs} ms`);
  } finally {
    await c.end();
  }
}

/** A promise's outcome as a value (so a test can hold a rejection without an unhandled one). */
export function outcomeOf<T>(p: Promise<T>): Promise<{ ok: true; value: T } | { ok: false; error: unknown }> {
  return p.then((value) => ({ ok: true as const, value }), (error: unknown) => ({ ok: false as const, error }));
}
