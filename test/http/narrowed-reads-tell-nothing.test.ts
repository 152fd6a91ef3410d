/**
 * A reader narrowed to what is its own (no audit grant) asking for another's receipt or edge must not
 * tell it from one that does not exist: not by the answer (code, message), not by an answer only a
 * receipt that exists can give (RECEIPT_DAMAGED), and not by work done only for one that exists.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { StoredEntry } from '../../src/audit/index.js';
import { ManualClock } from '../../src/clock.js';
import { dropGuards } from '../audit/helpers.js';
import { decideLeaseWrite } from '../support/agent.js';
import { startHarness, type Harness } from '../support/harness.js';

let h: Harness;
/** content-agent-3's receipts: one sound, one whose intent body was rewritten in the store (not JSON). */
let sound: string;
let damaged: string;

const seo = (url: string) => h.call('seo-agent-7', { method: 'GET', url });
/** What a reader can tell of an answer, the id asked for taken out. */
const seen = (r: { status: number; body: { code?: string; title?: string; detail?: string } }, id: string) => ({ status: r.status, code: r.body.code, title: r.body.title, detail: r.body.detail?.split(id).join('<id>') });

beforeAll(async () => {
  h = await startHarness({ upstream: true, clock: new ManualClock(Date.UTC(2026, 5, 1, 12)) });
  const ids: string[] = [];
  for (const post of ['wp:post:41', 'wp:post:42']) {
    const { answer: w } = await decideLeaseWrite(h, 'content-agent-3', { resource: post, payload: { body: 'x' }, expected_version: 0 });
    expect(w.status).toBe(201);
    ids.push(w.body.receipt.receipt_id);
  }
  [sound, damaged] = ids as [string, string];
  const intent = h.db.prepare("SELECT * FROM receipt_entries WHERE receipt_id = ? AND kind = 'intent'").get(damaged) as StoredEntry;
  dropGuards(h.db);
  h.db.prepare('UPDATE receipt_entries SET body = ? WHERE seq = ?').run(intent.body.replace('"expected_version":0,', '"expected_version":,'), intent.seq);
}, 60_000);
afterAll(async () => h?.close());

describe('a reader without an audit grant asking for another principal\'s receipt', () => {
  it('gets the answer an unknown id gets: same status, code and message', async () => {
    for (const path of ['/v1/receipts/ID', '/v1/receipts/ID/why']) {
      const unknown = seen(await seo(path.replace('ID', 'rcpt_no-such-one')), 'rcpt_no-such-one');
      expect(unknown.code, path).toBe('NOT_FOUND');
      for (const id of [sound, damaged]) expect(seen(await seo(path.replace('ID', id)), id), `${path} ${id}`).toEqual(unknown);
    }
  });

  it('is told so before the receipt is read: a damaged one answers NOT_FOUND to it (RECEIPT_DAMAGED to governance), and its why chain is not computed', async () => {
    for (const url of [`/v1/receipts/${damaged}`, `/v1/receipts/${damaged}/why`]) {
      expect((await h.call('governance', { method: 'GET', url })).body.code, url).toBe('RECEIPT_DAMAGED');
    }
    const atRevision = vi.spyOn(h.ctx.graph, 'atRevision');
    try {
      expect((await seo(`/v1/receipts/${sound}/why`)).body.code).toBe('NOT_FOUND');
      expect(atRevision).not.toHaveBeenCalled();
      expect((await h.call('governance', { method: 'GET', url: `/v1/receipts/${sound}/why` })).status).toBe(200);
      expect(atRevision).toHaveBeenCalled();
    } finally {
      atRevision.mockRestore();
    }
  });

  it('costs the same work for one that exists as for an unknown id (receipts and edges alike)', async () => {
    const current = vi.spyOn(h.ctx.graph, 'current');
    const graphReads = async (url: string) => {
      current.mockClear();
      await seo(url);
      return current.mock.calls.length;
    };
    try {
      expect(await graphReads(`/v1/receipts/${sound}`)).toBe(await graphReads('/v1/receipts/rcpt_no-such-one'));
      expect(await graphReads(`/v1/receipts/${sound}/why`)).toBe(await graphReads('/v1/receipts/rcpt_no-such-one/why'));
      expect(await graphReads('/v1/edges/d-orch-content')).toBe(await graphReads('/v1/edges/no-such-edge'));
    } finally {
      current.mockRestore();
    }
    expect(seen(await seo('/v1/edges/d-orch-content'), 'd-orch-content')).toEqual(seen(await seo('/v1/edges/no-such-edge'), 'no-such-edge'));
  });

  it('its own receipts and edges it still reads', async () => {
    const { answer: w } = await decideLeaseWrite(h, 'seo-agent-7', { resource: 'wp:post:43', payload: { title: 'x' }, expected_version: 0 });
    const mine = w.body.receipt.receipt_id as string;
    expect((await seo(`/v1/receipts/${mine}`)).body.receipt.principal).toBe('seo-agent-7');
    expect((await seo(`/v1/receipts/${mine}/why`)).body.receipt.receipt_id).toBe(mine);
    expect((await seo('/v1/edges/d-orch-seo')).status).toBe(200);
    expect((await h.call('governance', { method: 'GET', url: `/v1/receipts/${sound}` })).status).toBe(200);
    expect((await h.call('governance', { method: 'GET', url: '/v1/receipts/rcpt_no-such-one' })).body.code).toBe('NOT_FOUND');
  });
});
