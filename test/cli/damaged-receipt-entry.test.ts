import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { hashOf } from '../../src/audit/hash-chain.js';
import type { StoredEntry } from '../../src/audit/index.js';
import { decideLeaseWrite } from '../support/agent.js';
import { startHarness, type Harness } from '../support/harness.js';
import { requireDist } from '../support/server-process.js';
import { runWrit } from '../support/cli.js';
import { dropGuards } from '../audit/helpers.js';

let h: Harness;
let receiptId: string;
let damagedSeq: number;

/**
 * As the auditor did (/tmp/aud/rehash.cjs): an intent's body rewritten so that it is no longer JSON,
 * re-hashed with the README's formula, and every later entry of its chain relinked and re-hashed.
 */
function rewriteBody(entry: StoredEntry, body: string): void {
  dropGuards(h.db);
  const rows = h.db.prepare('SELECT * FROM receipt_entries WHERE chain = ? AND pos >= ? ORDER BY pos').all(entry.chain, entry.pos) as StoredEntry[];
  let prev = entry.prev_hash;
  for (const e of rows) {
    const next = { ...e, body: e.seq === entry.seq ? body : e.body, prev_hash: prev };
    prev = hashOf(next);
    h.db.prepare('UPDATE receipt_entries SET body = ?, prev_hash = ?, hash = ? WHERE seq = ?').run(next.body, next.prev_hash, prev, e.seq);
  }
}

beforeAll(async () => {
  requireDist();
  h = await startHarness({ upstream: true, clock: new ManualClock(Date.now()) });
  const { answer: ok } = await decideLeaseWrite(h, 'seo-agent-7', { resource: 'wp:post:1024', payload: { title: 'Audited' }, expected_version: 0 });
  receiptId = ok.body.receipt.receipt_id;
  const intent = h.db.prepare("SELECT * FROM receipt_entries WHERE receipt_id = ? AND kind = 'intent'").get(receiptId) as StoredEntry;
  damagedSeq = intent.seq;
  rewriteBody(intent, intent.body.replace('"expected_version":0,', '"expected_version":,'));
}, 60_000);
afterAll(async () => h?.close());

describe('a receipt entry whose body is not JSON (rewritten and re-hashed in the store)', () => {
  it('writ audit verify reports the log BROKEN at that entry (exit 1), no stack trace; --json says ok: false', async () => {
    const text = await runWrit(h.dataDir, 'audit', 'verify');
    expect(text.code).toBe(1);
    expect(text.output).toMatch(new RegExp(`^BROKEN in chain "wp:post:1024" at 1 \\(seq ${damagedSeq}\\): .*entry 1 \\(receipt ${receiptId}\\) has a body that is not the JSON object Writ writes`));
    expect(text.output).not.toMatch(/SyntaxError|\n\s+at /);
    const json = await runWrit(h.dataDir, 'audit', 'verify', '--json');
    expect(json.code).toBe(1);
    expect(JSON.parse(json.stdout)).toMatchObject({ ok: false, chain: 'wp:post:1024', firstBadPos: 1, firstBadSeq: damagedSeq });
  });

  it('GET /v1/audit/verify answers ok: false naming it', async () => {
    const r = await h.call('governance', { method: 'GET', url: '/v1/audit/verify' });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ ok: false, chain: 'wp:post:1024', firstBadSeq: damagedSeq });
  });

  it('the receipt reads answer 500 RECEIPT_DAMAGED naming the entry, never 400 (the caller is not at fault)', async () => {
    for (const url of [`/v1/receipts/${receiptId}`, '/v1/receipts?resource=wp:post:1024', `/v1/receipts/${receiptId}/why`]) {
      const r = await h.call('governance', { method: 'GET', url });
      expect(r.status, url).toBe(500);
      expect(r.body, url).toMatchObject({ code: 'RECEIPT_DAMAGED', detail: expect.stringContaining(`stored entry seq ${damagedSeq}`) });
    }
  });

  it('writ why and writ receipts say so in one line, exit 1', async () => {
    for (const args of [['why', receiptId], ['receipts', '--resource', 'wp:post:1024']]) {
      const r = await runWrit(h.dataDir, ...args);
      expect(r.code, args.join(' ')).toBe(1);
      expect(r.output.trim(), args.join(' ')).toMatch(/^writ: RECEIPT_DAMAGED \(Stored receipt damaged\): receipt \S+: its stored entry seq \d+ .*altered outside Writ[^\n]*$/);
    }
  });
});
