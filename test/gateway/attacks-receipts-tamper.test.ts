import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { act, decideOk } from '../support/agent.js';
import { startHarness, type Harness } from '../support/harness.js';
import { dropGuards } from '../audit/helpers.js';

/**
 * Receipts of real writes through the gateway, tampered with in the store by someone with write access
 * to the database (its guard triggers dropped first): what GET /v1/audit/verify sees.
 */
let h: Harness;
beforeEach(async () => {
  h = await startHarness({ upstream: true });
});
afterEach(async () => h?.close());

type Entry = { seq: number; chain: string; pos: number; receipt_id: string; kind: string; body: string; prev_hash: string; hash: string };
const verify = async () => (await h.call('governance', { method: 'GET', url: '/v1/audit/verify' })).body as { ok: boolean; chain?: string; problem?: string };

async function threeWrites(): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < 3; i++) {
    const d = await decideOk(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['meta_description'] });
    const r = await act(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['meta_description'], payload: { meta_description: `m${i}` }, expected_version: i }, { decision: d.token });
    expect(r.status, r.raw).toBe(201);
    ids.push(r.body.receipt.receipt_id);
  }
  expect((await verify()).ok).toBe(true);
  return ids;
}
const entriesOf = (id: string) => h.db.prepare('SELECT * FROM receipt_entries WHERE receipt_id = ? ORDER BY pos').all(id) as Entry[];

describe('a stored receipt altered or deleted', () => {
  it('an intent\'s body altered (another principal named), its hash left: verify breaks at that entry', async () => {
    const [, middle] = await threeWrites();
    dropGuards(h.db);
    const [intent] = entriesOf(middle!);
    h.db.prepare('UPDATE receipt_entries SET body = ? WHERE seq = ?').run(intent!.body.replace('"seo-agent-7"', '"editor-alice"'), intent!.seq);
    const v = await verify();
    expect(v.ok).toBe(false);
    expect(v.chain).toBe('wp:post:1024');
  });

  it('a receipt in the middle of its chain deleted, entries and index row: verify breaks', async () => {
    const [, middle] = await threeWrites();
    dropGuards(h.db);
    h.db.prepare('DELETE FROM receipt_entries WHERE receipt_id = ?').run(middle);
    h.db.prepare('DELETE FROM receipts WHERE receipt_id = ?').run(middle);
    expect((await verify()).ok).toBe(false);
  });

  it('the newest receipt deleted after a signed checkpoint covered it: verify breaks (its tail was cut)', async () => {
    const ids = await threeWrites();
    await h.ctx.receipts.checkpoint();
    dropGuards(h.db);
    h.db.prepare('DELETE FROM receipt_entries WHERE receipt_id = ?').run(ids[2]);
    h.db.prepare('DELETE FROM receipts WHERE receipt_id = ?').run(ids[2]);
    const v = await verify();
    expect(v.ok).toBe(false);
    expect(v.problem).toMatch(/tail was cut/);
  });

  // DESIGN QUESTION (not built): the newest receipts written after the latest signed checkpoint (a minute
  // apart by default) can be cut, entries and index row, by someone with write access to the database, and
  // verify cannot tell: nothing outside the store anchors the chain's head between checkpoints. The README
  // says so ("What that still leaves open"). Closing it needs the head anchored outside the database at
  // each write (e.g. the receipt's chain position and hash returned signed to the caller, or heads shipped
  // to a witness), a design choice beyond this review.
  it.fails('the newest receipt deleted before any checkpoint covered it: verify does not see it', async () => {
    const ids = await threeWrites();
    dropGuards(h.db);
    h.db.prepare('DELETE FROM receipt_entries WHERE receipt_id = ?').run(ids[2]);
    h.db.prepare('DELETE FROM receipts WHERE receipt_id = ?').run(ids[2]);
    expect((await verify()).ok).toBe(false);
  });
});
