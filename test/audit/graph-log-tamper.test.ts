import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { GENESIS_HASH, headsRoot, ReceiptLog, type CheckpointPayload, type CheckpointSigner } from '../../src/audit/index.js';
import { graphEventHash } from '../../src/audit/graph-chain.js';
import { ManualClock } from '../../src/clock.js';
import { KeyRing } from '../../src/decision/index.js';
import type { GraphEvent } from '../../src/graph/model.js';
import { keyRingCheckpointSigner } from '../../src/service/checkpoint-signer.js';
import type { WritStore } from '../../src/store/contract.js';
import { migratePostgres, openPostgresStore, POSTGRES_MIGRATIONS } from '../../src/store/postgres/index.js';
import { openSqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { createTestDatabase } from '../../scripts/test-database.js';
import { migrateSqliteTo } from '../support/sqlite-at-version.js';

/**
 * Tamper evidence for the graph's event log, as an attacker with write access to the database would try
 * it: the append-only trigger dropped, then an event rewritten, a revocation deleted and the revisions
 * after it renumbered, or the newest events cut after a checkpoint signed them. `verifyChain` (what
 * `writ audit verify` runs) reports each as BROKEN at the revision at fault; an untouched log, and a log
 * migrated from before the chain with an old writer still appending, verify.
 */
const cleanups: (() => Promise<unknown> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const grant = (id: string) => ({ type: 'edge.upsert', edge: { id, kind: 'delegate', from: 'ops-lead', to: 'seo-agent-7', reason: 'weekly publishing', created_by: 'ops-lead' } }) as unknown as GraphEvent;
const revoke = (id: string) => ({ type: 'edge.revoked', id, at: 5, by: 'security', reason: 'key leaked' }) as unknown as GraphEvent;

interface Place {
  store: WritStore;
  /** Runs SQL as the attacker (or an old Writ) would, on its own connection. */
  run(sql: string, params?: unknown[]): Promise<Record<string, unknown>[]>;
  dropGuard(): Promise<void>;
  /** The engine's chain-head row set to what the attacker wants (a consistent cut). */
  setHead(revision: number, hash: string): Promise<void>;
  log: ReceiptLog;
  signer: CheckpointSigner;
}

async function logOf(store: WritStore, dir: string): Promise<{ log: ReceiptLog; signer: CheckpointSigner }> {
  const clock = new ManualClock(10_000);
  const signer = keyRingCheckpointSigner(await KeyRing.open(join(dir, 'keys'), clock));
  return { log: new ReceiptLog({ store, clock, checkpoints: signer }), signer };
}

function tmp(): string {
  const dir = mkdtempSync(join(tmpdir(), 'writ-graph-tamper-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

async function sqlitePlace(upTo?: number): Promise<Place & { open(): Promise<void> }> {
  const dir = tmp();
  const file = join(dir, 'writ.sqlite');
  if (upTo !== undefined) {
    const db = new Database(file);
    migrateSqliteTo(db, upTo);
    db.close();
  }
  const raw = new Database(file);
  raw.pragma('busy_timeout = 5000');
  cleanups.push(() => void raw.close());
  const place = {
    store: undefined as unknown as WritStore,
    log: undefined as unknown as ReceiptLog,
    signer: undefined as unknown as CheckpointSigner,
    async open() {
      place.store = await openSqliteStore(file, { checkpointer: false });
      cleanups.push(() => place.store.close());
      Object.assign(place, await logOf(place.store, dir));
    },
    async run(sql: string, params: unknown[] = []) {
      const st = raw.prepare(sql);
      return st.reader ? (st.all(...params) as Record<string, unknown>[]) : (st.run(...params), []);
    },
    async dropGuard() {
      raw.exec('DROP TRIGGER graph_events_no_update; DROP TRIGGER graph_events_no_delete;');
    },
    async setHead(revision: number, hash: string) {
      raw.prepare('UPDATE graph_chain_head SET revision = ?, hash = ?').run(revision, hash);
    },
  };
  if (upTo === undefined) await place.open();
  return place;
}

async function postgresPlace(upTo?: number): Promise<Place & { open(): Promise<void> }> {
  const dir = tmp();
  const db = await createTestDatabase('writ_graph_tamper');
  cleanups.push(db.drop);
  const raw = new pg.Client(db.url);
  await raw.connect();
  cleanups.push(() => raw.end());
  if (upTo !== undefined) await migratePostgres(raw, POSTGRES_MIGRATIONS.filter((m) => m.version <= upTo));
  const place = {
    store: undefined as unknown as WritStore,
    log: undefined as unknown as ReceiptLog,
    signer: undefined as unknown as CheckpointSigner,
    async open() {
      place.store = await openPostgresStore(db.url, { poolSize: 2 });
      cleanups.push(() => place.store.close());
      Object.assign(place, await logOf(place.store, dir));
    },
    async run(sql: string, params: unknown[] = []) {
      let n = 0;
      return (await raw.query(sql.replace(/\?/g, () => `$${++n}`), params)).rows as Record<string, unknown>[];
    },
    async dropGuard() {
      await raw.query('DROP TRIGGER graph_events_append_only ON graph_events');
    },
    async setHead(revision: number, hash: string) {
      await raw.query('UPDATE graph_head SET revision = $1, hashed = $1, hash = $2', [revision, hash]);
    },
  };
  if (upTo === undefined) await place.open();
  return place;
}

/** Five events: two grants, the first revoked (revision 3), a third grant, the second revoked (revision 5). */
async function history(p: Place): Promise<void> {
  await p.store.readWrite((tx) => tx.graph.append([grant('d-1'), grant('d-2')], 'ops-lead', 1_000));
  await p.store.readWrite((tx) => tx.graph.append([revoke('d-1')], 'security', 2_000));
  await p.store.readWrite((tx) => tx.graph.append([grant('d-3')], 'ops-lead', 3_000));
  await p.store.readWrite((tx) => tx.graph.append([revoke('d-2')], 'security', 4_000));
}

const hashAt = async (p: Place, revision: number) => (await p.run('SELECT hash FROM graph_events WHERE revision = ?', [revision]))[0]!.hash as string;

for (const [engine, place, lastOld] of [['sqlite', sqlitePlace, 19], ['postgres', postgresPlace, 12]] as const) {
  describe(`graph log tamper evidence [${engine}]`, () => {
    it('an untouched log verifies, and a checkpoint signs its head', async () => {
      const p = await place();
      expect(await p.log.checkpoint()).toBeNull(); // nothing to sign yet: no receipt, no graph event
      await history(p);
      const c = await p.log.checkpoint();
      expect(c).toMatchObject({ v: 3, graph_revision: 5, graph_hash: await hashAt(p, 5) });
      const v = await p.log.verifyChain();
      expect(v.ok).toBe(true);
      expect(v.graph).toEqual({ ok: true, events: 5, revision: 5, hash: await hashAt(p, 5), unhashed: 0 });
      expect(v.checkpoint).toMatchObject({ graph_revision: 5 });
      // A checkpoint is taken when only the graph moved.
      expect(await p.log.checkpoint()).toBeNull();
      await p.store.readWrite((tx) => tx.graph.append([grant('d-4')], 'ops-lead', 5_000));
      expect(await p.log.checkpoint()).toMatchObject({ seq: 2, graph_revision: 6 });
    });

    it('a version-2 checkpoint (from before the graph chain) still verifies; the next one is version 3 and signs the graph head', async () => {
      const p = await place();
      await history(p);
      const v2: CheckpointPayload = { v: 2, seq: 1, at: 9_000, chains: 0, root: headsRoot([]), archived: 0 };
      expect(await p.store.readWrite((tx) => tx.receipts.recordCheckpoint({ ...v2, jws: p.signer.sign(v2) }, [], new Set()))).not.toBeNull();
      const v = await p.log.verifyChain();
      expect(v).toMatchObject({ ok: true, checkpoint: { seq: 1 }, graph: { ok: true, events: 5 } });
      expect(v.checkpoint).not.toHaveProperty('graph_revision');
      expect(await p.log.checkpoint()).toMatchObject({ v: 3, seq: 2, graph_revision: 5 });
      expect((await p.log.verifyChain()).ok).toBe(true);
    });

    it('an event rewritten (who revoked it and why) is BROKEN at its revision', async () => {
      const p = await place();
      await history(p);
      await p.dropGuard();
      await p.run('UPDATE graph_events SET actor = ?, payload = ? WHERE revision = 3', ['ops-lead', JSON.stringify({ ...revoke('d-1'), by: 'ops-lead', reason: 'routine' })]);
      const v = await p.log.verifyChain();
      expect(v.ok).toBe(false);
      expect(v.problem).toBeUndefined(); // the receipts are sound
      expect(v.graph).toMatchObject({ ok: false, firstBadRevision: 3, events: 2 });
      expect(v.graph!.problem).toMatch(/graph event 3 does not match its hash/);
    });

    it('a revocation deleted and the later revisions renumbered (head rows fixed up) is BROKEN where it was', async () => {
      const p = await place();
      await history(p);
      await p.dropGuard();
      await p.run('DELETE FROM graph_events WHERE revision = 3');
      await p.run('UPDATE graph_events SET revision = 3 WHERE revision = 4');
      await p.run('UPDATE graph_events SET revision = 4 WHERE revision = 5');
      await p.setHead(4, await hashAt(p, 4));
      const v = await p.log.verifyChain();
      expect(v.graph).toMatchObject({ ok: false, firstBadRevision: 3 });
      expect(v.ok).toBe(false);
      // Deleted without renumbering: the gap is named.
      const q = await place();
      await history(q);
      await q.dropGuard();
      await q.run('DELETE FROM graph_events WHERE revision = 3');
      expect((await q.log.verifyChain()).graph).toMatchObject({ ok: false, firstBadRevision: 3, problem: expect.stringMatching(/graph event 3 is missing/) });
    });

    it('the newest events cut after a checkpoint signed them is BROKEN, even with the head rows made consistent; a checkpoint refuses to sign over it', async () => {
      const p = await place();
      await history(p);
      await p.log.checkpoint();
      await p.dropGuard();
      await p.run('DELETE FROM graph_events WHERE revision = 5');
      await p.setHead(4, await hashAt(p, 4));
      const v = await p.log.verifyChain();
      expect(v.graph).toMatchObject({ ok: false, firstBadRevision: 5, problem: expect.stringMatching(/checkpoint 1 signed the log up to 5/) });
      await expect(p.log.checkpoint()).rejects.toThrow(/went back on checkpoint 1/);
      // Rewritten and re-hashed from there on (the head rows too): the signed event is not the same.
      const q = await place();
      await history(q);
      await q.log.checkpoint();
      await q.dropGuard();
      const rows = await q.run('SELECT revision, at, actor, type, payload FROM graph_events WHERE revision >= 4 ORDER BY revision');
      let prev = await hashAt(q, 3);
      for (const r of rows) {
        const payload = Number(r.revision) === 5 ? JSON.stringify({ ...revoke('d-1'), reason: 'forged' }) : (r.payload as string);
        prev = graphEventHash(prev, { revision: Number(r.revision), at: Number(r.at), actor: r.actor as string, type: r.type as string, payload });
        await q.run('UPDATE graph_events SET payload = ?, hash = ? WHERE revision = ?', [payload, prev, r.revision]);
      }
      await q.setHead(5, prev);
      expect((await q.log.verifyChain()).graph).toMatchObject({ ok: false, firstBadRevision: 5, problem: expect.stringMatching(/not the one checkpoint 1 signed/) });
    });

    it('a hash removed from an event that later events follow is BROKEN (not taken for an old writer\'s)', async () => {
      const p = await place();
      await history(p);
      await p.dropGuard();
      await p.run('UPDATE graph_events SET hash = NULL, actor = ? WHERE revision = 2', ['mallory']);
      expect((await p.log.verifyChain()).graph).toMatchObject({ ok: false, firstBadRevision: 2, problem: expect.stringMatching(/has no hash but event 3/) });
    });

    it(`a log from before the chain (migration ${lastOld}) is hashed by the upgrade, and an old writer's events during a rolling upgrade are unhashed, not broken, until the next append`, async () => {
      const p = await place(lastOld);
      const old = (revision: number, actor: string, e: GraphEvent) =>
        p.run('INSERT INTO graph_events (revision, at, actor, type, payload) VALUES (?, ?, ?, ?, ?)', [revision, 1_000 * revision, actor, e.type, JSON.stringify(e)]);
      await old(1, 'ops-lead', grant('d-1'));
      await old(2, 'security', revoke('d-1'));
      if (engine === 'postgres') await p.run('UPDATE graph_head SET revision = 2');
      await p.open(); // migrates: hashes 1..2
      expect(await hashAt(p, 2)).toBe(graphEventHash(await hashAt(p, 1), { revision: 2, at: 2_000, actor: 'security', type: 'edge.revoked', payload: JSON.stringify(revoke('d-1')) }));
      expect((await p.log.verifyChain()).graph).toMatchObject({ ok: true, events: 2, unhashed: 0 });
      // An old replica still running appends without a hash (and moves only graph_head.revision).
      await old(3, 'ops-lead', grant('d-2'));
      if (engine === 'postgres') await p.run('UPDATE graph_head SET revision = 3');
      const during = await p.log.verifyChain();
      expect(during.ok).toBe(true);
      expect(during.graph).toMatchObject({ ok: true, events: 2, revision: 2, unhashed: 1 });
      // A checkpoint then signs the hashed head; the next append of this Writ hashes the old writer's event first.
      expect(await p.log.checkpoint()).toMatchObject({ graph_revision: 2 });
      await p.store.readWrite((tx) => tx.graph.append([revoke('d-2')], 'security', 4_000));
      const after = await p.log.verifyChain();
      expect(after.ok).toBe(true);
      expect(after.graph).toMatchObject({ ok: true, events: 4, revision: 4, unhashed: 0 });
      expect(await p.store.read((tx) => tx.graph.chainHead())).toEqual({ revision: 4, hashed: 4, hash: await hashAt(p, 4) });
      // The fill-in is all the triggers let through: an event is still append-only.
      await expect(p.run('UPDATE graph_events SET actor = ? WHERE revision = 3', ['mallory'])).rejects.toThrow(/append-only/);
      await expect(p.run('UPDATE graph_events SET hash = ? WHERE revision = 3', [GENESIS_HASH])).rejects.toThrow(/append-only/);
    });
  });
}

describe('graph log migration on PostgreSQL during a rolling upgrade', () => {
  it('an old replica\'s append in flight while migration 13 runs waits for it or is waited for, and is hashed either way', async () => {
    const db = await createTestDatabase('writ_graph_migrate_inflight');
    cleanups.push(db.drop);
    const [old, migrator, watcher] = await Promise.all([0, 1, 2].map(async () => {
      const c = new pg.Client(db.url);
      await c.connect();
      cleanups.push(() => c.end());
      return c;
    }));
    await migratePostgres(migrator!, POSTGRES_MIGRATIONS.filter((m) => m.version <= 12));
    // The old append (PostgresGraphEventStore before migration 13), holding the graph log's lock, not yet committed.
    await old!.query('BEGIN');
    await old!.query('SELECT pg_advisory_xact_lock($1)', [0x77726967]);
    await old!.query('UPDATE graph_head SET revision = revision + 1');
    await old!.query('INSERT INTO graph_events (revision, at, actor, type, payload) VALUES (1, 1000, $1, $2, $3)', ['security', 'edge.revoked', JSON.stringify(revoke('d-1'))]);
    const migrating = migratePostgres(migrator!);
    for (let i = 0; ; i++) {
      const { rows } = await watcher!.query("SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted");
      if (rows.length > 0) break;
      if (i > 200) throw new Error('the migration never waited for the old replica');
      await new Promise((r) => setTimeout(r, 25));
    }
    await old!.query('COMMIT');
    expect((await migrating).applied).toContain(13);
    const store = await openPostgresStore(db.url, { poolSize: 1 });
    cleanups.push(() => store.close());
    const v = await new ReceiptLog({ store, clock: new ManualClock(10_000) }).verifyChain();
    expect(v).toMatchObject({ ok: true, graph: { ok: true, events: 1, revision: 1, unhashed: 0 } });
  });
});

