import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import { openWrit, type OpenedWrit } from '../../src/service/index.js';
import { createTestDatabase } from '../../scripts/test-database.js';
import { BUNDLE_DIR, REPO } from '../support/harness.js';
import { runWrit } from '../support/cli.js';
import { requireDist } from '../support/server-process.js';

/**
 * A break that is in no chain — the latest checkpoint altered in PostgreSQL, or a receipts index row
 * added that names no entry of its own — names no chain and no position. It was reported as chain ""
 * at 0: "" is the legacy chain's name, and the console told the reader of any receipt of another chain
 * "This receipt is in another chain", as if the break did not concern it.
 */
let db: { url: string; drop(): Promise<void> };
let dataDir: string;
let writ: OpenedWrit;
let sql: pg.Client;

beforeAll(async () => {
  requireDist();
  db = await createTestDatabase('writ_break_no_chain');
  dataDir = mkdtempSync(join(tmpdir(), 'writ-break-no-chain-'));
  writ = await openWrit(loadConfig({ dataDir, bundleDir: BUNDLE_DIR, policiesDir: join(REPO, 'policies'), databaseUrl: db.url }, {}));
  for (const key of ['wp:post:1', 'wp:post:2']) {
    await writ.ctx.receipts.recordRejection({ principal: 'seo-agent-7', action: 'update_post', resource_key: key, error: { code: 'FORBIDDEN', message: 'no' } });
  }
  expect(await writ.ctx.receipts.checkpoint()).toMatchObject({ seq: 1 });
  sql = new pg.Client({ connectionString: db.url });
  await sql.connect();
});
afterAll(async () => {
  await sql?.end();
  await writ?.close();
  await db?.drop();
  rmSync(dataDir, { recursive: true, force: true });
});

const verifyCli = (...args: string[]) => runWrit(dataDir, 'audit', 'verify', '--database', db.url, ...args);

describe('writ audit verify on a break in no chain (PostgreSQL)', () => {
  it('without the servers\' keys (an auditor\'s own data directory) nothing is checked, which is not BROKEN', async () => {
    const empty = mkdtempSync(join(tmpdir(), 'writ-no-keys-'));
    try {
      const r = await runWrit(empty, 'audit', 'verify', '--database', db.url);
      expect(r).toMatchObject({ code: 3, output: expect.stringMatching(new RegExp(`^writ: NOT_FOUND \\(Not found\\): nothing was checked: checkpoint 1: the checkpoint was signed by key \\S+, which is not among the published keys: the keys read from ${empty}/keys \\(none\\)`)) });
      expect(r.output).not.toContain('BROKEN');
    } finally {
      rmSync(empty, { recursive: true, force: true });
    }
  });

  it('an index row naming no entry of its own: no chain, no position', async () => {
    await sql.query("INSERT INTO receipts (receipt_id, principal, resource_key, status, idempotency_key, request_hash, created_at, completed_at, first_seq, last_seq) VALUES ('rcpt_fake', 'x', 'wp:post:1', 'COMPLETED', NULL, NULL, 0, 0, 1, 1)");
    try {
      const v = await writ.ctx.receipts.verifyChain();
      expect(v).toMatchObject({ ok: false, entries: 2, chains: 2, problem: expect.stringContaining('rcpt_fake: its index row names entry seq 1, which is not its own') });
      expect(v).not.toHaveProperty('chain');
      expect(v).not.toHaveProperty('firstBadPos');
      const text = await verifyCli();
      expect(text).toMatchObject({ code: 1, stdout: expect.stringMatching(/^BROKEN: receipt rcpt_fake: its index row names entry seq 1, .* \(2 entries in 2 chains sound against checkpoint 1 of /) });
    } finally {
      await sql.query("DELETE FROM receipts WHERE receipt_id = 'rcpt_fake'");
    }
  });

  it('the latest checkpoint altered: no chain, no position, in the JSON and the text', async () => {
    await sql.query('ALTER TABLE receipt_head_checkpoints DISABLE TRIGGER USER');
    await sql.query("UPDATE receipt_head_checkpoints SET root = $1 WHERE seq = 1", ['a'.repeat(64)]);
    const json = await verifyCli('--json');
    expect(json.code).toBe(1);
    const v = JSON.parse(json.stdout) as Record<string, unknown>;
    expect(v).toMatchObject({ ok: false, problem: expect.stringMatching(/^checkpoint 1: its row differs from what its signature covers/) });
    expect(v).not.toHaveProperty('chain');
    expect(v).not.toHaveProperty('firstBadPos');
    const text = await verifyCli();
    expect(text).toMatchObject({ code: 1, stdout: expect.stringMatching(/^BROKEN: checkpoint 1: its row differs from what its signature covers \(the checkpoint was altered\)\nOK: graph log, /) });
  });
});
