import { expect, it } from 'vitest';
import { describeEngines, sleep } from './engines.js';
import { enqueue, epochsOf, leaseView, release, renew, take } from './helpers.js';

/** Key families (src/wire/key-family.ts, the contract in src/lease/repository.ts): a resource key and its fields' keys. */
const R = 'deploy:site:www';
const CONFIG = `${R}#config`;
const TITLE = `${R}#title`;

describeEngines('leases: key families', (fresh) => {
  it('a whole-resource lease and a field lease of one resource conflict, both ways; the refusal names the related key held, and changes nothing', async () => {
    const { store } = await fresh();
    const whole = await take(store, [R], 'release-controller');
    const before = await leaseView(store, [R, CONFIG]);
    const field = await take(store, [CONFIG], 'incident-commander');
    expect(field.outcome).toMatchObject({ granted: false, key: CONFIG, heldKey: R, holder: 'release-controller', queued: false });
    if (whole.outcome.granted && !field.outcome.granted) expect(field.outcome.expiresAt).toBe(whole.outcome.expiresAt);
    expect(await leaseView(store, [R, CONFIG])).toEqual(before);
    await release(store, whole);

    const f = await take(store, [CONFIG], 'incident-commander');
    expect(f.outcome.granted).toBe(true);
    expect((await take(store, [R], 'release-controller')).outcome).toMatchObject({ granted: false, key: R, heldKey: CONFIG, holder: 'incident-commander', queued: false });
    // A multi-key lease with the root among its keys is refused whole.
    expect((await take(store, ['deploy:site:api', R], 'release-controller')).outcome).toMatchObject({ granted: false, key: R, heldKey: CONFIG });
    expect((await store.read((tx) => tx.leases.listKeys({ key: 'deploy:site:api' }))).keys).toEqual([]);
  });

  it('siblings run in parallel; one lease may hold the resource and its fields together; keys that only share a prefix are no family', async () => {
    const { store } = await fresh();
    expect((await take(store, [CONFIG], 'agent-a')).outcome.granted).toBe(true);
    expect((await take(store, [TITLE], 'agent-b')).outcome.granted).toBe(true);
    expect((await take(store, [`${R}x`, `${R}-2`, `${R}:x`], 'agent-c')).outcome.granted).toBe(true);
    const both = await take(store, ['deploy:site:api', 'deploy:site:api#config'], 'agent-d');
    expect(both.outcome.granted).toBe(true);
    expect((await take(store, ['deploy:site:api#env'], 'agent-e')).outcome).toMatchObject({ granted: false, heldKey: 'deploy:site:api', holder: 'agent-d' });
  });

  it('one epoch counter per family: each grant of any key of it is above every earlier grant in it; other families keep their own', async () => {
    const { store } = await fresh();
    const a = await take(store, [CONFIG], 'agent-a');
    const b = await take(store, [TITLE], 'agent-b');
    expect([epochsOf(a)[CONFIG], epochsOf(b)[TITLE]]).toEqual([1, 2]);
    await release(store, a);
    await release(store, b);
    const whole = await take(store, [R], 'release-controller');
    expect(epochsOf(whole)).toEqual({ [R]: 3 });
    await release(store, whole);
    expect(epochsOf(await take(store, [CONFIG], 'agent-a'))).toEqual({ [CONFIG]: 4 });
    const other = await take(store, ['deploy:site:api#config'], 'agent-a');
    expect(epochsOf(other)).toEqual({ 'deploy:site:api#config': 1 });
    await release(store, other);
    // One lease with a root and its field: each key above the family's highest when it was taken.
    const api = await take(store, ['deploy:site:api', 'deploy:site:api#env'], 'agent-c');
    expect(epochsOf(api)).toEqual({ 'deploy:site:api': 2, 'deploy:site:api#env': 3 });
    expect((await store.read((tx) => tx.leases.history({ key: CONFIG }))).map((e) => [e.event, e.epoch])).toEqual([
      ['ACQUIRE', 1], ['RELEASE', 1], ['ACQUIRE', 4],
    ]);
  });

  it('after an epoch bump a key leased for the first time starts above the floor and above its family, the floor counted once', async () => {
    const { store } = await fresh();
    const a = await take(store, [CONFIG], 'agent-a');
    expect(epochsOf(a)).toEqual({ [CONFIG]: 1 });
    await store.readWrite((tx) => tx.leases.bumpEpochs({ kind: 'BUMP', margin: 1000, actor: 'operator:test', reason: 'recovered to an earlier point', detail: {}, now: Date.now() }));
    expect(epochsOf(await take(store, [TITLE], 'agent-b'))).toEqual({ [TITLE]: 1002 });
    expect(epochsOf(await take(store, ['deploy:site:api'], 'agent-b'))).toEqual({ 'deploy:site:api': 1001 });
    expect(await store.read((tx) => tx.leases.maxEpoch())).toBe(1002);
  });

  it('an expired lease of a key taken again is recorded at its own epoch, not one below the family\'s new one', async () => {
    const { store } = await fresh();
    const a = await take(store, [CONFIG], 'agent-a', { ttlMs: 150 });
    await take(store, [TITLE], 'agent-b');
    await sleep(250);
    const c = await take(store, [CONFIG], 'agent-c');
    expect(epochsOf(c)).toEqual({ [CONFIG]: 3 });
    expect((await store.read((tx) => tx.leases.history({ leaseId: a.leaseId }))).map((e) => [e.event, e.key, e.epoch])).toEqual([
      ['ACQUIRE', CONFIG, 1], ['EXPIRE', CONFIG, 1],
    ]);
  });

  it('a lease that lapsed holding a related key is ended by the take: a renewal that read the clock before it lapsed is refused', async () => {
    const { store } = await fresh();
    const a = await take(store, [CONFIG], 'agent-a', { ttlMs: 150 });
    await sleep(250);
    expect((await take(store, [R], 'release-controller')).outcome.granted).toBe(true);
    // The clock as it was while the lease was live (SQLite takes lease time from its caller; PostgreSQL keeps its own).
    const stale = await store.readWrite((tx) => tx.leases.renew({ leaseId: a.leaseId, tokenHash: a.tokenHash, ttlMs: 10_000, now: a.cmd.now }));
    expect(stale).toEqual({ ok: false, reason: 'EXPIRED' });
  });

  it('preemption takes over a related key from a preemptable holder: that lease ends PREEMPTED with all its keys freed', async () => {
    const { store } = await fresh();
    const old = await take(store, [CONFIG, 'k:other'], 'release-controller', { priority: 10, ttlMs: 60_000 });
    const sib = await take(store, [TITLE], 'editor', { priority: 10, ttlMs: 60_000 });
    const inc = await take(store, [R], 'incident-commander', { priority: 100, preempt: true, preemptable: ['release-controller', 'editor'] });
    expect(inc.outcome).toMatchObject({ granted: true, epochs: { [R]: 3 } });
    if (!inc.outcome.granted) return;
    expect([...inc.outcome.preempted].sort((x, y) => x.key.localeCompare(y.key))).toEqual([
      { lease_id: old.leaseId, holder: 'release-controller', key: CONFIG, epoch: 1 },
      { lease_id: sib.leaseId, holder: 'editor', key: TITLE, epoch: 2 },
      { lease_id: old.leaseId, holder: 'release-controller', key: 'k:other', epoch: 1 },
    ]);
    expect(await renew(store, old)).toEqual({ ok: false, reason: 'PREEMPTED' });
    expect(await renew(store, sib)).toEqual({ ok: false, reason: 'PREEMPTED' });
    const rows = await store.read((tx) => tx.leases.listKeys({}).then((p) => p.keys));
    expect(rows.map((r) => [r.key, r.holder])).toEqual([[R, 'incident-commander'], [CONFIG, null], [TITLE, null], ['k:other', null]]);
    expect((await store.read((tx) => tx.leases.history({ leaseId: old.leaseId }))).map((e) => [e.event, e.key, e.actor])).toEqual([
      ['ACQUIRE', CONFIG, null], ['ACQUIRE', 'k:other', null], ['PREEMPT', CONFIG, 'incident-commander'], ['PREEMPT', 'k:other', 'incident-commander'],
    ]);
    // The reverse: a field key preempts the whole-resource lease.
    const field = await take(store, [CONFIG], 'sre', { priority: 200, preempt: true });
    expect(field.outcome).toMatchObject({ granted: true, epochs: { [CONFIG]: 4 }, preempted: [{ lease_id: inc.leaseId, holder: 'incident-commander', key: R, epoch: 3 }] });
  });

  it('preemption refuses a related key held by a holder not preemptable, naming it, and changes nothing', async () => {
    const { store } = await fresh();
    await take(store, [CONFIG], 'someone-else', { priority: 10 });
    await take(store, ['k:x'], 'release-controller', { priority: 10 });
    const before = await leaseView(store, [R, CONFIG]);
    const refused = await take(store, ['k:x', R], 'incident-commander', { priority: 100, preempt: true, preemptable: ['release-controller'] });
    expect(refused.outcome).toMatchObject({ granted: false, key: R, heldKey: CONFIG, holder: 'someone-else', queued: false });
    expect(await leaseView(store, [R, CONFIG])).toEqual(before);
  });

  it('a waiter ahead on a related key blocks a newcomer, both ways; a waiter on a sibling does not', async () => {
    const { store } = await fresh();
    const wholeWaiter = await enqueue(store, 'release-controller', 3, [R]);
    expect((await take(store, [CONFIG], 'field-writer', { priority: 3 })).outcome).toMatchObject({ granted: false, key: CONFIG, queued: true });
    const urgent = await take(store, [CONFIG], 'urgent', { priority: 4 });
    expect(urgent.outcome.granted).toBe(true);
    await release(store, urgent);
    const served = await take(store, [R], 'release-controller', { priority: 3, ticket: wholeWaiter });
    expect(served.outcome.granted).toBe(true);
    await release(store, served);

    await enqueue(store, 'field-waiter', 3, [CONFIG]);
    expect((await take(store, [R], 'whole-writer', { priority: 3 })).outcome).toMatchObject({ granted: false, key: R, queued: true });
    expect((await take(store, [TITLE], 'sibling', { priority: 3 })).outcome.granted).toBe(true);
  });

  it('two connections racing a resource and its field: never both granted', async () => {
    const { store, another } = await fresh();
    const other = await another();
    for (let round = 0; round < 15; round++) {
      const root = `deploy:race:${round}`;
      const [a, b] = await Promise.all([take(store, [root], 'whole'), take(other, [`${root}#config`], 'field')]);
      expect([a.outcome.granted, b.outcome.granted].filter(Boolean).length, `round ${round}`).toBe(1);
    }
  });
});
