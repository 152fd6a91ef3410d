import { expect, it } from 'vitest';
import { canonicalJson } from '../../../src/audit/canonical-json.js';
import type { GraphEvent } from '../../../src/graph/model.js';
import { describeEngines } from './engines.js';
import { acquireCommand, leaseView } from './helpers.js';

describeEngines('transactions', (fresh, engine) => {
  it('names its engine and returns what the callback returns', async () => {
    const { store } = await fresh();
    expect(store.engine).toBe(engine.name);
    expect(await store.readWrite(async () => 42)).toBe(42);
    expect(await store.read(async (tx) => tx.graph.head())).toBe(0);
  });

  it('a readWrite callback that throws rolls back everything it wrote, in every port, and its error comes out unchanged', async () => {
    const { store } = await fresh();
    const now = Date.now();
    const boom = new Error('the upstream call failed');
    const before = await leaseView(store, ['k:1']);
    const err = await store
      .readWrite(async (tx) => {
        await tx.graph.append([{ type: 'principal.upsert' } as unknown as GraphEvent], 'governance', now);
        expect(await tx.singleUse.spend('assertion', 'jti-1', now + 60_000, now)).toBe(true);
        const acquired = await tx.leases.acquire(acquireCommand(['k:1'], 'agent-a'));
        expect(acquired.granted).toBe(true);
        await tx.leases.enqueue({ keys: ['k:2'], holder: 'w', instance: null, priority: 1, enqueuedAt: now, deadline: now + 60_000 });
        await tx.leaseAuthority.record('lease_x', 'agent-a', [], now);
        await tx.incidents.declare({ id: 'i1', declared_by: 'ic', reason: 'r', decision_id: 'd', environment: 'production', declared_at: now, ends_at: now + 60_000 });
        await tx.receipts.appendIntent(
          { chain: 'k:1', receipt_id: 'r1', kind: 'intent', body: canonicalJson({ at: now }) },
          { receipt_id: 'r1', principal: 'agent-a', resource_key: 'k:1', status: 'PENDING', idempotency_key: 'idem', request_hash: 'h', created_at: now, completed_at: null },
        );
        throw boom;
      })
      .catch((e) => e);
    expect(err).toBe(boom);
    expect(await leaseView(store, ['k:1', 'k:2'])).toEqual({ ...before, waiters: [[], []] });
    await store.read(async (tx) => {
      expect(await tx.graph.head()).toBe(0);
      expect(await tx.singleUse.isSpent('assertion', 'jti-1', Date.now())).toBe(false);
      expect(await tx.leaseAuthority.get('lease_x')).toBeUndefined();
      expect(await tx.incidents.get('i1')).toBeUndefined();
      expect(await tx.receipts.findByIdempotencyKey('agent-a', 'idem')).toBeNull();
      expect(await tx.receipts.entriesFrom(null, 10)).toEqual([]);
      expect(await tx.receipts.heads()).toEqual([]);
    });
    // And the store is fine afterwards: the same writes commit.
    expect(await store.readWrite((tx) => tx.singleUse.spend('assertion', 'jti-1', now + 60_000, Date.now()))).toBe(true);
    expect((await store.readWrite((tx) => tx.leases.acquire(acquireCommand(['k:1'], 'agent-a')))).granted).toBe(true);
  });

  it('what one readWrite commits, every later transaction on another connection sees', async () => {
    const { store, another } = await fresh();
    const other = await another();
    await store.readWrite((tx) => tx.incidents.declare({ id: 'i1', declared_by: 'ic', reason: 'r', decision_id: 'd', environment: 'production', declared_at: 1, ends_at: 2 }));
    expect(await other.read((tx) => tx.incidents.get('i1'))).toMatchObject({ id: 'i1' });
  });
});
