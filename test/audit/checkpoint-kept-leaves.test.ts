import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { GENESIS_HASH, headsRoot, ReceiptLog } from '../../src/audit/index.js';
import { ManualClock } from '../../src/clock.js';
import { KeyRing } from '../../src/decision/index.js';
import { keyRingCheckpointSigner } from '../../src/service/checkpoint-signer.js';
import type { WritStore } from '../../src/store/contract.js';
import { openPostgresStore } from '../../src/store/postgres/index.js';
import { openSqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { createTestDatabase, sql } from '../store/conformance/engines.js';
import { intent } from './helpers.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

/** Chains written before the first checkpoint, untouched after it. */
const CHAINS = 300;
const MOVED = ['wp:post:000150', 'wp:post:new'];

interface Place {
  open(): Promise<WritStore>;
  /** Runs SQL on the data as a tamperer or a test would, outside the stores. */
  exec(sqlText: string): Promise<void>;
  /** From now on any read of a head or a checkpoint leaf of a chain other than `moved` fails (writes still land). */
  onlyReads(moved: readonly string[]): Promise<void>;
  /** The tables back. */
  restore(): Promise<void>;
}

async function sqlitePlace(): Promise<Place> {
  const dir = mkdtempSync(join(tmpdir(), 'writ-kept-'));
  cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'writ.db');
  const raw = () => {
    const db = new Database(file);
    return db;
  };
  const exec = async (text: string) => {
    const db = raw();
    try {
      db.exec(text);
    } finally {
      db.close();
    }
  };
  return {
    open: () => openSqliteStore(file),
    exec,
    // On SQLite a head is its chain's last entry: entries of other chains fail when their hash is read
    // (json() of a text that is not JSON), as every leaf does; inserts go through to the tables.
    onlyReads: (moved) => exec(`
      ALTER TABLE receipt_entries RENAME TO receipt_entry_rows;
      CREATE VIEW receipt_entries AS SELECT seq, chain, pos, receipt_id, kind, body, prev_hash,
        CASE WHEN chain IN (${moved.map((m) => `'${m}'`).join(', ')}) THEN hash ELSE json('the entry of chain ' || chain || ' was read') END AS hash FROM receipt_entry_rows;
      ALTER TABLE receipt_checkpoint_leaves RENAME TO receipt_checkpoint_leaf_rows;
      CREATE VIEW receipt_checkpoint_leaves AS SELECT chain, checkpoint, pos, json('the leaf of chain ' || chain || ' was read') AS hash, floor_pos, floor_hash FROM receipt_checkpoint_leaf_rows;
      CREATE TRIGGER leaves_in INSTEAD OF INSERT ON receipt_checkpoint_leaves BEGIN
        INSERT INTO receipt_checkpoint_leaf_rows (chain, checkpoint, pos, hash, floor_pos, floor_hash) VALUES (NEW.chain, NEW.checkpoint, NEW.pos, NEW.hash, NEW.floor_pos, NEW.floor_hash);
      END;`),
    restore: () => exec(`
      DROP VIEW receipt_entries; ALTER TABLE receipt_entry_rows RENAME TO receipt_entries;
      DROP VIEW receipt_checkpoint_leaves; ALTER TABLE receipt_checkpoint_leaf_rows RENAME TO receipt_checkpoint_leaves;`),
  };
}

async function postgresPlace(): Promise<Place> {
  const db = await createTestDatabase('writ_kept');
  cleanups.push(db.drop);
  const exec = async (text: string) => {
    await sql(db.url, text);
  };
  return {
    open: () => openPostgresStore(db.url, { poolSize: 2 }),
    exec,
    onlyReads: (moved) => exec(`
      CREATE FUNCTION test_row_read(what text, c text) RETURNS text LANGUAGE plpgsql STABLE AS $$
        BEGIN RAISE EXCEPTION 'the % of chain % was read', what, c; END $$;
      ALTER TABLE receipt_chains RENAME TO receipt_chain_rows;
      CREATE VIEW receipt_chains AS SELECT chain, pos,
        CASE WHEN chain IN (${moved.map((m) => `'${m}'`).join(', ')}) THEN hash ELSE test_row_read('head', chain) END AS hash, prev_hash FROM receipt_chain_rows;
      ALTER TABLE receipt_checkpoint_leaves RENAME TO receipt_checkpoint_leaf_rows;
      CREATE VIEW receipt_checkpoint_leaves AS SELECT chain, checkpoint, pos, test_row_read('leaf', chain) AS hash, floor_pos, floor_hash FROM receipt_checkpoint_leaf_rows;
      CREATE FUNCTION test_leaf_in() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN INSERT INTO receipt_checkpoint_leaf_rows VALUES (NEW.chain, NEW.checkpoint, NEW.pos, NEW.hash, NEW.floor_pos, NEW.floor_hash); RETURN NEW; END $$;
      CREATE TRIGGER leaves_in INSTEAD OF INSERT ON receipt_checkpoint_leaves FOR EACH ROW EXECUTE FUNCTION test_leaf_in();`),
    restore: () => exec(`
      DROP VIEW receipt_chains; ALTER TABLE receipt_chain_rows RENAME TO receipt_chains;
      DROP VIEW receipt_checkpoint_leaves; ALTER TABLE receipt_checkpoint_leaf_rows RENAME TO receipt_checkpoint_leaves;`),
  };
}

/** A log on `store` as a server opens it (the data directory's keys sign), with clock `clock`. */
async function logOn(store: WritStore, keysDir: string, clock: ManualClock, name: string) {
  let n = 0;
  return new ReceiptLog({ store, clock, newId: () => `rcpt_${name}_${++n}`, checkpoints: keyRingCheckpointSigner(await KeyRing.open(keysDir, clock)) });
}

for (const [engine, place] of [['sqlite', sqlitePlace], ['postgres', postgresPlace]] as const) {
  describe(`the periodic checkpoint builds on the leaves it kept [${engine}]`, () => {
    async function setUp() {
      const p = await place();
      const dir = mkdtempSync(join(tmpdir(), 'writ-kept-keys-'));
      cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
      const clock = new ManualClock();
      const store = await p.open();
      cleanups.push(() => store.close());
      const other = await p.open();
      cleanups.push(() => other.close());
      const log = await logOn(store, join(dir, 'keys'), clock, 'a');
      // Another replica (its own pool or connection) on the same data.
      const replica = await logOn(other, join(dir, 'keys'), clock, 'b');
      return { ...p, clock, store, other, log, replica };
    }

    it(`reads only the chains that moved since (not the ${CHAINS} others), including one another replica moved`, async () => {
      const t = await setUp();
      for (let i = 0; i < CHAINS; i++) await t.log.recordIntent(intent({ resource_key: `wp:post:${String(i).padStart(6, '0')}`, expected_version: i }));
      const first = await t.log.checkpoint();
      expect(first).toMatchObject({ seq: 1, chains: CHAINS });
      // One chain moves through this replica, a new one through the other.
      await t.log.recordIntent(intent({ resource_key: MOVED[0], expected_version: 1000 }));
      await t.replica.recordIntent(intent({ resource_key: MOVED[1], expected_version: 1001 }));
      await t.onlyReads(MOVED);
      // What the whole pass reads fails now (before the leaves were kept, every checkpoint did).
      await expect(t.store.read((tx) => tx.receipts.heads())).rejects.toThrow(/was read|malformed JSON/);
      await expect(t.store.read((tx) => tx.receipts.checkpointLeaves(1))).rejects.toThrow(/was read|malformed JSON/);
      const second = await t.log.checkpoint();
      expect(second).toMatchObject({ seq: 2, chains: CHAINS + 1 });
      // Nothing moved since: nothing read, nothing signed.
      expect(await t.log.checkpoint()).toBeNull();
      await t.restore();
      const leaves = await t.store.read((tx) => tx.receipts.checkpointLeaves(2));
      const heads = await t.store.read((tx) => tx.receipts.heads());
      expect(second!.root).toBe(headsRoot(heads.map((h) => ({ ...h, floor_pos: 0, floor_hash: GENESIS_HASH }))));
      expect(headsRoot(leaves)).toBe(second!.root);
      expect(leaves.find((l) => l.chain === MOVED[0])?.pos).toBe(2);
      expect(leaves.find((l) => l.chain === MOVED[1])?.pos).toBe(1);
      expect(await t.log.verifyChain()).toMatchObject({ ok: true, chains: CHAINS + 1, checkpoint: { seq: 2 } });
    }, 120_000);

    it('falls back to the whole pass when another replica recorded the latest checkpoint, and signs what that one signed and what moved since', async () => {
      const t = await setUp();
      for (let i = 0; i < 20; i++) await t.log.recordIntent(intent({ resource_key: `wp:post:${i}`, expected_version: i }));
      expect(await t.log.checkpoint()).toMatchObject({ seq: 1 });
      // The other replica appends and checkpoints (its own whole pass): the kept leaves are not the latest any more.
      await t.replica.recordIntent(intent({ resource_key: 'wp:post:3', expected_version: 100 }));
      await t.replica.recordIntent(intent({ resource_key: 'wp:post:other', expected_version: 101 }));
      expect(await t.replica.checkpoint()).toMatchObject({ seq: 2, chains: 21 });
      await t.log.recordIntent(intent({ resource_key: 'wp:post:7', expected_version: 102 }));
      const third = await t.log.checkpoint();
      expect(third).toMatchObject({ seq: 3, chains: 21 });
      const heads = await t.store.read((tx) => tx.receipts.heads());
      expect(third!.root).toBe(headsRoot(heads.map((h) => ({ ...h, floor_pos: 0, floor_hash: GENESIS_HASH }))));
      // And the replica, whose kept leaves are checkpoint 2's, reads everything again too.
      await t.log.recordIntent(intent({ resource_key: 'wp:post:8', expected_version: 103 }));
      expect(await t.replica.checkpoint()).toMatchObject({ seq: 4, chains: 21 });
      expect(await t.log.verifyChain()).toMatchObject({ ok: true, chains: 21, checkpoint: { seq: 4 } });
    }, 60_000);

    it('gives the periodic turn to one holder at a time, and to another once it has run out', async () => {
      const t = await setUp();
      await t.log.recordIntent(intent({ resource_key: 'wp:post:1' }));
      expect(await t.log.checkpointInTurn('a', 60_000)).toMatchObject({ turn: true, checkpoint: { seq: 1 } });
      await t.replica.recordIntent(intent({ resource_key: 'wp:post:2' }));
      expect(await t.replica.checkpointInTurn('b', 60_000)).toEqual({ turn: false, checkpoint: null });
      expect(await t.log.checkpointInTurn('a', 60_000)).toMatchObject({ turn: true, checkpoint: { seq: 2 } });
      // a stops renewing: its turn runs out by the store's clock (a turn of 1 ms, then a wait past it).
      expect(await t.log.checkpointInTurn('a', 1)).toMatchObject({ turn: true, checkpoint: null });
      await new Promise((r) => setTimeout(r, 20));
      await t.replica.recordIntent(intent({ resource_key: 'wp:post:3' }));
      expect(await t.replica.checkpointInTurn('b', 60_000)).toMatchObject({ turn: true, checkpoint: { seq: 3 } });
      expect(await t.log.checkpointInTurn('a', 60_000)).toEqual({ turn: false, checkpoint: null });
      expect(await t.log.verifyChain()).toMatchObject({ ok: true, checkpoint: { seq: 3 } });
    });
  });
}
