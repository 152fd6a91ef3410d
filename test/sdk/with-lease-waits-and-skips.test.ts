import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UnprocessableError, WritApiError } from '../../src/sdk/index.js';
import { startServerProcess, type ServerProcess } from '../support/server-process.js';
import { clientFor, revisionOf, sleep } from './sdk-support.js';

let server: ServerProcess;
beforeAll(async () => {
  server = await startServerProcess();
});
afterAll(async () => server?.stop());

describe('withLease waiting for a busy lease', () => {
  it('starts within a few ms of the holder releasing, not after the holder\'s whole TTL (Writ\'s wait queue)', async () => {
    const resource = 'wp:post:701';
    const holder = clientFor(server, 'seo-agent-7').client;
    const waiter = clientFor(server, 'editor-alice');
    const d = await holder.decide({ action: 'update_post', resource, environment: 'production', fields: ['title'] });
    const w = await waiter.client.decide({ action: 'update_post', resource, environment: 'production', fields: ['title'] });
    expect([d.allow, w.allow]).toEqual([true, true]);
    const held = await holder.acquireLease([d], { ttlMs: 4_000 });

    let startedAt = 0;
    const waiting = waiter.client.withLease([w], async ({ lease }) => {
      startedAt = Date.now();
      return lease!.epochs[`${resource}#title`];
    });
    await sleep(200);
    await holder.releaseLease(held);
    const releasedAt = Date.now();
    const epoch = await waiting;

    const handoverMs = startedAt - releasedAt;
    console.log(`[with-lease] handover after release: ${handoverMs} ms (holder TTL 4 000 ms)`);
    expect(epoch).toBe(held.epochs[`${resource}#title`]! + 1);
    // Writ's queue answers on the release; before, the SDK slept for the holder's remaining TTL (~3.8 s).
    expect(handoverMs).toBeLessThan(150);
    // One waiting acquisition, not a series of client-side retries.
    expect(waiter.sent.filter((r) => r.method === 'POST' && r.path === '/v1/leases')).toHaveLength(1);
  });

  it('waitMs: 0 keeps the client-side retries (full-jitter backoff over Retry-After)', async () => {
    const resource = 'wp:post:702';
    const holder = clientFor(server, 'seo-agent-7').client;
    const waiter = clientFor(server, 'editor-alice').client;
    const d = await holder.decide({ action: 'update_post', resource, environment: 'production', fields: ['title'] });
    const w = await waiter.decide({ action: 'update_post', resource, environment: 'production', fields: ['title'] });
    const held = await holder.acquireLease([d], { ttlMs: 1_000 });
    const retries: WritApiError[] = [];
    await waiter.withLease([w], async () => undefined, { waitMs: 0, onRetry: (_a, _d, e) => retries.push(e) });
    expect(retries.length).toBeGreaterThanOrEqual(1);
    expect(retries[0]).toMatchObject({ code: 'RESOURCE_BUSY', status: 423, holder: 'seo-agent-7' });
    expect(retries[0]!.retryAfterMs).toBeGreaterThan(0);
    await holder.releaseLease(held).catch(() => undefined);
  });
});

describe('withLease against a Writ that allows shorter waits', () => {
  it('learns the server\'s WRIT_LEASE_MAX_WAIT_MS from its refusal and waits within it', async () => {
    const short = await startServerProcess({ env: { WRIT_LEASE_MAX_WAIT_MS: '1000' } });
    try {
      const resource = 'wp:post:706';
      const holder = clientFor(short, 'seo-agent-7').client;
      const waiter = clientFor(short, 'editor-alice');
      const d = await holder.decide({ action: 'update_post', resource, environment: 'production', fields: ['title'] });
      const w = await waiter.client.decide({ action: 'update_post', resource, environment: 'production', fields: ['title'] });
      const held = await holder.acquireLease([d], { ttlMs: 5_000 });
      const waiting = waiter.client.withLease([w], async ({ lease }) => lease!.keys, { deadlineMs: 10_000 });
      await sleep(1_500); // past one whole server-side wait: the SDK asked again
      await holder.releaseLease(held);
      expect(await waiting).toEqual([`${resource}#title`]);
      // One refused ask (wait_ms above the limit), then waits of at most 1 s each.
      expect(waiter.sent.filter((r) => r.path === '/v1/leases').length).toBeGreaterThanOrEqual(3);
    } finally {
      await short.stop();
    }
  });
});

describe('a decision that needs no lease', () => {
  it('withLease runs the task without a lease and the write goes through on its version alone', async () => {
    const resource = 'wp:post:703';
    const { client, sent } = clientFor(server, 'seo-agent-7');
    const d = await client.decide({ action: 'update_post', resource, environment: 'production', fields: ['meta_description'] });
    expect(d.allow, d.reasons.join('; ')).toBe(true);
    expect(d.obligations.lease_required).toBe(false);
    const version = await revisionOf(server, '703');
    const receipt = await client.withLease([d], async ({ lease, signal, act }) => {
      expect(lease).toBeNull();
      expect(signal.aborted).toBe(false);
      return act({ decision: d, action: 'update_post', resource, fields: ['meta_description'], payload: { meta_description: 'no lease needed' }, expected_version: version });
    });
    expect(receipt.status).toBe('COMPLETED');
    expect(receipt.lease_id).toBeNull();
    expect(sent.some((r) => r.path.startsWith('/v1/leases'))).toBe(false);
  });

  it('mixed with one that needs a lease: only that one is leased, and each write carries what its decision needs', async () => {
    const resource = 'wp:post:705';
    const { client } = clientFor(server, 'seo-agent-7');
    const title = await client.decide({ action: 'update_post', resource, environment: 'production', fields: ['title'] });
    const meta = await client.decide({ action: 'update_post', resource, environment: 'production', fields: ['meta_description'] });
    const [a, b] = await client.withLease([title, meta], async ({ lease, act }) => {
      expect(lease!.keys).toEqual([`${resource}#title`]);
      const first = await act({ decision: title, action: 'update_post', resource, fields: ['title'], payload: { title: 'T' }, expected_version: 0 });
      const second = await act({ decision: meta, action: 'update_post', resource, fields: ['meta_description'], payload: { meta_description: 'M' }, expected_version: 0 });
      return [first, second];
    });
    expect([a.status, b.status]).toEqual(['COMPLETED', 'COMPLETED']);
    expect(a.lease_id).not.toBeNull();
    expect(b.lease_id).toBeNull();
  });

  it('POST /v1/leases refuses it with 422, naming the field\'s real class and what to do', async () => {
    const { client } = clientFor(server, 'seo-agent-7');
    const d = await client.decide({ action: 'update_post', resource: 'wp:post:704', environment: 'production', fields: ['meta_description'] });
    const refused = await client.acquireLease([d]).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(UnprocessableError);
    const e = refused as UnprocessableError;
    expect(e.status).toBe(422);
    expect(e.detail).toContain('wp:post:704#meta_description is WRITE_OPTIMISTIC');
    expect(e.detail).not.toContain('WRITE_EXCLUSIVE');
    expect(e.detail).toContain('POST /v1/actions');
    expect(e.detail).toContain('expected_version');
  });
});
