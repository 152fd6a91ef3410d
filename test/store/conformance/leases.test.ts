import { expect, it } from 'vitest';
import { NEWCOMER_TICKET } from '../../../src/lease/repository.js';
import { describeEngines, sleep } from './engines.js';
import { acquireCommand, enqueue, epochsOf, leaseView, release, renew, take } from './helpers.js';

const K = 'wp:post:1024';

describeEngines('leases: acquire, renew, release', (fresh) => {
  it('grants a free key at epoch 1 and refuses it to anyone else while held, naming the holder', async () => {
    const { store } = await fresh();
    const a = await take(store, [K], 'agent-a', { ttlMs: 5_000 });
    expect(a.outcome).toMatchObject({ granted: true, epochs: { [K]: 1 }, preempted: [] });
    const b = await take(store, [K], 'agent-b');
    expect(b.outcome).toMatchObject({ granted: false, key: K, holder: 'agent-a', queued: false });
    if (a.outcome.granted && !b.outcome.granted) expect(b.outcome.expiresAt).toBe(a.outcome.expiresAt);
    const [row] = await store.read((tx) => tx.leases.listKeys({ key: K }).then((p) => p.keys));
    expect(row).toMatchObject({ key: K, epoch: 1, lease_id: a.leaseId, holder: 'agent-a', token_hash: a.tokenHash, duration_ms: 5_000, transitions: 0 });
  });

  it('renews every key of the lease (a new ttl or the old duration) and releases them, keeping the epochs', async () => {
    const { store } = await fresh();
    const a = await take(store, ['k:1', 'k:2'], 'agent-a', { ttlMs: 2_000 });
    const first = a.outcome.granted ? a.outcome.expiresAt : 0;
    await sleep(20);
    const renewed = await renew(store, a, 8_000);
    expect(renewed).toMatchObject({ ok: true, epochs: { 'k:1': 1, 'k:2': 1 } });
    if (renewed.ok) expect(renewed.expiresAt).toBeGreaterThanOrEqual(first + 6_000);
    const again = await renew(store, a);
    expect(again.ok && (await store.read((tx) => tx.leases.listKeys({ key: 'k:2' }).then((p) => p.keys)))[0]!.duration_ms).toBe(8_000);
    expect(await release(store, a)).toEqual({ ok: true, epochs: { 'k:1': 1, 'k:2': 1 } });
    const rows = await store.read((tx) => tx.leases.listKeys({}).then((p) => p.keys));
    expect(rows.map((r) => [r.key, r.epoch, r.holder, r.lease_id, r.token_hash, r.expires_at])).toEqual([
      ['k:1', 1, null, null, null, null],
      ['k:2', 1, null, null, null, null],
    ]);
    expect(epochsOf(await take(store, ['k:2'], 'agent-b'))).toEqual({ 'k:2': 2 });
  });

  it('renew and release say why they refuse, and change nothing', async () => {
    const { store } = await fresh();
    const a = await take(store, [K], 'agent-a', { ttlMs: 150 });
    const before = await leaseView(store, [K]);
    expect(await renew(store, { ...a, tokenHash: 'wrong' })).toEqual({ ok: false, reason: 'TOKEN_MISMATCH' });
    expect(await release(store, { ...a, leaseId: 'lease_nope' })).toEqual({ ok: false, reason: 'NOT_FOUND' });
    expect(await leaseView(store, [K])).toEqual(before);
    await sleep(250);
    expect(await renew(store, a)).toEqual({ ok: false, reason: 'EXPIRED' });
    expect(await release(store, a)).toEqual({ ok: false, reason: 'EXPIRED' });
    const b = await take(store, [K], 'agent-b');
    expect(epochsOf(b)).toEqual({ [K]: 2 });
    await release(store, b);
    expect(await release(store, b)).toEqual({ ok: false, reason: 'EXPIRED' });
    expect(await renew(store, b)).toEqual({ ok: false, reason: 'EXPIRED' });
  });

  it('takes several keys all-or-nothing: a refused key leaves the transaction usable and unchanged', async () => {
    const { store } = await fresh();
    await take(store, ['k:2'], 'agent-a');
    const before = await leaseView(store, ['k:1', 'k:2', 'k:3']);
    const cmd = acquireCommand(['k:1', 'k:2', 'k:3'], 'agent-b');
    const { refused, other } = await store.readWrite(async (tx) => {
      const refused = await tx.leases.acquire(cmd);
      // The same transaction goes on and commits something else.
      const other = await tx.leases.acquire(acquireCommand(['k:9'], 'agent-b'));
      return { refused, other };
    });
    expect(refused).toMatchObject({ granted: false, key: 'k:2', holder: 'agent-a', queued: false });
    expect(other).toMatchObject({ granted: true, epochs: { 'k:9': 1 } });
    const after = await leaseView(store, ['k:1', 'k:2', 'k:3']);
    expect(after.keys.filter((r) => r.key !== 'k:9')).toEqual(before.keys);
    expect(after.history.filter((e) => e.key !== 'k:9')).toEqual(before.history);
    expect(await store.read((tx) => tx.leases.history({ leaseId: cmd.leaseId }))).toEqual([]);
  });

  it('a lease id that exists, live or ended, is refused with tokenUsed before any key is looked at, and nothing changes', async () => {
    const { store } = await fresh();
    const a = await take(store, [K], 'agent-a');
    const ended = await take(store, ['k:free'], 'agent-a');
    await release(store, ended);
    const before = await leaseView(store, [K, 'k:free', 'k:other']);
    // The same lease asked again: its key is held by that very lease.
    expect((await take(store, [K], 'agent-a', { leaseId: a.leaseId, tokenHash: a.tokenHash })).outcome).toMatchObject({ granted: false, tokenUsed: true, key: K });
    // An ended lease's id, on keys that are free now: refused too (it would otherwise take them), in a
    // transaction that stays usable and commits something else.
    const { again, other } = await store.readWrite(async (tx) => ({
      again: await tx.leases.acquire(acquireCommand(['k:free', 'k:other'], 'agent-b', { leaseId: ended.leaseId, tokenHash: ended.tokenHash })),
      other: await tx.leases.acquire(acquireCommand(['k:9'], 'agent-b')),
    }));
    expect(again).toMatchObject({ granted: false, tokenUsed: true, key: 'k:free' });
    expect(other).toMatchObject({ granted: true });
    const after = await leaseView(store, [K, 'k:free', 'k:other']);
    expect(after.keys.filter((r) => r.key !== 'k:9')).toEqual(before.keys);
    expect(after.history.filter((e) => e.key !== 'k:9')).toEqual(before.history);
    // A fresh id is not refused for it.
    expect((await take(store, ['k:free'], 'agent-b')).outcome).toMatchObject({ granted: true, epochs: { 'k:free': 2 } });
  });

  it('twins: acquisitions with one lease id in flight at once on two connections: one is granted, the others tokenUsed, none refused by its own lease', async () => {
    const { store, another } = await fresh();
    const other = await another();
    // Keys never leased (a new key row), keys released before (the key row taken over) and two keys at once.
    await release(store, await take(store, ['k:old:0', 'k:old:1', 'k:old:2'], 'agent-z'));
    const rounds = [...Array.from({ length: 12 }, (_, i) => [`k:new:${i}`]), ['k:old:0'], ['k:old:1', 'k:old:2'], ['k:pair:a', 'k:pair:b']];
    for (const keys of rounds) {
      const cmd = acquireCommand(keys, 'agent-a');
      const outcomes = await Promise.all([store, other, store, other].map((s) => s.readWrite((tx) => tx.leases.acquire({ ...cmd }))));
      const granted = outcomes.filter((o) => o.granted);
      expect(granted, `${keys.join(', ')}: ${JSON.stringify(outcomes)}`).toHaveLength(1);
      for (const o of outcomes.filter((x) => !x.granted)) expect(o, keys.join(', ')).toMatchObject({ granted: false, tokenUsed: true, key: keys[0] });
      const rows = await store.read((tx) => tx.leases.listKeys({}).then((p) => p.keys));
      expect(rows.filter((r) => keys.includes(r.key)).map((r) => r.lease_id)).toEqual(keys.map(() => cmd.leaseId));
    }
  });

  it('twins that preempt: one takes the keys over, the others are tokenUsed and never take them from it', async () => {
    const { store, another } = await fresh();
    const other = await another();
    for (const [i, preemptable] of [undefined, ['agent-z'], undefined, ['agent-z']].entries()) {
      const keys = [`k:held:${i}:a`, `k:held:${i}:b`];
      const held = await take(store, keys, 'agent-z', { ttlMs: 60_000 });
      const cmd = acquireCommand(keys, 'agent-a', { preempt: true, priority: 100, ...(preemptable ? { preemptable } : {}) });
      const outcomes = await Promise.all([store, other, store, other].map((s) => s.readWrite((tx) => tx.leases.acquire({ ...cmd }))));
      const granted = outcomes.filter((o) => o.granted);
      expect(granted, JSON.stringify(outcomes)).toHaveLength(1);
      expect(granted[0]).toMatchObject({ epochs: { [keys[0]!]: 2, [keys[1]!]: 2 } });
      if (granted[0]?.granted) expect(granted[0].preempted.map((p) => p.lease_id)).toEqual([held.leaseId, held.leaseId]);
      for (const o of outcomes.filter((x) => !x.granted)) expect(o).toMatchObject({ granted: false, tokenUsed: true });
      const state = await store.read((tx) => tx.leases.fenceState(keys[0]!, cmd.tokenHash, cmd.leaseId));
      expect(state.lease).toMatchObject({ lease_id: cmd.leaseId, state: 'ACTIVE', epochs: { [keys[0]!]: 2, [keys[1]!]: 2 } });
      expect((await store.read((tx) => tx.leases.history({ leaseId: cmd.leaseId }))).map((e) => e.event)).toEqual(['ACQUIRE', 'ACQUIRE']);
    }
  });

  it('epochs only grow and are never reused after release or expiry', async () => {
    const { store } = await fresh();
    const seen: number[] = [];
    for (let i = 0; i < 4; i++) {
      const t = await take(store, [K, 'k:other'], `agent-${i % 2}`, { ttlMs: i === 2 ? 100 : 10_000 });
      seen.push(epochsOf(t)[K]!);
      if (i === 2) await sleep(200); // expires instead of being released
      else await release(store, t);
    }
    expect(seen).toEqual([1, 2, 3, 4]);
    const [row] = await store.read((tx) => tx.leases.listKeys({ key: K }).then((p) => p.keys));
    expect(row!.epoch).toBe(4);
    expect(row!.transitions).toBe(3);
  });

  it('records the history of each key and each lease, expiries included', async () => {
    const { store } = await fresh();
    const a = await take(store, [K], 'agent-a', { ttlMs: 100 });
    await sleep(200);
    const b = await take(store, [K, 'k:z'], 'agent-b');
    await renew(store, b);
    await release(store, b);
    expect((await store.read((tx) => tx.leases.history({ key: K }))).map((e) => [e.event, e.epoch, e.holder, e.actor])).toEqual([
      ['ACQUIRE', 1, 'agent-a', null],
      ['EXPIRE', 1, 'agent-a', 'agent-b'],
      ['ACQUIRE', 2, 'agent-b', null],
      ['RENEW', 2, 'agent-b', null],
      ['RELEASE', 2, 'agent-b', null],
    ]);
    expect((await store.read((tx) => tx.leases.history({ leaseId: b.leaseId }))).map((e) => [e.event, e.key])).toEqual([
      ['ACQUIRE', K],
      ['ACQUIRE', 'k:z'],
      ['RENEW', K],
      ['RENEW', 'k:z'],
      ['RELEASE', K],
      ['RELEASE', 'k:z'],
    ]);
    expect(await store.read((tx) => tx.leases.history({ leaseId: b.leaseId, key: 'k:z' }))).toHaveLength(3);
    const all = await store.read((tx) => tx.leases.history({}));
    expect(all).toHaveLength(8);
    expect(all.map((e) => e.seq)).toEqual([...all.map((e) => e.seq)].sort((x, y) => x - y));
    expect(a.outcome.granted).toBe(true);
  });

  it('lists keys ever leased, by key and by recorded holder, in key order', async () => {
    const { store } = await fresh();
    await take(store, ['b:2'], 'agent-a');
    await take(store, ['a:1', 'c:3'], 'agent-b');
    expect((await store.read((tx) => tx.leases.listKeys({}).then((p) => p.keys))).map((r) => r.key)).toEqual(['a:1', 'b:2', 'c:3']);
    expect((await store.read((tx) => tx.leases.listKeys({ holder: 'agent-b' }).then((p) => p.keys))).map((r) => r.key)).toEqual(['a:1', 'c:3']);
    expect(await store.read((tx) => tx.leases.listKeys({ key: 'b:2', holder: 'agent-b' }).then((p) => p.keys))).toEqual([]);
    expect(await store.read((tx) => tx.leases.listKeys({ key: 'never' }).then((p) => p.keys))).toEqual([]);
  });
});

describeEngines('leases: the wait queue', (fresh) => {
  it('orders waiters by priority, then age; tickets grow', async () => {
    const { store } = await fresh();
    const low = await enqueue(store, 'low', 1, [K]);
    const high = await enqueue(store, 'high', 5, [K]);
    const low2 = await enqueue(store, 'low-2', 1, [K]);
    expect(low < high && high < low2).toBe(true);
    expect((await store.read((tx) => tx.leases.waiters(K, Date.now()))).map((w) => [w.holder, w.priority])).toEqual([
      ['high', 5],
      ['low', 1],
      ['low-2', 1],
    ]);
  });

  it('a queued waiter blocks newcomers of equal or lower priority on a free key, not higher ones; it is served in its turn', async () => {
    const { store } = await fresh();
    const holder = await take(store, [K], 'holder');
    const ticket = await enqueue(store, 'waiter', 3, [K]);
    await release(store, holder);
    expect((await take(store, [K], 'equal', { priority: 3 })).outcome).toMatchObject({ granted: false, key: K, holder: null, queued: true });
    expect((await take(store, [K], 'lower', { priority: 2 })).outcome).toMatchObject({ granted: false, queued: true });
    const urgent = await take(store, [K], 'urgent', { priority: 4 });
    expect(epochsOf(urgent)).toEqual({ [K]: 2 });
    await release(store, urgent);
    const served = await take(store, [K], 'waiter', { priority: 3, ticket });
    expect(epochsOf(served)).toEqual({ [K]: 3 });
    // A granted waiter leaves the queue in the granting transaction.
    expect(await store.read((tx) => tx.leases.waiters(K, Date.now()))).toEqual([]);
  });

  it('among waiters, the older of equal priority goes first, and a lower one waits for a higher one', async () => {
    const { store } = await fresh();
    const first = await enqueue(store, 'first', 3, [K]);
    const second = await enqueue(store, 'second', 3, [K]);
    const low = await enqueue(store, 'low', 1, [K]);
    expect((await take(store, [K], 'second', { priority: 3, ticket: second })).outcome).toMatchObject({ granted: false, queued: true });
    expect((await take(store, [K], 'low', { priority: 1, ticket: low })).outcome).toMatchObject({ granted: false, queued: true });
    const a = await take(store, [K], 'first', { priority: 3, ticket: first });
    expect(a.outcome.granted).toBe(true);
    await release(store, a);
    expect((await take(store, [K], 'low', { priority: 1, ticket: low })).outcome).toMatchObject({ granted: false });
    expect((await take(store, [K], 'second', { priority: 3, ticket: second })).outcome.granted).toBe(true);
  });

  it('a waiter past its deadline blocks nobody, and dequeue removes a waiter', async () => {
    const { store } = await fresh();
    // A deadline long enough that a loaded machine still takes the first newcomer before it passes.
    await enqueue(store, 'vanished', 9, [K], 1_500);
    const gone = await enqueue(store, 'gave-up', 9, ['k:other']);
    expect((await take(store, [K], 'newcomer', { priority: 1 })).outcome.granted).toBe(false);
    await sleep(1_700);
    expect((await take(store, [K], 'newcomer', { priority: 1 })).outcome.granted).toBe(true);
    await store.readWrite((tx) => tx.leases.dequeue(gone));
    expect(await store.read((tx) => tx.leases.waiters('k:other', Date.now()))).toEqual([]);
    expect((await take(store, ['k:other'], 'newcomer', { priority: 1 })).outcome.granted).toBe(true);
  });

  it('a multi-key waiter holds its place on every key, also on one never leased', async () => {
    const { store } = await fresh();
    await take(store, ['k:1'], 'holder');
    await enqueue(store, 'both', 5, ['k:1', 'k:2']);
    expect((await take(store, ['k:2'], 'c', { priority: 1 })).outcome).toMatchObject({ granted: false, key: 'k:2', queued: true });
    expect((await store.read((tx) => tx.leases.waiters('k:2', Date.now()))).map((w) => w.holder)).toEqual(['both']);
  });

  it('liveWaiters: every leased key\'s live waiters in one read, in key order, each as waiters gives them', async () => {
    const { store } = await fresh();
    await take(store, ['k:b'], 'holder');
    await take(store, ['k:a', 'k:B'], 'holder-2');
    await enqueue(store, 'low', 1, ['k:b']);
    await enqueue(store, 'both', 5, ['k:b', 'k:a', 'k:never']);
    await enqueue(store, 'upper', 2, ['k:B']);
    await enqueue(store, 'low-2', 1, ['k:b']);
    await enqueue(store, 'gone', 9, ['k:a', 'k:b'], 0);
    const now = Date.now();
    const rows = await store.read((tx) => tx.leases.liveWaiters(now));
    expect(rows.map((r) => [r.key, r.holder])).toEqual([
      ['k:B', 'upper'],
      ['k:a', 'both'],
      ['k:b', 'both'],
      ['k:b', 'low'],
      ['k:b', 'low-2'],
    ]);
    // The same rows as the per-key reads of every leased key (a key never leased is not listed).
    const perKey = await store.read(async (tx) => {
      const keys = await tx.leases.listKeys({}).then((p) => p.keys);
      return (await Promise.all(keys.map(async (k) => (await tx.leases.waiters(k.key, now)).map((w) => ({ key: k.key, ...w }))))).flat();
    });
    expect(rows).toEqual(perKey);
  });

  it('waitingOf: the acquisitions one holder keeps waiting over every key (a multi-key waiter once), live ones only, and when the first ends', async () => {
    const { store } = await fresh();
    expect(await store.read((tx) => tx.leases.waitingOf('agent', Date.now()))).toEqual({ waiting: 0, firstDeadlineInMs: null });
    await enqueue(store, 'agent', 1, ['k:a'], 20_000);
    await enqueue(store, 'agent', 1, ['k:b', 'k:c', 'k:never'], 10_000);
    await enqueue(store, 'agent', 1, ['k:a'], 0);
    await enqueue(store, 'other', 1, ['k:a'], 5_000);
    const mine = await store.read((tx) => tx.leases.waitingOf('agent', Date.now()));
    expect(mine.waiting).toBe(2);
    // By the clock the deadlines were set by (the engine's own on PostgreSQL): the 10 s wait, less the time since.
    expect(mine.firstDeadlineInMs).toBeGreaterThan(5_000);
    expect(mine.firstDeadlineInMs).toBeLessThanOrEqual(10_000);
    const ticket = await enqueue(store, 'agent', 1, ['k:d']);
    expect((await store.read((tx) => tx.leases.waitingOf('agent', Date.now()))).waiting).toBe(3);
    await store.readWrite((tx) => tx.leases.dequeue(ticket));
    expect((await store.read((tx) => tx.leases.waitingOf('agent', Date.now()))).waiting).toBe(2);
    expect((await store.read((tx) => tx.leases.waitingOf('other', Date.now()))).waiting).toBe(1);
    expect((await store.read((tx) => tx.leases.waitingOf('nobody', Date.now())))).toEqual({ waiting: 0, firstDeadlineInMs: null });
  });

  it('heldKeys: the keys held now, in key order, as listKeys gives them; not the released, expired or never held', async () => {
    const { store } = await fresh();
    expect(await store.read((tx) => tx.leases.heldKeys(Date.now()))).toEqual({ keys: [] });
    await take(store, ['k:b'], 'holder', { ttlMs: 60_000 });
    await take(store, ['k:a', 'k:B'], 'holder-2', { ttlMs: 60_000 });
    await take(store, ['k:lapsed'], 'holder-3', { ttlMs: 100 });
    await release(store, await take(store, ['k:released'], 'holder-4', { ttlMs: 60_000 }));
    await sleep(200);
    const now = Date.now();
    const held = await store.read((tx) => tx.leases.heldKeys(now));
    expect(held.keys.map((r) => [r.key, r.holder])).toEqual([
      ['k:B', 'holder-2'],
      ['k:a', 'holder-2'],
      ['k:b', 'holder'],
    ]);
    const all = await store.read((tx) => tx.leases.listKeys({}).then((p) => p.keys));
    expect(held.keys).toEqual(all.filter((r) => held.keys.some((h) => h.key === r.key)));
    // Held by the clock the store keeps lease time with (PostgreSQL's own, returned), else the caller's.
    const at = held.now ?? now;
    expect(held.keys.every((r) => r.expires_at! > at)).toBe(true);
    expect(all.find((r) => r.key === 'k:lapsed')!.expires_at!).toBeLessThanOrEqual(at);
  });

  it('the queue holds across connections: a waiter queued through one blocks a lower newcomer on another', async () => {
    const { store, another } = await fresh();
    const other = await another();
    const held = await take(store, [K], 'holder');
    const ticket = await enqueue(other, 'waiter-b', 5, [K]);
    await release(store, held);
    expect((await take(store, [K], 'newcomer-a', { priority: 4 })).outcome).toMatchObject({ granted: false, queued: true });
    expect(epochsOf(await take(other, [K], 'waiter-b', { priority: 5, ticket }))).toEqual({ [K]: 2 });
  });

  it('tickets are safe integers below the newcomer sentinel (the lease manager compares them as numbers)', async () => {
    const { store } = await fresh();
    const t = await enqueue(store, 'w', 0, [K]);
    expect(Number.isSafeInteger(t)).toBe(true);
    expect(t).toBeLessThan(NEWCOMER_TICKET);
  });
});

describeEngines('leases: preemption', (fresh) => {
  it('takes a held key, moves the epoch on, ends the old lease PREEMPTED and frees its other keys', async () => {
    const { store } = await fresh();
    const old = await take(store, ['k:1', 'k:2'], 'release-controller', { priority: 10, ttlMs: 60_000 });
    const inc = await take(store, ['k:2'], 'incident-commander', { priority: 100, preempt: true });
    expect(inc.outcome).toMatchObject({ granted: true, epochs: { 'k:2': 2 } });
    if (!inc.outcome.granted) return;
    expect([...inc.outcome.preempted].sort((a, b) => a.key.localeCompare(b.key))).toEqual([
      { lease_id: old.leaseId, holder: 'release-controller', key: 'k:1', epoch: 1 },
      { lease_id: old.leaseId, holder: 'release-controller', key: 'k:2', epoch: 1 },
    ]);
    expect(await renew(store, old)).toEqual({ ok: false, reason: 'PREEMPTED' });
    expect(await release(store, old)).toEqual({ ok: false, reason: 'PREEMPTED' });
    const rows = await store.read((tx) => tx.leases.listKeys({}).then((p) => p.keys));
    expect(rows.map((r) => [r.key, r.epoch, r.holder, r.preempted_by, r.transitions])).toEqual([
      ['k:1', 1, null, null, 0],
      ['k:2', 2, 'incident-commander', 'incident-commander', 1],
    ]);
    expect((await store.read((tx) => tx.leases.history({ leaseId: old.leaseId }))).map((e) => [e.event, e.key, e.actor])).toEqual([
      ['ACQUIRE', 'k:1', null],
      ['ACQUIRE', 'k:2', null],
      ['PREEMPT', 'k:2', 'incident-commander'],
      ['PREEMPT', 'k:1', 'incident-commander'],
    ]);
    expect(epochsOf(await take(store, ['k:1'], 'other'))).toEqual({ 'k:1': 2 });
  });

  it('takes over only the holders listed as preemptable; anyone else is refused and nothing changes', async () => {
    const { store } = await fresh();
    await take(store, [K], 'someone-else', { priority: 20 });
    const before = await leaseView(store, [K]);
    const refused = await take(store, [K], 'incident-commander', { priority: 100, preempt: true, preemptable: ['release-controller'] });
    expect(refused.outcome).toMatchObject({ granted: false, key: K, holder: 'someone-else', queued: false });
    expect(await leaseView(store, [K])).toEqual(before);
    const free = await take(store, ['k:free'], 'incident-commander', { preempt: true, preemptable: [] });
    expect(free.outcome).toMatchObject({ granted: true, preempted: [] });
  });

  it('never jumps the queue for a key nobody live holds (released, or never leased)', async () => {
    const { store } = await fresh();
    const held = await take(store, [K], 'release-controller', { priority: 80 });
    const now = Date.now();
    await store.readWrite((tx) => tx.leases.enqueue({ keys: [K, 'k:new'], holder: 'editor', instance: null, priority: 60, enqueuedAt: now, deadline: now + 5_000 }));
    await release(store, held);
    const pre = await take(store, [K], 'seo-agent', { priority: 20, preempt: true, preemptable: ['seo-agent'] });
    expect(pre.outcome).toMatchObject({ granted: false, key: K, queued: true });
    const fresh2 = await take(store, ['k:new'], 'seo-agent', { priority: 20, preempt: true });
    expect(fresh2.outcome).toMatchObject({ granted: false, key: 'k:new', queued: true });
  });
});

describeEngines('leases: fence state', (fresh) => {
  it('reads the key row and the lease of a token together; by lease id, or the key\'s current lease for its token', async () => {
    const { store, } = await fresh();
    const a = await take(store, [K, 'k:2'], 'agent-a');
    const byId = await store.read((tx) => tx.leases.fenceState(K, a.tokenHash, a.leaseId));
    expect(byId.key).toMatchObject({ key: K, epoch: 1, lease_id: a.leaseId, holder: 'agent-a' });
    expect(byId.lease).toMatchObject({ lease_id: a.leaseId, holder: 'agent-a', resources: [K, 'k:2'], epochs: { [K]: 1, 'k:2': 1 }, state: 'ACTIVE' });
    if (byId.now !== undefined) expect(Math.abs(byId.now - Date.now())).toBeLessThan(5_000);
    const byKey = await store.read((tx) => tx.leases.fenceState(K, a.tokenHash, null));
    expect(byKey.lease?.lease_id).toBe(a.leaseId);
    const wrong = await store.read((tx) => tx.leases.fenceState(K, 'other-hash', a.leaseId));
    expect(wrong.lease).toBeUndefined();
    expect(wrong.key?.epoch).toBe(1);
    const none = await store.read((tx) => tx.leases.fenceState('never', a.tokenHash, a.leaseId));
    expect(none.key).toBeUndefined();
  });

  it('shows an ended lease with its state after release and after preemption', async () => {
    const { store } = await fresh();
    const a = await take(store, [K], 'agent-a');
    await release(store, a);
    expect((await store.read((tx) => tx.leases.fenceState(K, a.tokenHash, a.leaseId))).lease).toMatchObject({ state: 'RELEASED' });
    const b = await take(store, [K], 'agent-b');
    await take(store, [K], 'incident', { preempt: true });
    const f = await store.read((tx) => tx.leases.fenceState(K, b.tokenHash, b.leaseId));
    expect(f.lease).toMatchObject({ state: 'PREEMPTED', holder: 'agent-b' });
    expect(f.key).toMatchObject({ epoch: 3, holder: 'incident' });
  });
});

describeEngines('leases: history retention', (fresh) => {
  it('prunes events older than the cut, keeps each key\'s latest, and leaves epochs and the next events as they were', async () => {
    const { store } = await fresh();
    for (let i = 0; i < 3; i++) await release(store, await take(store, [K, 'k:2'], `agent-${i}`));
    const before = await store.read((tx) => tx.leases.history({ key: K }));
    expect(before.map((e) => e.event)).toEqual(['ACQUIRE', 'RELEASE', 'ACQUIRE', 'RELEASE', 'ACQUIRE', 'RELEASE']);
    expect(await store.readWrite((tx) => tx.leases.pruneHistory(0))).toBe(0);
    // A cut after everything: all but each key's latest event go (5 per key).
    expect(await store.readWrite((tx) => tx.leases.pruneHistory(Date.now() + 86_400_000))).toBe(10);
    expect((await store.read((tx) => tx.leases.history({ key: K }))).map((e) => [e.event, e.epoch])).toEqual([['RELEASE', 3]]);
    // Epochs live on the keys: the next holder still gets epoch 4, and its events follow the kept one.
    const next = await take(store, [K], 'agent-next');
    expect(next.outcome).toMatchObject({ granted: true, epochs: { [K]: 4 } });
    expect((await store.read((tx) => tx.leases.history({ key: K }))).map((e) => [e.event, e.epoch])).toEqual([['RELEASE', 3], ['ACQUIRE', 4]]);
  });
});
