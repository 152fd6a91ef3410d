import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { startSampleUpstream } from '../../src/upstream/index.js';
import { act, decideAndLease, decideOk } from '../support/agent.js';
import { startFlakyUpstream, type FlakyUpstream } from '../support/flaky-upstream.js';
import { startHarness, type Harness } from '../support/harness.js';

/**
 * Idempotency-Key confusion. A key is the caller's own (looked up per principal) and bound to the hash of
 * the canonical request (principal, action, canonical resource, environment, fields, payload, expected
 * version): the sample upstream behind a flaky proxy counts every write that reaches it.
 */
let tmp: string;
let upstream: Awaited<ReturnType<typeof startSampleUpstream>>;
let flaky: FlakyUpstream;
let h: Harness;
beforeEach(async () => {
  tmp = mkdtempSync(join(tmpdir(), 'writ-h124-'));
  // One clock for Writ and the upstream: the upstream judges each write's Writ-Deadline by it.
  const clock = new ManualClock(Date.UTC(2026, 5, 1, 12, 0, 0));
  upstream = await startSampleUpstream({ port: 0, host: '127.0.0.1', dbFile: join(tmp, 'upstream.sqlite'), clock });
  flaky = await startFlakyUpstream(upstream.url);
  h = await startHarness({ clock, upstreamRoutes: [{ pattern: 'wp:post:*', url: flaky.url, timeoutMs: 5000, environment: 'production' }] });
});
afterEach(async () => {
  await h?.close();
  await flaky?.close();
  await upstream?.app.close();
  rmSync(tmp, { recursive: true, force: true });
});

const meta = (value: string, resource = 'wp:post:1024') => ({ resource, fields: ['meta_description'], payload: { meta_description: value }, expected_version: 0 });
const applied = async (): Promise<number> => ((await (await fetch(`${upstream.url}/writes`)).json()) as { total: number }).total;
const receipts = async (principal: string) => (await h.call('governance', { method: 'GET', url: `/v1/receipts?principal=${principal}` })).body.receipts as { receipt_id: string; status: string }[];

describe('an Idempotency-Key is the caller\'s own', () => {
  it('another principal using the same key gets a write of its own, never the first caller\'s receipt, and cannot read that receipt', async () => {
    const seo = await decideOk(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['meta_description'] });
    const first = await act(h, 'seo-agent-7', meta('seo'), { decision: seo.token, idempotencyKey: 'shared-key' });
    expect(first.status).toBe(201);
    // The same key and the very same body, from another principal, with no decision: a new write of its own, refused.
    const noDecision = await act(h, 'content-agent-3', meta('seo'), { idempotencyKey: 'shared-key' });
    expect(noDecision.status).toBe(403);
    expect(noDecision.body.code).toBe('DECISION_INVALID');
    expect(JSON.stringify(noDecision.body)).not.toContain(first.body.receipt.receipt_id);
    // With its own decision: its own receipt.
    const own = await decideAndLease(h, 'content-agent-3', { resource: 'wp:post:2048', fields: ['body'] });
    const second = await act(h, 'content-agent-3', { resource: 'wp:post:2048', fields: ['body'], payload: { body: 'b' }, expected_version: 0 }, { decision: own.decision.token, lease: own.lease, idempotencyKey: 'shared-key' });
    expect([second.status, second.body.replayed]).toEqual([201, false]);
    expect(second.body.receipt.receipt_id).not.toBe(first.body.receipt.receipt_id);
    expect(second.body.receipt.principal).toBe('content-agent-3');
    // The first caller's receipt is not the other's to read.
    const peek = await h.call('content-agent-3', { method: 'GET', url: `/v1/receipts/${first.body.receipt.receipt_id}` });
    expect(peek.status).toBe(404);
    expect(await applied()).toBe(2);
  });

  it('the same key for another resource (an alias of it is the same one), payload or expected version is IDEMPOTENCY_MISMATCH and forwards nothing', async () => {
    const d = await decideOk(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['meta_description'] });
    expect((await act(h, 'seo-agent-7', meta('m'), { decision: d.token, idempotencyKey: 'k' })).status).toBe(201);
    const seen = flaky.writesSeen;
    const other = await decideOk(h, 'seo-agent-7', { resource: 'wp:post:2048', fields: ['meta_description'] });
    for (const body of [meta('m', 'wp:post:2048'), meta('other'), { ...meta('m'), expected_version: 1 }]) {
      const r = await act(h, 'seo-agent-7', body, { decision: other.token, idempotencyKey: 'k' });
      expect(r.status, JSON.stringify(body)).toBe(422);
      expect(r.body.code).toBe('IDEMPOTENCY_MISMATCH');
    }
    // The alias names the same canonical resource: the same request, replayed.
    const alias = await act(h, 'seo-agent-7', meta('m', 'wordpress:article:1024'), { idempotencyKey: 'k' });
    expect([alias.status, alias.body.replayed]).toEqual([200, true]);
    expect(flaky.writesSeen).toBe(seen);
    expect(await applied()).toBe(1);
  });
});

describe('a key reused after its first attempt failed', () => {
  it('refused by the upstream (FAILED): the same refusal again, nothing forwarded, even with a fresh decision', async () => {
    // The post exists at revision 1: a write expecting version 0 of a field already written conflicts upstream.
    const d0 = await decideOk(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['meta_description'] });
    expect((await act(h, 'seo-agent-7', meta('v1'), { decision: d0.token })).status).toBe(201);
    const d1 = await decideOk(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['meta_description'] });
    const failed = await act(h, 'seo-agent-7', meta('v2'), { decision: d1.token, idempotencyKey: 'k-failed' });
    expect(failed.body.code).toBe('VERSION_CONFLICT');
    const seen = flaky.writesSeen;
    const d2 = await decideOk(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['meta_description'] });
    const again = await act(h, 'seo-agent-7', meta('v2'), { decision: d2.token, idempotencyKey: 'k-failed' });
    expect(again.body.code).toBe('VERSION_CONFLICT');
    expect(again.body.receipt_id).toBe(failed.body.receipt_id);
    expect(flaky.writesSeen).toBe(seen);
    // The fresh decision was not spent by the replay: it still writes, under a new key.
    const fresh = await act(h, 'seo-agent-7', { ...meta('v2'), expected_version: 1 }, { decision: d2.token, idempotencyKey: 'k-new' });
    expect(fresh.status, fresh.raw).toBe(201);
  });

  it('a 5xx after the upstream applied it (PENDING): a retry answers 202 with that receipt and is not forwarded a second time', async () => {
    flaky.mode = '5xx-after';
    const d = await decideOk(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['meta_description'] });
    const first = await act(h, 'seo-agent-7', meta('once'), { decision: d.token, idempotencyKey: 'k-5xx' });
    expect(first.status).toBe(502);
    expect(first.body.receipt_status).toBe('PENDING');
    flaky.mode = 'pass';
    const d2 = await decideOk(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['meta_description'] });
    const retry = await act(h, 'seo-agent-7', meta('once'), { decision: d2.token, idempotencyKey: 'k-5xx' });
    expect(retry.status).toBe(202);
    expect(retry.body.receipt.receipt_id).toBe(first.body.receipt_id);
    expect(flaky.writesSeen).toBe(1);
    expect(await applied()).toBe(1);
  });

  it('a connection reset mid-answer (PENDING): the same, one write upstream', async () => {
    flaky.mode = 'reset-mid-body';
    const d = await decideOk(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['meta_description'] });
    const first = await act(h, 'seo-agent-7', meta('once'), { decision: d.token, idempotencyKey: 'k-reset' });
    expect(first.body.code).toBe('UPSTREAM_TIMEOUT');
    flaky.mode = 'pass';
    const retry = await act(h, 'seo-agent-7', meta('once'), { idempotencyKey: 'k-reset' });
    expect([retry.status, retry.body.receipt.receipt_id]).toEqual([202, first.body.receipt_id]);
    expect(flaky.writesSeen).toBe(1);
    expect(await applied()).toBe(1);
  });

  it('refused before anything was forwarded (REJECTED, no lease): the key is not taken, the corrected request writes once', async () => {
    const { decision, lease } = await decideAndLease(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['title'] });
    const body = { resource: 'wp:post:1024', fields: ['title'], payload: { title: 't' }, expected_version: 0 };
    const refused = await act(h, 'seo-agent-7', body, { decision: decision.token, idempotencyKey: 'k-lease' });
    expect(refused.body.code).toBe('LEASE_REQUIRED');
    const ok = await act(h, 'seo-agent-7', body, { decision: decision.token, lease, idempotencyKey: 'k-lease' });
    expect([ok.status, ok.body.replayed], ok.raw).toEqual([201, false]);
    const again = await act(h, 'seo-agent-7', body, { decision: decision.token, lease, idempotencyKey: 'k-lease' });
    expect([again.status, again.body.receipt.receipt_id]).toEqual([200, ok.body.receipt.receipt_id]);
    expect(flaky.writesSeen).toBe(1);
    expect((await receipts('seo-agent-7')).map((r) => r.status)).toEqual(['REJECTED', 'COMPLETED']);
  });
});
