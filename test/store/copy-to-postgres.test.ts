import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { buildApp } from '../../src/http/index.js';
import { openWrit, revokeEdge, type OpenedWrit } from '../../src/service/index.js';
import { GOVERNANCE_ID } from '../../src/graph/model.js';
import { copySqliteToPostgres } from '../../src/store/copy-to-postgres.js';
import { liftStoreMove } from '../../src/store/sqlite/database.js';
import { migratePostgres } from '../../src/store/postgres/migrate.js';
import { UpstreamRouter } from '../../src/gateway/index.js';
import { decideAndLease, decideLeaseWrite, fencing } from '../support/agent.js';
import { REPO, startHarness, type Harness } from '../support/harness.js';
import { createTestDatabase } from './conformance/engines.js';
import { startServerProcess } from '../support/server-process.js';

const run = promisify(execFile);

async function sqlOn(url: string, text: string): Promise<string> {
  const c = new pg.Client(url);
  await c.connect();
  try {
    return String(Object.values((await c.query(text)).rows[0] as Record<string, unknown>)[0]);
  } finally {
    await c.end();
  }
}

/**
 * The way from one embedded Writ to PostgreSQL replicas: everything durable comes along, so that what
 * was acknowledged on the file still holds on the database (a spent assertion stays spent, a held lease
 * stays held with its epoch, epochs go on rising, receipts verify and explain themselves).
 */
describe('writ store copy: a SQLite Writ moved to PostgreSQL', () => {
  let h: Harness;
  /** `writ lease bump-epochs`'s lifting of the moved mark, so that the test may copy the same file again. */
  const takeBack = () => liftStoreMove(h.config.dbFile, 'operator:test', 'copied again by the test', Date.now());
  let clock: ManualClock;
  const drops: (() => Promise<void>)[] = [];
  const closers: (() => Promise<void>)[] = [];
  let before: { revision: number; receipt: string; held: { lease_id: string; token: string; epochs: Record<string, number> }; releasedEpoch: number; spent: Record<string, string>; spentIds: number };

  beforeAll(async () => {
    // Lease time on PostgreSQL is the database's clock: the file's leases are taken at the real time.
    clock = new ManualClock(Date.now());
    h = await startHarness({ upstream: true, clock });
    // A recovery drill first (it raises every epoch and the floor of new keys by 10).
    await h.ctx.leases.bumpEpochs({ kind: 'BUMP', margin: 10, actor: 'test', reason: 'a recovery drill', detail: {} });
    const { answer: write, lease } = await decideLeaseWrite(h, 'seo-agent-7', { resource: 'wp:post:1024', payload: { title: 'before the move' }, expected_version: 0 }, { release: true });
    expect(write.status, JSON.stringify(write.body)).toBe(201);
    // A lease still held at the move.
    const { lease: held } = await decideAndLease(h, 'seo-agent-7', { resource: 'wp:post:7', fields: ['title'] }, { ttl_ms: 60_000 });
    const spent = await h.auth('content-agent-3');
    expect((await h.call(null, { method: 'GET', url: '/v1/principals/content-agent-3', headers: spent })).status).toBe(200);
    await revokeEdge(h.ctx, GOVERNANCE_ID, 'd-orch-content', 'moved to another team');
    expect(await h.ctx.receipts.checkpoint()).not.toBeNull();
    const spentIds = (h.db.prepare('SELECT COUNT(*) AS n FROM seen_ids').get() as { n: number }).n;
    before = { revision: (await h.ctx.graph.current()).revision, receipt: write.body.receipt.receipt_id, held, releasedEpoch: lease.epochs['wp:post:1024#title']!, spent, spentIds };
    // The server stops (the upstream keeps running for the replica to come).
    await h.app.close();
    await h.writ.close();
  }, 60_000);

  afterAll(async () => {
    for (const c of closers.reverse()) await c().catch(() => undefined);
    for (const d of drops) await d().catch(() => undefined);
    await h?.close().catch(() => undefined);
  });

  async function database(): Promise<string> {
    const db = await createTestDatabase('writ_copy');
    drops.push(db.drop);
    return db.url;
  }

  async function replicaOn(url: string): Promise<{ w: OpenedWrit; call: Harness['call'] }> {
    const w = await openWrit({ ...h.config, databaseUrl: url }, { clock, upstreams: UpstreamRouter.fromConfig([{ pattern: 'wp:post:*', url: h.upstreamUrl!, timeoutMs: 5000, environment: 'production' }]) });
    const app = await buildApp(w.ctx);
    closers.push(async () => {
      await app.close();
      await w.close();
    });
    return {
      w,
      async call(principal, inject) {
        const headers = { ...(inject.headers ?? {}), ...(principal ? await h.auth(principal) : {}) };
        const res = await app.inject({ ...inject, headers });
        return { status: res.statusCode, body: JSON.parse(res.body || 'null'), headers: res.headers as Record<string, unknown>, raw: res.body };
      },
    };
  }

  it('copies everything in one transaction; the replica goes on where the file stopped', async () => {
    const url = await database();
    const r = await copySqliteToPostgres(h.config.dbFile, url);
    expect(r).toMatchObject({ graph_revision: before.revision, not_copied: { waiting_callers: 0 } });
    expect(r.copied.receipts).toBe(1);
    expect(r.copied.receipt_entries).toBe(2);
    expect(r.copied.lease_epoch_bumps).toBe(1);
    expect(r.copied.receipt_head_checkpoints).toBe(1);
    expect(r.copied.single_use_ids).toBe(before.spentIds);

    const { w, call } = await replicaOn(url);
    // The graph, revision for revision, the revocation included.
    expect((await w.ctx.graph.current()).revision).toBe(before.revision);
    expect((await w.ctx.graph.current()).edge('d-orch-content')!.revoked_at).not.toBeNull();
    // The receipt chain and its signed checkpoint verify; the receipt still says why it was allowed.
    // So does the graph log's hash chain, carried with its hashes (each replica rebuilds its graph from it).
    expect(await w.ctx.receipts.verifyChain(async () => {})).toMatchObject({ ok: true, entries: 2, graph: { ok: true, events: before.revision, revision: before.revision, unhashed: 0 } });
    expect(await w.ctx.store.read((tx) => tx.graph.chainHead())).toMatchObject({ revision: before.revision, hashed: before.revision });
    const why = await call(GOVERNANCE_ID, { method: 'GET', url: `/v1/receipts/${before.receipt}/why` });
    expect(why.status, why.raw).toBe(200);
    expect(why.body.receipt.status).toBe('COMPLETED');
    // A caller assertion spent on the file is spent on the database.
    expect((await call(null, { method: 'GET', url: '/v1/principals/content-agent-3', headers: before.spent })).status).toBe(401);
    // The lease held at the move is still held: its holder renews it with its token, with its epoch; another is refused.
    const renewed = await call('seo-agent-7', { method: 'POST', url: `/v1/leases/${before.held.lease_id}/renew`, payload: { token: before.held.token, ttl_ms: 60_000 } });
    expect(renewed.status, renewed.raw).toBe(200);
    expect(renewed.body.epochs).toEqual(before.held.epochs);
    // …and writes with it through the replica's gateway, fenced at that epoch.
    const fresh = (await call('seo-agent-7', { method: 'POST', url: '/v1/decisions', payload: { action: 'update_post', resource: 'wp:post:7', environment: 'production', fields: ['title'] } })).body.token as string;
    const written = await call('seo-agent-7', {
      method: 'POST', url: '/v1/actions',
      headers: { 'writ-decision': fresh, 'writ-lease-id': before.held.lease_id, 'writ-lease-token': before.held.token, 'writ-fencing-epoch': fencing(before.held.epochs) },
      payload: { action: 'update_post', resource: 'wp:post:7', fields: ['title'], payload: { title: 'after the move' }, expected_version: 0 },
    });
    expect(written.status, written.raw).toBe(201);
    expect(written.body.receipt).toMatchObject({ status: 'COMPLETED', lease_id: before.held.lease_id, lease_epoch: before.held.epochs['wp:post:7#title'] });
    const decideFor = async (resource: string) => (await call('orchestrator', { method: 'POST', url: '/v1/decisions', payload: { action: 'update_post', resource, environment: 'production', fields: ['title'] } })).body.token as string;
    expect((await call('orchestrator', { method: 'POST', url: '/v1/leases', payload: { decisions: [await decideFor('wp:post:7')], ttl_ms: 10_000 } })).body.code).toBe('RESOURCE_BUSY');
    // Epochs go on rising from the file's (the drill's floor included): none issued there is issued again.
    const again = await call('orchestrator', { method: 'POST', url: '/v1/leases', payload: { decisions: [await decideFor('wp:post:1024')], ttl_ms: 10_000 } });
    expect(again.status, again.raw).toBe(201);
    expect(before.releasedEpoch).toBeGreaterThan(10);
    expect(again.body.epochs['wp:post:1024#title']).toBe(before.releasedEpoch + 1);
  }, 60_000);

  it('refuses a database that holds Writ state, and a file another process has open; nothing is changed', async () => {
    const url = await database();
    takeBack(); // the file was copied by the test before: copied again here as if it had never been
    await copySqliteToPostgres(h.config.dbFile, url);
    takeBack();
    const count = async (db: string, sql: string) => {
      const c = new pg.Client(db);
      await c.connect();
      try {
        return (await c.query<{ n: string }>(sql)).rows[0]!.n;
      } finally {
        await c.end();
      }
    };
    const rows = "SELECT (SELECT COUNT(*) FROM graph_events) || '/' || (SELECT COUNT(*) FROM receipt_entries) || '/' || (SELECT COUNT(*) FROM single_use_ids) AS n";
    const copied = await count(url, rows);
    await expect(copySqliteToPostgres(h.config.dbFile, url)).rejects.toMatchObject({ code: 'ALREADY_EXISTS' });
    expect(await count(url, rows)).toBe(copied);

    // An application's database given by mistake: refused before Writ's migrations touch it.
    const foreign = await database();
    const c = new pg.Client(foreign);
    await c.connect();
    await c.query('CREATE TABLE orders (id int)');
    await c.end();
    await expect(copySqliteToPostgres(h.config.dbFile, foreign)).rejects.toMatchObject({ code: 'ALREADY_EXISTS', message: expect.stringContaining("holds tables that are not Writ's (orders)") });
    expect(await count(foreign, "SELECT COUNT(*) AS n FROM pg_tables WHERE schemaname = 'public'")).toBe('1');
    await expect(copySqliteToPostgres(join(h.dataDir, 'no-such.sqlite'), foreign)).rejects.toMatchObject({ code: 'NOT_FOUND' });

    const open = new Database(h.config.dbFile);
    open.pragma('journal_mode = WAL');
    open.prepare('SELECT COUNT(*) FROM graph_events').get();
    try {
      const fresh = await database();
      await expect(copySqliteToPostgres(h.config.dbFile, fresh)).rejects.toMatchObject({ code: 'STORE_IN_USE', message: expect.stringContaining('stop it before copying; nothing was changed') });
      expect(await count(fresh, "SELECT COUNT(*) AS n FROM pg_tables WHERE schemaname = 'public'")).toBe('0');
    } finally {
      open.close();
    }
  }, 60_000);

  it('compares the graph chain heads, revision and hash: a file whose head row is not its events, or events that arrive otherwise, are refused; nothing is kept', async () => {
    // The file is opened for each look and closed again: a connection left open would make the copy STORE_IN_USE.
    const onFile = <T>(f: (db: Database.Database) => T): T => {
      const db = new Database(h.config.dbFile);
      try {
        return f(db);
      } finally {
        db.close();
      }
    };
    const head = onFile((db) => db.prepare('SELECT revision, hash FROM graph_chain_head').get() as { revision: number; hash: string });
    expect(head.revision).toBe(before.revision);
    const pgTables = "SELECT (SELECT COUNT(*) FROM graph_events) || '/' || (SELECT COUNT(*) FROM receipt_entries) AS n";
    // The file's side: its head row names another hash than its last event's (the events themselves link).
    takeBack();
    onFile((db) => db.prepare('UPDATE graph_chain_head SET hash = ?').run('e'.repeat(64)));
    try {
      const url = await database();
      await expect(copySqliteToPostgres(h.config.dbFile, url)).rejects.toMatchObject({
        code: 'INTERNAL',
        message: expect.stringContaining(`the file's graph chain head is revision ${head.revision} (hash ${'e'.repeat(64)}), the database's after the copy is revision ${head.revision} (hash ${head.hash})`),
      });
      expect(await sqlOn(url, pgTables)).toBe('0/0');
      expect(onFile((db) => db.prepare('SELECT COUNT(*) AS n FROM store_moves WHERE lifted_at IS NULL').get())).toEqual({ n: 0 });
      expect(existsSync(`${h.config.dbFile}.moved`)).toBe(false);
    } finally {
      onFile((db) => db.prepare('UPDATE graph_chain_head SET hash = ?').run(head.hash));
    }
    // The database's side: the last event arrives with another hash (a trigger stands for a copy gone wrong).
    const url = await database();
    const c = new pg.Client(url);
    await c.connect();
    try {
      await migratePostgres(c);
      await c.query(`CREATE FUNCTION alter_hash() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN IF NEW.revision = ${head.revision} THEN NEW.hash := repeat('d', 64); END IF; RETURN NEW; END $$`);
      await c.query('CREATE TRIGGER alter_hash BEFORE INSERT ON graph_events FOR EACH ROW EXECUTE FUNCTION alter_hash()');
    } finally {
      await c.end();
    }
    await expect(copySqliteToPostgres(h.config.dbFile, url)).rejects.toMatchObject({
      code: 'INTERNAL',
      message: expect.stringContaining(`the file's graph chain head is revision ${head.revision} (hash ${head.hash}), the database's after the copy is revision ${head.revision} (hash ${'d'.repeat(64)})`),
    });
    expect(await sqlOn(url, pgTables)).toBe('0/0');
    expect(existsSync(`${h.config.dbFile}.moved`)).toBe(false);

    // A copy stopped before its mark was confirmed, run again: the database's event at the file's head must have the file's hash.
    const done = await database();
    await copySqliteToPostgres(h.config.dbFile, done);
    onFile((db) => db.prepare('UPDATE store_moves SET pending = 1 WHERE lifted_at IS NULL').run());
    const d = new pg.Client(done);
    await d.connect();
    try {
      await d.query('ALTER TABLE graph_events DISABLE TRIGGER USER');
      await d.query(`UPDATE graph_events SET hash = repeat('d', 64) WHERE revision = ${head.revision}`);
      await d.query('ALTER TABLE graph_events ENABLE TRIGGER USER');
    } finally {
      await d.end();
    }
    await expect(copySqliteToPostgres(h.config.dbFile, done)).rejects.toMatchObject({
      code: 'ALREADY_EXISTS',
      message: expect.stringContaining(`the file's graph chain head (revision ${head.revision}, hash ${head.hash}) is not in the database's graph log (hash ${'d'.repeat(64)} there)`),
    });
    expect(onFile((db) => db.prepare('SELECT pending FROM store_moves WHERE lifted_at IS NULL').get())).toEqual({ pending: 1 });
  }, 60_000);

  it('from the command line: writ store copy --to, then the copy verified with the data directory\'s keys', async () => {
    const url = await database();
    takeBack();
    // From another directory than the repository's (no policy bundle there): the copy's check needs none.
    const cli = await run(process.execPath, [join(REPO, 'dist/src/cli/main.js'), 'store', 'copy', '--to', url, '--data-dir', h.dataDir], { cwd: tmpdir(), env: { ...process.env, WRIT_DATABASE_URL: '' } });
    expect(cli.stdout).toContain(`graph: ${before.revision} events (revision ${before.revision})`);
    expect(cli.stdout).toMatch(/receipts: 1 \(2 entries on 1 chains, head seq \d+\), 1 checkpoints/);
    expect(cli.stdout).toMatch(/^OK: /m);
    const refused = await run(process.execPath, [join(REPO, 'dist/src/cli/main.js'), 'store', 'copy', '--to', url, '--data-dir', h.dataDir], { env: { ...process.env, WRIT_DATABASE_URL: '' } }).catch((e: { code: number; stderr: string }) => e);
    // The file is marked as moved: copied again (to any database), it is refused, naming where it went.
    expect(refused).toMatchObject({ code: 1, stderr: expect.stringContaining(`STORE_MOVED (Store moved to PostgreSQL): ${h.config.dbFile} was copied to the PostgreSQL database postgres://${new URL(url).username}@${new URL(url).host}${new URL(url).pathname}`) });
    // An auditor's command from elsewhere (no admin credential there) reads the copy and mints no governance key into it.
    const elsewhere = mkdtempSync(join(tmpdir(), 'writ-auditor-'));
    try {
      const events = async () => (await sqlOn(url, 'SELECT COUNT(*) AS n FROM graph_events'));
      const revision = await events();
      const receipts = await run(process.execPath, [join(REPO, 'dist/src/cli/main.js'), 'receipts', '--database', url, '--data-dir', elsewhere], { cwd: REPO });
      expect(receipts.stdout).toContain(before.receipt);
      expect(existsSync(join(elsewhere, 'admin.jwk'))).toBe(false);
      expect(await events()).toBe(revision);
      // Signing there is refused: a checkpoint signed with the key just made in `elsewhere` would verify nowhere.
      const checkpoints = await sqlOn(url, 'SELECT COUNT(*) FROM receipt_head_checkpoints');
      const signing = await run(process.execPath, [join(REPO, 'dist/src/cli/main.js'), 'audit', 'checkpoint', '--database', url, '--data-dir', elsewhere], { cwd: REPO }).catch((e: { code: number; stderr: string }) => e);
      expect(signing).toMatchObject({ code: 1, stderr: expect.stringContaining("holds no signing key, and a checkpoint is signed with the servers' key: run this with --data-dir naming the data directory the servers use") });
      expect(await sqlOn(url, 'SELECT COUNT(*) FROM receipt_head_checkpoints')).toBe(checkpoints);
      for (const [args, what] of [[['console'], 'a console login link'], [['audit', 'archive', '--older-than', '1d', '--out', join(elsewhere, 'archive.jsonl')], 'the checkpoint the archive records']] as const) {
        const r = await run(process.execPath, [join(REPO, 'dist/src/cli/main.js'), ...args, '--database', url, '--data-dir', elsewhere], { cwd: REPO }).catch((e: { code: number; stderr: string }) => e);
        expect(r, args.join(' ')).toMatchObject({ code: 1, stderr: expect.stringContaining(`holds no signing key, and ${what} is signed with the servers' key`) });
      }
      expect(existsSync(join(elsewhere, 'archive.jsonl'))).toBe(false);
      expect(existsSync(join(elsewhere, 'keys'))).toBe(false); // reading and verifying make no key directory either
      // A first server on a store that holds nothing signed yet (a graph only, applied by a command) makes its key without a warning.
      const bare = await database();
      const first = mkdtempSync(join(tmpdir(), 'writ-first-'));
      try {
        await run(process.execPath, [join(REPO, 'dist/src/cli/main.js'), 'graph', 'apply', 'graph/example.yaml', '--database', bare, '--data-dir', first], { cwd: REPO });
        const server = await startServerProcess({ dataDir: first, upstreamUrl: 'http://127.0.0.1:9', env: { WRIT_DATABASE_URL: bare } });
        await server.stop();
        expect(server.log()).not.toContain('WARNING');
      } finally {
        rmSync(first, { recursive: true, force: true });
      }
      // A replica started without the others' keys/ makes its own, and says loudly what that breaks.
      const replica = await startServerProcess({ dataDir: elsewhere, upstreamUrl: 'http://127.0.0.1:9', env: { WRIT_DATABASE_URL: url } });
      try {
        expect(replica.log()).toContain('had no signing key, so this replica made one, but the store has history');
        expect(replica.log()).toContain('no governance admin credential at');
      } finally {
        await replica.stop();
      }
      // Started again, its own key now in keys/, it still signs with a key the others lack, and says so.
      const again = await startServerProcess({ dataDir: elsewhere, upstreamUrl: 'http://127.0.0.1:9', env: { WRIT_DATABASE_URL: url } });
      try {
        expect(again.log()).toMatch(/WARNING: the store's latest receipt checkpoint was signed by key \S+, which \S+\/keys does not hold/);
      } finally {
        await again.stop();
      }
    } finally {
      rmSync(elsewhere, { recursive: true, force: true });
    }
  }, 60_000);
});
