import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import { openWrit } from '../../src/service/index.js';
import { BUNDLE_DIR, REPO } from '../support/harness.js';
import { intent } from '../audit/helpers.js';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/**
 * A Writ on a fresh data directory with these settings: a checkpoint over a few chains, one more receipt, then
 * every stored head and checkpoint leaf but that chain's made unreadable (reads fail, as in
 * test/audit/checkpoint-kept-leaves.test.ts): the next checkpoint succeeds only if it builds on the leaves it kept.
 */
async function nextCheckpointAfterUnreadable(env: NodeJS.ProcessEnv) {
  const dataDir = mkdtempSync(join(tmpdir(), 'writ-kept-settings-'));
  cleanups.push(() => rmSync(dataDir, { recursive: true, force: true }));
  const w = await openWrit(loadConfig({ dataDir, bundleDir: BUNDLE_DIR, policiesDir: join(REPO, 'policies') }, env));
  cleanups.push(() => w.close());
  const log = w.ctx.receipts;
  for (let i = 0; i < 5; i++) await log.recordIntent(intent({ resource_key: `wp:post:${i}`, expected_version: i }));
  expect(await log.checkpoint()).toMatchObject({ seq: 1, chains: 5 });
  await log.recordIntent(intent({ resource_key: 'wp:post:moved', expected_version: 9 }));
  const db = new Database(join(dataDir, 'writ.sqlite'));
  try {
    db.exec(`
      ALTER TABLE receipt_entries RENAME TO receipt_entry_rows;
      CREATE VIEW receipt_entries AS SELECT seq, chain, pos, receipt_id, kind, body, prev_hash,
        CASE WHEN chain = 'wp:post:moved' THEN hash ELSE json('the entry of chain ' || chain || ' was read') END AS hash FROM receipt_entry_rows;
      ALTER TABLE receipt_checkpoint_leaves RENAME TO receipt_checkpoint_leaf_rows;
      CREATE VIEW receipt_checkpoint_leaves AS SELECT chain, checkpoint, pos, json('the leaf of chain ' || chain || ' was read') AS hash, floor_pos, floor_hash FROM receipt_checkpoint_leaf_rows;
      CREATE TRIGGER leaves_in INSTEAD OF INSERT ON receipt_checkpoint_leaves BEGIN
        INSERT INTO receipt_checkpoint_leaf_rows (chain, checkpoint, pos, hash, floor_pos, floor_hash) VALUES (NEW.chain, NEW.checkpoint, NEW.pos, NEW.hash, NEW.floor_pos, NEW.floor_hash);
      END;`);
  } finally {
    db.close();
  }
  return log.checkpoint();
}

describe('the kept checkpoint leaves are settings (WRIT_RECEIPT_CHECKPOINT_KEPT_CHAINS, WRIT_RECEIPT_CHECKPOINT_FULL_PASS_MS)', () => {
  it('by default the next checkpoint builds on the leaves kept in memory, reading only the chain that moved', async () => {
    expect(await nextCheckpointAfterUnreadable({})).toMatchObject({ seq: 2, chains: 6 });
  });

  it('with no chain kept, or a full pass every time, it reads every chain again', async () => {
    await expect(nextCheckpointAfterUnreadable({ WRIT_RECEIPT_CHECKPOINT_KEPT_CHAINS: '0' })).rejects.toThrow(/was read|malformed JSON/);
    await expect(nextCheckpointAfterUnreadable({ WRIT_RECEIPT_CHECKPOINT_FULL_PASS_MS: '0' })).rejects.toThrow(/was read|malformed JSON/);
    // Fewer chains than the limit: kept.
    expect(await nextCheckpointAfterUnreadable({ WRIT_RECEIPT_CHECKPOINT_KEPT_CHAINS: '6' })).toMatchObject({ seq: 2 });
  });

  it('is a non-negative integer, or UNPROCESSABLE naming it', () => {
    expect(loadConfig({}, {})).toMatchObject({ receiptCheckpointKeptChains: 4_000_000, receiptCheckpointFullPassMs: 3_600_000 });
    expect(() => loadConfig({}, { WRIT_RECEIPT_CHECKPOINT_KEPT_CHAINS: '-1' })).toThrow(/WRIT_RECEIPT_CHECKPOINT_KEPT_CHAINS must be a non-negative integer/);
    expect(() => loadConfig({}, { WRIT_RECEIPT_CHECKPOINT_FULL_PASS_MS: 'hourly' })).toThrow(/WRIT_RECEIPT_CHECKPOINT_FULL_PASS_MS must be a non-negative integer/);
  });
});
