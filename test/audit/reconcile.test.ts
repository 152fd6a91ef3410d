import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reconcilePending } from '../../src/audit/index.js';
import { HttpUpstreamClient, startSampleUpstream } from '../../src/upstream/index.js';
import { intent, newLog } from './helpers.js';

let upstream: FastifyInstance;
let client: HttpUpstreamClient;
beforeAll(async () => {
  const started = await startSampleUpstream({ port: 0, dbFile: ':memory:' });
  upstream = started.app;
  client = new HttpUpstreamClient({ baseUrl: started.url, timeoutMs: 2000 });
});
afterAll(async () => {
  await upstream.close();
});

describe('reconciling PENDING receipts after a crash', () => {
  it('completes the ones the upstream applied, fails the ones it never saw, leaves settled ones alone', async () => {
    const { log } = newLog();
    // Forwarded, then the gateway died before writing the completion.
    const applied = await log.recordIntent(intent({ resource_key: 'wp:post:700', expected_version: 0 }));
    const write = await client.write('wp:post:700', { fields: { title: 'x' }, expectedVersion: 0, fencing: { 'wp:post:700': 1 }, principal: 'seo-agent-7', receiptId: applied.receipt_id });
    expect(write.kind).toBe('applied');
    // Died before forwarding.
    const lost = await log.recordIntent(intent({ resource_key: 'wp:post:701' }));
    const settled = await log.recordIntent(intent({ resource_key: 'wp:post:702' }));
    await log.complete(settled.receipt_id, { status: 'COMPLETED', final_version: 9 });

    const report = await reconcilePending(log, client);
    expect(report).toEqual({ examined: 2, completed: [applied.receipt_id], failed: [lost.receipt_id], unresolved: [] });
    expect(await log.get(applied.receipt_id)).toMatchObject({ status: 'COMPLETED', final_version: 1, reconciled: true });
    expect(await log.get(lost.receipt_id)).toMatchObject({ status: 'FAILED', reconciled: true, error: { message: 'not applied by upstream' } });
    expect((await log.get(settled.receipt_id))!.entries).toHaveLength(2);
    expect((await log.pending()).receipts).toEqual([]);
    expect(await log.verifyChain()).toMatchObject({ ok: true, entries: 6 });
  });

  it('leaves receipts PENDING when the upstream cannot be asked', async () => {
    const { log } = newLog();
    const r = await log.recordIntent(intent());
    const down = new HttpUpstreamClient({ baseUrl: 'http://127.0.0.1:9', timeoutMs: 500 });
    const report = await reconcilePending(log, down);
    expect(report.unresolved.map((u) => u.receipt_id)).toEqual([r.receipt_id]);
    expect((await log.get(r.receipt_id))!.status).toBe('PENDING');
  });

  it('skips receipts younger than the cut-off (writes that may still be in flight), judged by the store\'s clock', async () => {
    const { log, clock } = newLog();
    clock.set(Date.now() - 60_000); // the cut-off is the store's (this machine's) clock, not the log's
    const old = await log.recordIntent(intent({ resource_key: 'wp:post:801' }));
    clock.advance(60_000);
    const young = await log.recordIntent(intent({ resource_key: 'wp:post:802' }));
    const report = await reconcilePending(log, client, { createdAtLeastMsAgo: 30_000 });
    expect(report.failed).toEqual([old.receipt_id]);
    expect((await log.get(young.receipt_id))!.status).toBe('PENDING');
  });
});
