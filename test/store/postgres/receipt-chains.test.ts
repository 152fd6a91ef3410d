import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { canonicalJson } from '../../../src/audit/canonical-json.js';
import { chainEntryHash, ReceiptLog, requestHash } from '../../../src/audit/index.js';
import { KEPT_FOR_MS } from '../../../src/audit/receipt-log.js';
import type { ReceiptIndexRow } from '../../../src/audit/repository.js';
import { ManualClock } from '../../../src/clock.js';
import { KeyRing } from '../../../src/decision/index.js';
import { keyRingCheckpointSigner } from '../../../src/service/checkpoint-signer.js';
import type { WritStore } from '../../../src/store/contract.js';
import { openPostgresStore } from '../../../src/store/postgres/index.js';
import { createTestDatabase } from '../conformance/engines.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function place() {
  const db = await createTestDatabase('writ_chains');
  cleanups.push(db.drop);
  const store = await openPostgresStore(db.url, { poolSize: 4 });
  cleanups.push(() => store.close());
  const sql = new pg.Client({ connectionString: db.url });
  await sql.connect();
  cleanups.push(() => sql.end());
  return { url: db.url, store, sql };
}

const index = (receipt_id: string, resource_key: string): ReceiptIndexRow => ({
  receipt_id, principal: 'p', resource_key, status: 'PENDING', idempotency_key: null, request_hash: 'h', created_at: 1, completed_at: null,
});
const append = (store: WritStore, id: string, key: string, then: () => Promise<void> = async () => {}) =>
  store.readWrite(async (tx) => {
    const r = await tx.receipts.appendIntent({ chain: key, receipt_id: id, kind: 'intent', body: canonicalJson({ at: 1, id }) }, index(id, key));
    await then();
    return r;
  });

/** Whether another session could lock this chain's head row right now (NOWAIT: an error when someone holds it). */
async function headLocked(sql: pg.Client, chain: string): Promise<boolean> {
  await sql.query('BEGIN');
  try {
    await sql.query('SELECT 1 FROM receipt_chains WHERE chain = $1 FOR UPDATE NOWAIT', [chain]);
    return false;
  } catch (e) {
    if ((e as { code?: string }).code === '55P03') return true;
    throw e;
  } finally {
    await sql.query('ROLLBACK');
  }
}

function gate() {
  let open!: () => void;
  const shut = new Promise<void>((r) => (open = r));
  return { open, shut };
}

describe('receipt chains on PostgreSQL: no global lock', () => {
  it('two transactions appending to different keys hold their head locks at once; one on the same key waits', async () => {
    const { store, sql } = await place();
    // Both chains exist (a first append creates the head row, which other sessions see once committed).
    await append(store, 'a0', 'wp:post:A');
    await append(store, 'b0', 'wp:post:B');
    const releaseA = gate();
    const releaseB = gate();
    cleanups.push(async () => (releaseA.open(), releaseB.open()));
    const aHolds = gate();
    const bHolds = gate();
    const a = append(store, 'a1', 'wp:post:A', async () => {
      aHolds.open();
      await releaseA.shut;
    });
    await aHolds.shut;
    // B appends to another key while A's transaction is open with A's head locked, and does not wait.
    const started = Date.now();
    const b = append(store, 'b1', 'wp:post:B', async () => {
      bHolds.open();
      await releaseB.shut;
    });
    await bHolds.shut;
    expect(Date.now() - started).toBeLessThan(1_000);
    expect(await headLocked(sql, 'wp:post:A')).toBe(true);
    expect(await headLocked(sql, 'wp:post:B')).toBe(true);
    // Another key commits while both are open.
    expect((await append(store, 'c1', 'wp:post:C')).appended).toBe(true);
    // B commits while A is still open.
    releaseB.open();
    expect((await b).appended).toBe(true);
    expect(await headLocked(sql, 'wp:post:B')).toBe(false);
    expect(await headLocked(sql, 'wp:post:A')).toBe(true);
    // A second append to A's key queues behind A's lock until A commits.
    let a2Done = false;
    const a2 = append(store, 'a2', 'wp:post:A').then((r) => ((a2Done = true), r));
    await new Promise((r) => setTimeout(r, 400));
    expect(a2Done).toBe(false);
    releaseA.open();
    expect((await a).appended).toBe(true);
    expect(await a2).toMatchObject({ appended: true, entry: { chain: 'wp:post:A', pos: 3 } });
    const heads = await store.read((tx) => tx.receipts.heads());
    expect(heads.map((h) => [h.chain, h.pos]).sort()).toEqual([['wp:post:A', 3], ['wp:post:B', 2], ['wp:post:C', 1]]);
  });
});

describe('receipt chains on PostgreSQL: verify detects', () => {
  async function logged() {
    const p = await place();
    const dir = mkdtempSync(join(tmpdir(), 'writ-chains-pg-'));
    const clock = new ManualClock();
    let n = 0;
    const log = new ReceiptLog({ store: p.store, clock, newId: () => `rcpt_${++n}`, checkpoints: keyRingCheckpointSigner(await KeyRing.open(join(dir, 'keys'), clock)) });
    for (let i = 0; i < 6; i++) {
      const r = await log.recordIntent({ principal: 'seo-agent-7', action: 'update_post', resource_key: `wp:post:${i % 2}`, fields: ['title'], request_hash: requestHash({ i }) });
      await log.complete(r.receipt_id, { status: 'COMPLETED', final_version: i + 1, upstream_status: 200 });
    }
    await log.checkpoint();
    expect(await log.verifyChain()).toMatchObject({ ok: true, entries: 12, chains: 2, checkpoint: { seq: 1 } });
    await p.sql.query('ALTER TABLE receipt_entries DISABLE TRIGGER USER');
    return { ...p, log, clock };
  }

  it('a receipt moved to another key\'s chain, relinked and rehashed there', async () => {
    const { sql, log } = await logged();
    const { rows: [e] } = await sql.query("SELECT * FROM receipt_entries WHERE chain = 'wp:post:1' AND pos = 5");
    const { rows: [head] } = await sql.query("SELECT hash FROM receipt_chains WHERE chain = 'wp:post:0'");
    const hash = chainEntryHash(head.hash, e.body, 'wp:post:0', 7, Number(e.seq), e.kind, e.receipt_id);
    await sql.query("UPDATE receipt_entries SET chain = 'wp:post:0', pos = 7, prev_hash = $1, hash = $2 WHERE seq = $3", [head.hash, hash, e.seq]);
    const v = await log.verifyChain();
    expect(v).toMatchObject({ ok: false, chain: 'wp:post:0', firstBadPos: 7 });
    expect(v.problem).toMatch(/opens a receipt of "wp:post:1"/);
  });

  it('a chain truncated (its newest receipt, its index row and its head row put back)', async () => {
    const { sql, log, clock } = await logged();
    const { rows: [e] } = await sql.query("SELECT * FROM receipt_entries WHERE chain = 'wp:post:1' AND pos = 4");
    await sql.query("DELETE FROM receipts WHERE receipt_id IN (SELECT receipt_id FROM receipt_entries WHERE chain = 'wp:post:1' AND pos >= 5)");
    await sql.query("DELETE FROM receipt_entries WHERE chain = 'wp:post:1' AND pos >= 5");
    await sql.query("UPDATE receipt_chains SET pos = 4, hash = $1 WHERE chain = 'wp:post:1'", [e.hash]);
    const v = await log.verifyChain();
    expect(v).toMatchObject({ ok: false, chain: 'wp:post:1', firstBadPos: 5 });
    expect(v.problem).toMatch(/entries 5\.\.6 are missing \(the signed checkpoint says/);
    // And the next periodic checkpoint refuses to sign the cut head (it would launder the cut): its whole pass,
    // an hour on (before, built on the leaves it kept, it signs nothing: nothing was appended since).
    expect(await log.checkpoint()).toBeNull();
    clock.advance(KEPT_FOR_MS);
    await expect(log.checkpoint()).rejects.toMatchObject({ code: 'UNPROCESSABLE', message: expect.stringContaining('went back on checkpoint 1') });
  });

  it('a forged checkpoint: a leaf lowered to hide a truncation', async () => {
    const { sql, log } = await logged();
    await sql.query('ALTER TABLE receipt_checkpoint_leaves DISABLE TRIGGER USER');
    const { rows: [e] } = await sql.query("SELECT hash FROM receipt_entries WHERE chain = 'wp:post:1' AND pos = 4");
    await sql.query("UPDATE receipt_checkpoint_leaves SET pos = 4, hash = $1 WHERE chain = 'wp:post:1'", [e.hash]);
    expect(await log.verifyChain()).toMatchObject({ ok: false, problem: expect.stringMatching(/leaves do not add up to the root it signed/) });
  });
});
