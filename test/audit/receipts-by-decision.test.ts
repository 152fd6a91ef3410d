import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { canonicalJson, GENESIS_HASH, linkEntry, ReceiptLog, requestHash, type EntryKind, type StoredEntry } from '../../src/audit/index.js';
import { ManualClock } from '../../src/clock.js';
import type { WritStore } from '../../src/store/contract.js';
import { migratePostgres, openPostgresStore, POSTGRES_MIGRATIONS } from '../../src/store/postgres/index.js';
import { MIGRATIONS } from '../../src/store/sqlite/migrations/index.js';
import { openSqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { createTestDatabase } from '../../scripts/test-database.js';
import { decideOk, act, leaseOk } from '../support/agent.js';
import { startHarness, type Harness } from '../support/harness.js';

/**
 * Receipts are found by the decision they presented (GET /v1/receipts?decision_id=, `writ receipts
 * --decision`): the receipts index names it (SQLite migration 18, PostgreSQL migration 10, filled in
 * from each receipt's first entry for the receipts already there), and `writ audit verify` checks it
 * against the hashed entries like every other field a query filters on.
 */

const cleanups: (() => Promise<unknown> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

interface Place {
  open(): Promise<WritStore>;
  /** Runs SQL on the place (`?` placeholders), outside Writ. */
  exec(sql: string, params?: unknown[]): Promise<void>;
}

async function sqlitePlace(upTo?: number): Promise<Place> {
  const dir = mkdtempSync(join(tmpdir(), 'writ-by-decision-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'writ.sqlite');
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  if (upTo !== undefined) {
    db.exec('CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)');
    for (const m of MIGRATIONS.filter((x) => x.version <= upTo)) {
      db.exec(m.sql);
      db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(m.version, m.name, 0);
    }
  }
  cleanups.push(() => void db.close());
  return {
    open: async () => {
      const s = await openSqliteStore(file, { checkpointer: false });
      cleanups.push(() => s.close());
      return s;
    },
    exec: async (sql, params = []) => void db.prepare(sql).run(...params),
  };
}

async function postgresPlace(upTo?: number): Promise<Place> {
  const db = await createTestDatabase('writ_by_decision');
  cleanups.push(db.drop);
  const c = new pg.Client(db.url);
  await c.connect();
  cleanups.push(() => c.end());
  if (upTo !== undefined) await migratePostgres(c, POSTGRES_MIGRATIONS.filter((m) => m.version <= upTo));
  return {
    open: async () => {
      const s = await openPostgresStore(db.url, { poolSize: 2 });
      cleanups.push(() => s.close());
      return s;
    },
    exec: async (sql, params = []) => {
      let n = 0;
      await c.query(sql.replace(/\?/g, () => `$${++n}`), params);
    },
  };
}

const PLACES = { sqlite: sqlitePlace, postgres: postgresPlace };

describe.each(['sqlite', 'postgres'] as const)('%s', (engine) => {
  it('finds the receipts that presented a decision, and audit verify reports an index row that names another', async () => {
    const place = await PLACES[engine]();
    const store = await place.open();
    const log = new ReceiptLog({ store, clock: new ManualClock(1_000), newId: (() => { let n = 0; return () => `rcpt_${++n}`; })() });
    const base = { principal: 'seo-agent-7', action: 'update_post', fields: ['title'] };
    const used = await log.recordIntent({ ...base, resource_key: 'wp:post:1', decision_id: 'dec-1', request_hash: requestHash({ n: 1 }) });
    await log.complete(used.receipt_id, { status: 'COMPLETED', final_version: 1, upstream_status: 200 });
    const refused = await log.recordRejection({ ...base, resource_key: 'wp:post:1', decision_id: 'dec-1', error: { code: 'DECISION_REPLAYED', message: 'used' } });
    await log.recordIntent({ ...base, resource_key: 'wp:post:2', decision_id: 'dec-2', request_hash: requestHash({ n: 2 }) });
    await log.recordRejection({ ...base, resource_key: 'wp:post:2', error: { code: 'DECISION_INVALID', message: 'no decision' } });

    const ids = async (q: Parameters<ReceiptLog['query']>[0]) => (await log.query(q)).receipts.map((r) => [r.receipt_id, r.status]);
    expect(await ids({ decision_id: 'dec-1' })).toEqual([[used.receipt_id, 'COMPLETED'], [refused.receipt_id, 'REJECTED']]);
    expect(await ids({ decision_id: 'dec-1', status: 'REJECTED' })).toEqual([[refused.receipt_id, 'REJECTED']]);
    expect(await ids({ decision_id: 'dec-1', newestFirst: true, limit: 1 })).toEqual([[refused.receipt_id, 'REJECTED']]);
    expect(await ids({ decision_id: 'dec-none' })).toEqual([]);
    expect(await log.verifyChain()).toMatchObject({ ok: true, entries: 5 });

    // Rewritten in the index to point a decision at another write: reported.
    await place.exec("UPDATE receipts SET decision_id = 'dec-1' WHERE receipt_id = 'rcpt_3'");
    const verdict = await log.verifyChain();
    expect(verdict.ok).toBe(false);
    expect(verdict.problem).toMatch(/rcpt_3: its index row says decision_id "dec-1", its entries say "dec-2"/);
  });

  it(`the receipts written before the migration are found by their decision, and the log still verifies`, async () => {
    const before = engine === 'sqlite' ? 17 : 8;
    const place = await PLACES[engine](before);
    // As the Writ before the migration wrote them: an intent and its settlement, a refusal that presented
    // the same decision, a refusal with none.
    const heads = new Map<string, { pos: number; hash: string }>();
    let seq = 0;
    const append = async (chain: string, receipt_id: string, kind: EntryKind, body: Record<string, unknown>): Promise<StoredEntry> => {
      const e = linkEntry(heads.get(chain) ?? { pos: 0, hash: GENESIS_HASH }, ++seq, { chain, receipt_id, kind, body: canonicalJson(body) });
      heads.set(chain, e);
      await place.exec('INSERT INTO receipt_entries (seq, chain, pos, receipt_id, kind, body, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?)', [e.seq, e.chain, e.pos, e.receipt_id, e.kind, e.body, e.prev_hash, e.hash]);
      if (engine === 'postgres') {
        await place.exec('INSERT INTO receipt_chains (chain, pos, hash, prev_hash) VALUES (?, ?, ?, ?) ON CONFLICT (chain) DO UPDATE SET pos = EXCLUDED.pos, hash = EXCLUDED.hash, prev_hash = EXCLUDED.prev_hash', [e.chain, e.pos, e.hash, e.prev_hash]);
      }
      return e;
    };
    const index = (id: string, resource: string, status: string, requestHashOf: string | null, at: number, completed: number | null, first: number, last: number) =>
      place.exec('INSERT INTO receipts (receipt_id, principal, resource_key, status, idempotency_key, request_hash, created_at, completed_at, first_seq, last_seq) VALUES (?, ?, ?, ?, NULL, ?, ?, ?, ?, ?)',
        [id, 'seo-agent-7', resource, status, requestHashOf, at, completed, first, last]);
    const start = (resource: string, decision: string | null, hash: string | null) => ({
      action: 'update_post', authority_epoch: null, chain: [], decision_id: decision, expected_version: 0, fields: ['title'], graph_revision: null, idempotency_key: null,
      lease_epoch: null, lease_id: null, owners: [], ownership_epoch: null, policy_revision: null, principal: 'seo-agent-7', request_hash: hash, resource_key: resource,
    });
    const i1 = await append('wp:post:1', 'rcpt_old_1', 'intent', { at: 1_000, ...start('wp:post:1', 'dec-old', 'h1') });
    const c1 = await append('wp:post:1', 'rcpt_old_1', 'completed', { at: 1_500, status: 'COMPLETED', final_version: 1, upstream_status: 200, error: null, conflicts: [] });
    await index('rcpt_old_1', 'wp:post:1', 'COMPLETED', 'h1', 1_000, 1_500, i1.seq, c1.seq);
    const r2 = await append('wp:post:1', 'rcpt_old_2', 'rejected', { at: 2_000, ...start('wp:post:1', 'dec-old', 'h2'), error: { code: 'DECISION_REPLAYED', message: 'used' }, conflicts: [], upstream_status: null });
    await index('rcpt_old_2', 'wp:post:1', 'REJECTED', 'h2', 2_000, 2_000, r2.seq, r2.seq);
    const r3 = await append('wp:post:2', 'rcpt_old_3', 'rejected', { at: 3_000, ...start('wp:post:2', null, 'h3'), error: { code: 'DECISION_INVALID', message: 'none' }, conflicts: [], upstream_status: null });
    await index('rcpt_old_3', 'wp:post:2', 'REJECTED', 'h3', 3_000, 3_000, r3.seq, r3.seq);
    if (engine === 'postgres') await place.exec(`SELECT setval('receipt_entry_seq', ${seq + 1}, false)`);

    const store = await place.open();
    const log = new ReceiptLog({ store, clock: new ManualClock(10_000) });
    expect((await log.query({ decision_id: 'dec-old' })).receipts.map((r) => [r.receipt_id, r.status])).toEqual([['rcpt_old_1', 'COMPLETED'], ['rcpt_old_2', 'REJECTED']]);
    // A new receipt on top of them is found too, and the whole log verifies (the index's decision included).
    await log.recordRejection({ principal: 'seo-agent-7', action: 'update_post', resource_key: 'wp:post:2', decision_id: 'dec-old', error: { code: 'DECISION_REPLAYED', message: 'used' } });
    expect((await log.query({ decision_id: 'dec-old' })).receipts.map((r) => r.receipt_id)).toHaveLength(3);
    expect(await log.verifyChain()).toMatchObject({ ok: true, entries: 5 });
  });

  it('a receipt whose stored body is not JSON does not stop the migration: its index names no decision, and verify reports the entry', async () => {
    const place = await PLACES[engine](engine === 'sqlite' ? 17 : 8);
    const e = linkEntry({ pos: 0, hash: GENESIS_HASH }, 1, { chain: 'wp:post:9', receipt_id: 'rcpt_bad', kind: 'rejected', body: '{"at":1000,"decision_id":"dec-x",' });
    await place.exec('INSERT INTO receipt_entries (seq, chain, pos, receipt_id, kind, body, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?)', [e.seq, e.chain, e.pos, e.receipt_id, e.kind, e.body, e.prev_hash, e.hash]);
    if (engine === 'postgres') {
      await place.exec('INSERT INTO receipt_chains (chain, pos, hash, prev_hash) VALUES (?, ?, ?, ?)', [e.chain, e.pos, e.hash, e.prev_hash]);
      await place.exec("SELECT setval('receipt_entry_seq', 2, false)");
    }
    await place.exec("INSERT INTO receipts (receipt_id, principal, resource_key, status, idempotency_key, request_hash, created_at, completed_at, first_seq, last_seq) VALUES ('rcpt_bad', 'seo-agent-7', 'wp:post:9', 'REJECTED', NULL, NULL, 1000, 1000, 1, 1)");
    const store = await place.open();
    const found = await store.read((tx) => tx.receipts.indexOf(['rcpt_bad']));
    expect(found.map((f) => f.row.decision_id)).toEqual([null]);
    const verdict = await new ReceiptLog({ store, clock: new ManualClock(10_000) }).verifyChain();
    expect(verdict).toMatchObject({ ok: false, chain: 'wp:post:9', firstBadPos: 1 });
    expect(verdict.problem).toMatch(/not the JSON object Writ writes/);
  });

  describe('over HTTP', () => {
    let h: Harness;
    afterEach(async () => h?.close());

    it('GET /v1/receipts?decision_id= lists the receipts of that decision, narrowed to what the reader may read', async () => {
      const db = engine === 'postgres' ? await createTestDatabase('writ_by_decision') : undefined;
      if (db) cleanups.push(db.drop);
      h = await startHarness({ upstream: true, ...(db ? { databaseUrl: db.url } : {}) });
      const write = { resource: 'wp:post:1024', fields: ['title'], payload: { title: 'x' }, expected_version: 0 };
      const d = await decideOk(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['title'] });
      const refused = await act(h, 'seo-agent-7', write, { decision: d.token });
      expect(refused.body.code).toBe('LEASE_REQUIRED');
      const lease = await leaseOk(h, 'seo-agent-7', [d.token]);
      const ok = await act(h, 'seo-agent-7', write, { decision: d.token, lease });
      expect(ok.status, JSON.stringify(ok.body)).toBe(201);
      const other = await decideOk(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['title'] });

      const list = async (principal: string, q: string) => {
        const r = await h.call(principal, { method: 'GET', url: `/v1/receipts?${q}` });
        expect(r.status, JSON.stringify(r.body)).toBe(200);
        return r.body.receipts.map((x: any) => x.receipt_id);
      };
      const decision = encodeURIComponent(d.body.decision_id);
      expect(await list('governance', `decision_id=${decision}`)).toEqual([refused.body.receipt_id, ok.body.receipt.receipt_id]);
      expect(await list('seo-agent-7', `decision_id=${decision}&status=COMPLETED`)).toEqual([ok.body.receipt.receipt_id]);
      expect(await list('seo-agent-7', `decision_id=${encodeURIComponent(other.body.decision_id)}`)).toEqual([]);
      // Another principal without an audit grant reads only its own receipts: none of these.
      expect(await list('content-agent-3', `decision_id=${decision}`)).toEqual([]);
      const empty = await h.call('governance', { method: 'GET', url: '/v1/receipts?decision_id=' });
      expect(empty.status).toBe(400);
    });

    it('a refusal that presented the decision after it expired is found by it too', async () => {
      const db = engine === 'postgres' ? await createTestDatabase('writ_by_decision') : undefined;
      if (db) cleanups.push(db.drop);
      const clock = new ManualClock(Date.now());
      h = await startHarness({ upstream: true, clock, ...(db ? { databaseUrl: db.url } : {}) });
      const d = await decideOk(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['title'] });
      clock.advance(h.ctx.config.decisionTtlMs + 1_000);
      const late = await act(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['title'], payload: { title: 'x' }, expected_version: 0 }, { decision: d.token });
      expect(late.status, JSON.stringify(late.body)).toBe(403);
      expect(late.body).toMatchObject({ code: 'DECISION_EXPIRED', decision_id: d.body.decision_id });
      const receipt = (await h.call('seo-agent-7', { method: 'GET', url: `/v1/receipts/${late.body.receipt_id}` })).body.receipt;
      expect(receipt).toMatchObject({ status: 'REJECTED', decision_id: d.body.decision_id, error: { code: 'DECISION_EXPIRED' } });
      const found = await h.call('seo-agent-7', { method: 'GET', url: `/v1/receipts?decision_id=${encodeURIComponent(d.body.decision_id)}` });
      expect(found.body.receipts.map((x: any) => x.receipt_id)).toEqual([late.body.receipt_id]);
      expect((await h.call('governance', { method: 'GET', url: '/v1/audit/verify' })).body).toMatchObject({ ok: true });
    });
  });
});
