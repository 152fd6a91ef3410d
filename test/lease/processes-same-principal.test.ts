import { describe, expect, it } from 'vitest';
import { useLeaseWorkers } from './fixtures/lease-workers.js';

const PRINCIPAL = 'seo-agent-7';
const KEY = 'wp:post:1024';
const startWorkers = useLeaseWorkers();

describe('two processes of the same principal', () => {
  it('the one without the current token can neither renew, release nor pass the fence, and the holder is unaffected', { timeout: 60_000 }, async () => {
    const { workers: [holder, other] } = await startWorkers(['process-A', 'process-B']);

    const grant = await holder.value('acquire', { resources: [KEY], holder: PRINCIPAL, priority: 0, ttlMs: 60_000 });
    const before = await other.value('describe', { key: KEY });

    const again = await other.call('acquire', { resources: [KEY], holder: PRINCIPAL, priority: 0, ttlMs: 60_000 });
    expect(again).toMatchObject({ ok: false, code: 'RESOURCE_BUSY', details: { holder: PRINCIPAL } });
    // B has a genuine token of its own (for another key) and knows A's lease id: still not A's token.
    const own = await other.value('acquire', { resources: ['wp:post:2048'], holder: PRINCIPAL, priority: 0, ttlMs: 60_000 });
    for (const token of [own.token, 'forged-token']) {
      expect(await other.call('renew', { lease_id: grant.lease_id, token })).toMatchObject({ code: 'LEASE_TOKEN_MISMATCH' });
      expect(await other.call('release', { lease_id: grant.lease_id, token })).toMatchObject({ code: 'LEASE_TOKEN_MISMATCH' });
      expect(await other.call('validateFence', { key: KEY, token, epoch: grant.epochs[KEY], principal: PRINCIPAL })).toMatchObject({
        code: 'LEASE_TOKEN_MISMATCH',
      });
    }

    expect(await other.value('describe', { key: KEY })).toEqual(before);
    expect(before).toMatchObject({ holderInstance: 'process-A', epoch: 1, leaseId: grant.lease_id, state: 'HELD' });
    expect(await holder.value('validateFence', { key: KEY, token: grant.token, epoch: 1, principal: PRINCIPAL })).toMatchObject({ epoch: 1 });
    expect(await holder.call('renew', { lease_id: grant.lease_id, token: grant.token })).toMatchObject({ ok: true });
    expect(await holder.call('release', { lease_id: grant.lease_id, token: grant.token })).toMatchObject({ ok: true });
    expect(await other.value('currentEpoch', { key: KEY })).toBe(1);
  });
});
