import { expect, it } from 'vitest';
import { describeEngines, sleep } from './engines.js';
import { enqueue, epochsOf, release, renew, take } from './helpers.js';

/**
 * Attacks on key families in the stores (src/wire/key-family.ts; SQLite's lease repository and
 * PostgreSQL's writ_lease_acquire, migration 16): takeovers, the queue and lapsed leases across a family.
 */
const R = 'deploy:site:www';
const CONFIG = `${R}#config`;
const TITLE = `${R}#title`;

describeEngines('attacks: lease key families in the stores', (fresh) => {
  it('a takeover jumps the queue whether the lease it ends holds the key itself or a key of its family', async () => {
    const { store } = await fresh();
    // The reference: a lease on the field alone, taken over past a waiter of the preemptor's priority queued before it.
    const alone = await take(store, ['deploy:site:api#config'], 'release-controller', { priority: 10, ttlMs: 60_000 });
    await enqueue(store, 'editor', 100, ['deploy:site:api#config']);
    const ref = await take(store, ['deploy:site:api#config'], 'incident-commander', { priority: 100, preempt: true, preemptable: ['release-controller'] });
    expect(ref.outcome).toMatchObject({ granted: true, preempted: [{ lease_id: alone.leaseId, key: 'deploy:site:api#config' }] });

    // The same field, held by a lease that holds its resource too: the takeover ends that lease as well.
    const both = await take(store, [R, CONFIG], 'release-controller', { priority: 10, ttlMs: 60_000 });
    expect(both.outcome.granted).toBe(true);
    await enqueue(store, 'editor', 100, [CONFIG]);
    const field = await take(store, [CONFIG], 'incident-commander', { priority: 100, preempt: true, preemptable: ['release-controller'] });
    expect(field.outcome).toMatchObject({ granted: true });
    expect(await renew(store, both)).toEqual({ ok: false, reason: 'PREEMPTED' });
    await release(store, field);

    // A field whose resource is held: taking the field over ends the resource's lease, a takeover as well.
    // (Another resource: the waiter left on CONFIG has this one's fields reserved.)
    const whole = await take(store, ['deploy:site:shop'], 'release-controller', { priority: 10, ttlMs: 60_000 });
    expect(whole.outcome.granted).toBe(true);
    await enqueue(store, 'editor', 100, ['deploy:site:shop']);
    const title = await take(store, ['deploy:site:shop#title'], 'incident-commander', { priority: 100, preempt: true, preemptable: ['release-controller'] });
    expect(title.outcome).toMatchObject({ granted: true, preempted: [{ lease_id: whole.leaseId, key: 'deploy:site:shop' }] });
  });

  it('a waiter on a field, one on its resource and a newcomer on a sibling: served in turn, none stuck', async () => {
    const { store } = await fresh();
    const a = await take(store, [CONFIG], 'holder', { priority: 3 });
    const onField = await enqueue(store, 'field-waiter', 3, [CONFIG]);
    const onWhole = await enqueue(store, 'whole-waiter', 3, [R]);
    // The sibling is free, but the resource's waiter ahead has it reserved.
    expect((await take(store, [TITLE], 'newcomer', { priority: 3 })).outcome).toMatchObject({ granted: false, key: TITLE, queued: true });
    // The resource's waiter cannot pass the field's waiter ahead of it, nor the field's holder.
    expect((await take(store, [R], 'whole-waiter', { priority: 3, ticket: onWhole })).outcome).toMatchObject({ granted: false, queued: false });
    await release(store, a);
    expect((await take(store, [R], 'whole-waiter', { priority: 3, ticket: onWhole })).outcome).toMatchObject({ granted: false, queued: true });
    const f = await take(store, [CONFIG], 'field-waiter', { priority: 3, ticket: onField });
    expect(f.outcome.granted).toBe(true);
    await release(store, f);
    const w = await take(store, [R], 'whole-waiter', { priority: 3, ticket: onWhole });
    expect(epochsOf(w)).toEqual({ [R]: 3 });
    await release(store, w);
    expect(epochsOf(await take(store, [TITLE], 'newcomer', { priority: 3 }))).toEqual({ [TITLE]: 4 });
  });

  it('a lease that lapsed holding the resource (and a key elsewhere) is ended by a take of a field: its stale renewal and release are refused', async () => {
    const { store } = await fresh();
    const a = await take(store, [R, 'k:elsewhere'], 'agent-a', { ttlMs: 150 });
    await sleep(250);
    expect(epochsOf(await take(store, [CONFIG], 'agent-b'))).toEqual({ [CONFIG]: 2 });
    const stale = { leaseId: a.leaseId, tokenHash: a.tokenHash, now: a.cmd.now };
    expect(await store.readWrite((tx) => tx.leases.renew({ ...stale, ttlMs: 10_000 }))).toEqual({ ok: false, reason: 'EXPIRED' });
    expect(await store.readWrite((tx) => tx.leases.release(stale))).toEqual({ ok: false, reason: 'EXPIRED' });
    expect((await take(store, ['k:elsewhere'], 'agent-c')).outcome.granted).toBe(true);
  });
});
