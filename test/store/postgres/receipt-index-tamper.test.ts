import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../../src/clock.js';
import { ReceiptLog, requestHash } from '../../../src/audit/index.js';
import { openPostgresStore } from '../../../src/store/postgres/index.js';
import { createTestDatabase } from '../conformance/engines.js';

/**
 * On PostgreSQL too, `writ audit verify` covers the receipts index: a row rewritten with SQL (to hide
 * a write from `GET /v1/receipts?principal=…`, or to show a completed one as pending) is reported.
 */
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function logWithReceipts() {
  const db = await createTestDatabase('writ_tamper');
  cleanups.push(db.drop);
  const store = await openPostgresStore(db.url, { poolSize: 2 });
  cleanups.push(() => store.close());
  let n = 0;
  const log = new ReceiptLog({ store, clock: new ManualClock(), newId: () => `rcpt_${++n}` });
  for (let i = 0; i < 4; i++) {
    const r = await log.recordIntent({ principal: 'seo-agent-7', action: 'update_post', resource_key: `wp:post:${i}`, fields: ['title'], request_hash: requestHash({ i }) });
    if (i % 2 === 0) await log.complete(r.receipt_id, { status: 'COMPLETED', final_version: 1, upstream_status: 200 });
  }
  const sql = new pg.Client({ connectionString: db.url });
  await sql.connect();
  cleanups.push(() => sql.end());
  return { log, sql };
}

describe('receipts index tampering on PostgreSQL', () => {
  it.each([
    ["UPDATE receipts SET principal = 'someone-else' WHERE receipt_id = 'rcpt_2'", /rcpt_2: its index row says principal "someone-else"/],
    ["UPDATE receipts SET status = 'PENDING', completed_at = NULL, last_seq = first_seq WHERE receipt_id = 'rcpt_1'", /rcpt_1: its settlement is entry seq \d+, its index row names none/],
    ["DELETE FROM receipts WHERE receipt_id = 'rcpt_4'", /rcpt_4: its entry seq \d+ has no row in the receipts index/],
    ["INSERT INTO receipts (receipt_id, principal, resource_key, status, idempotency_key, request_hash, created_at, completed_at, first_seq, last_seq) VALUES ('rcpt_fake', 'x', 'wp:post:1', 'COMPLETED', NULL, NULL, 0, 0, 1, 1)", /rcpt_fake: its index row names entry seq 1, which is not its own/],
  ])('%s is reported', async (statement, problem) => {
    const { log, sql } = await logWithReceipts();
    expect(await log.verifyChain()).toMatchObject({ ok: true, entries: 6 });
    await sql.query(statement);
    const verdict = await log.verifyChain();
    expect(verdict.ok).toBe(false);
    expect(verdict.problem).toMatch(problem);
  });
});
