import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WriteOutcomeUnknownError, type Receipt } from '../../src/sdk/index.js';
import { startServerProcess, type ServerProcess } from '../support/server-process.js';
import { clientFor, revisionOf, upstreamRequests } from './sdk-support.js';

let server: ServerProcess;
beforeAll(async () => {
  server = await startServerProcess();
});
afterAll(async () => server?.stop());

describe('act and an Idempotency-Key retry', () => {
  it('an answer lost after Writ wrote (the default random key) is WriteOutcomeUnknownError with that key: a retry with it answers the first receipt, and nothing is written twice', async () => {
    // Writ handled the write and answered; the connection dropped before the agent read the answer.
    let loseNextAnswer = false;
    const lossy: typeof fetch = async (input, init) => {
      const res = await fetch(input, init);
      if (!loseNextAnswer) return res;
      loseNextAnswer = false;
      await res.arrayBuffer();
      throw new TypeError('fetch failed', { cause: Object.assign(new Error('other side closed'), { code: 'UND_ERR_SOCKET' }) });
    };
    const { client } = clientFor(server, 'seo-agent-7', lossy);
    const resource = 'wp:post:813';
    const decision = await client.decide({ action: 'update_post', resource, environment: 'production', fields: ['title'] });
    const version = await revisionOf(server, '813');

    const { lost, again } = await client.withLease([decision], async ({ act }) => {
      loseNextAnswer = true;
      const lost = await act({ payload: { title: 'answer lost' }, expected_version: version }).then(() => null, (e: unknown) => e);
      if (!(lost instanceof WriteOutcomeUnknownError)) return { lost, again: null };
      return { lost, again: await act({ payload: { title: 'answer lost' }, expected_version: version, idempotencyKey: lost.idempotencyKey }) };
    });

    expect(lost).toBeInstanceOf(WriteOutcomeUnknownError);
    const unknown = lost as WriteOutcomeUnknownError;
    expect(unknown.idempotencyKey).toMatch(/^[0-9a-f-]{36}$/);
    expect(unknown.decisionId).toBe(decision.decision_id);
    expect(unknown.resource).toBe(resource);
    expect(unknown.cause).toBeInstanceOf(TypeError);
    expect(unknown.message).toContain(unknown.idempotencyKey);
    expect(again?.replayed).toBe(true);
    expect(again?.status).toBe('COMPLETED');
    expect(again?.idempotency_key).toBe(unknown.idempotencyKey);
    expect((await upstreamRequests(server, '813')).filter((r) => r.method !== 'GET')).toHaveLength(1);
  });

  it('a retry that wrote nothing says so (receipt.replayed true, the first receipt); a new write says replayed false', async () => {
    const { client } = clientFor(server, 'seo-agent-7');
    const resource = 'wp:post:811';
    const decision = await client.decide({ action: 'update_post', resource, environment: 'production', fields: ['title'] });
    expect(decision.allow, decision.reasons.join('; ')).toBe(true);
    const version = await revisionOf(server, '811');
    const write = { decision, payload: { title: 'once only' }, expected_version: version, idempotencyKey: `replay-${Date.now()}` };

    const { first, again } = await client.withLease([decision], async ({ lease }) => {
      const first = await client.act({ ...write, lease });
      // The agent crashed before it saw the answer, and retries with the same key.
      const again = await client.act({ ...write, lease });
      return { first, again };
    });

    expect(first.replayed).toBe(false);
    expect(again.replayed).toBe(true);
    expect(again.receipt_id).toBe(first.receipt_id);
    expect(again.status).toBe('COMPLETED');
    expect((await upstreamRequests(server, '811')).filter((r) => r.method !== 'GET')).toHaveLength(1);
  });

  it('on the wire, the receipt of a retry that wrote nothing has replayed true (as the Receipt schema says), as the answer\'s replayed is', async () => {
    const { client } = clientFor(server, 'seo-agent-7');
    const resource = 'wp:post:812';
    const decision = await client.decide({ action: 'update_post', resource, environment: 'production', fields: ['title'] });
    expect(decision.allow, decision.reasons.join('; ')).toBe(true);
    const lease = await client.acquireLease([decision]);
    const headers = {
      'writ-decision': decision.token!, 'idempotency-key': `wire-${Date.now()}`, 'writ-lease-id': lease.lease_id, 'writ-lease-token': lease.token,
      'writ-fencing-epoch': Object.entries(lease.epochs).map(([k, e]) => `${k}=${e}`).join(','),
    };
    const body = { action: 'update_post', resource, fields: ['title'], payload: { title: 'on the wire' }, expected_version: await revisionOf(server, '812') };
    type Answer = { receipt: Receipt; replayed: boolean };
    const first = await client.request<Answer>('POST', '/v1/actions', body, headers);
    const again = await client.request<Answer>('POST', '/v1/actions', body, headers);
    await client.releaseLease(lease);
    expect(first.replayed).toBe(false);
    expect(first.receipt.replayed).toBeUndefined();
    expect(again.replayed).toBe(true);
    expect(again.receipt.replayed).toBe(true);
    expect(again.receipt.receipt_id).toBe(first.receipt.receipt_id);
  });
});
