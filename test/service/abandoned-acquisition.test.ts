/**
 * acquireLeases' `callerGone` (the lease stream aborts it when the stream closes), on each engine: a
 * waiting acquisition leaves the queue and takes nothing; one granted as its caller went is released
 * at once when Writ made its token (no one can ever learn it), and kept for a replay with the caller's
 * own token. Each is told to the observer. The stream itself, over real processes, is
 * test/e2e/lease-stream-abandoned.test.ts; here the grant that races the close is made to happen.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { LeaseManager } from '../../src/lease/index.js';
import { acquireLeases, type AbandonedAcquisition, type WritContext } from '../../src/service/index.js';
import type { StoreTx } from '../../src/store/contract.js';
import { newLeaseToken } from '../../src/sdk/index.js';
import { decideAndLease, decideOk, leaseOk } from '../support/agent.js';
import { startHarness, type Harness } from '../support/harness.js';

const SEO = 'seo-agent-7';
const ALICE = 'editor-alice';
const KEY = 'wp:post:77#title';

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

/** The harness's context with a recording observer, and leases whose store runs `afterCommit` after each write transaction. */
function observed(harness: Harness, afterCommit: () => void = () => {}): { ctx: WritContext; told: AbandonedAcquisition[] } {
  const told: AbandonedAcquisition[] = [];
  const base = harness.ctx;
  const store = Object.create(base.store) as typeof base.store;
  store.readWrite = async <T>(fn: (tx: StoreTx) => Promise<T>) => {
    const out = await base.store.readWrite(fn);
    afterCommit();
    return out;
  };
  const leases = new LeaseManager<StoreTx>(store, base.clock, { maxWaitMs: base.config.lease.maxWaitMs });
  const ctx: WritContext = { ...base, leases, observer: { ...base.observer, abandonedAcquisition: (e) => told.push(e) } };
  return { ctx, told };
}

/** Editor-alice's lease on KEY, decided and granted. */
const aliceLease = async (harness: Harness) => (await decideAndLease(harness, ALICE, { resource: 'wp:post:77', fields: ['title'] })).lease;

/** The grant made to race the close: `observed` with a caller that goes as soon as a write through its `ctx` commits (the grant), and seo-agent-7's decision on KEY. */
async function callerGoesAtGrant(harness: Harness) {
  const gone = new AbortController();
  const { ctx, told } = observed(harness, () => gone.abort());
  const seoDecision = (await decideOk(harness, SEO, { resource: 'wp:post:77', fields: ['title'] })).token;
  return { ctx, told, callerGone: gone.signal, seoDecision };
}

describe.each(['sqlite', 'postgres'] as const)('an acquisition whose caller went away, on %s', (engine) => {
  it('waiting in the queue: leaves it when the caller goes and takes nothing; the holder\'s release serves the next one', async () => {
    h = await startHarness({ engine });
    const { ctx, told } = observed(h);
    const alice = await aliceLease(h);
    const gone = new AbortController();
    const seoDecision = (await decideOk(h, SEO, { resource: 'wp:post:77', fields: ['title'] })).token;
    const waiting = acquireLeases(ctx, SEO, { decisions: [seoDecision], wait_ms: 30_000 }, { callerGone: gone.signal }).catch((e: unknown) => e);
    for (let i = 0; (await ctx.leases.queues()).length === 0; i++) {
      if (i > 200) throw new Error('never queued');
      await new Promise((r) => setTimeout(r, 10));
    }
    gone.abort();
    expect(await waiting).toMatchObject({ code: 'OVERLOADED' });
    expect(await ctx.leases.queues()).toEqual([]);
    expect(told).toEqual([{ outcome: 'withdrawn', principal: SEO, keys: [KEY], lease_id: null }]);
    const released = await h.call(ALICE, { method: 'DELETE', url: `/v1/leases/${alice.lease_id}`, payload: { token: alice.token } });
    expect(released.status).toBe(200);
    const next = await aliceLease(h);
    expect(next.epochs[KEY]).toBe(alice.epochs[KEY]! + 1);
  });

  it('granted as the caller went, with a token Writ made: released at once, and its epoch is never reused', async () => {
    h = await startHarness({ engine });
    const { ctx, told, callerGone, seoDecision } = await callerGoesAtGrant(h);
    const ghost = await acquireLeases(ctx, SEO, { decisions: [seoDecision], ttl_ms: 30_000 }, { callerGone });
    expect(told).toEqual([{ outcome: 'released', principal: SEO, keys: [KEY], lease_id: ghost.lease_id }]);
    const record = await h.ctx.leases.describe(KEY);
    expect(record?.holderIdentity ?? null).toBeNull();
    expect((await h.ctx.leases.history({ leaseId: ghost.lease_id })).map((e) => e.event)).toEqual(['ACQUIRE', 'RELEASE']);
    // The next holder gets the next epoch, as after any release.
    const next = await aliceLease(h);
    expect(next.epochs[KEY]).toBe(ghost.epochs[KEY]! + 1);
  });

  it('granted as the caller went, with the caller\'s own token: kept, and the caller claims it by asking again with that token', async () => {
    h = await startHarness({ engine });
    const { ctx, told, callerGone, seoDecision } = await callerGoesAtGrant(h);
    const token = newLeaseToken();
    const ghost = await acquireLeases(ctx, SEO, { decisions: [seoDecision], ttl_ms: 30_000, token }, { callerGone });
    expect(told).toEqual([{ outcome: 'kept_for_replay', principal: SEO, keys: [KEY], lease_id: ghost.lease_id }]);
    expect((await h.ctx.leases.describe(KEY))?.holderIdentity).toBe(SEO);
    const claimed = await h.call(SEO, { method: 'POST', url: '/v1/leases', payload: { decisions: [seoDecision], ttl_ms: 30_000, token } });
    expect(claimed.status).toBe(200);
    expect(claimed.body).toMatchObject({ lease_id: ghost.lease_id, replayed: true, epochs: ghost.epochs });
  });

  it('a takeover granted as the caller went, with a token Writ made: released at once and told apart (released_after_preemption, naming the holder it displaced), who stays fenced out and takes the key again at the next epoch', async () => {
    h = await startHarness({ engine, upstream: true });
    const deploy = { action: 'deploy', resource: 'deploy:site:www', fields: [] as string[] };
    const key = 'deploy:site:www';
    const held = await leaseOk(h, 'release-controller', [(await decideOk(h, 'release-controller', deploy)).token]);
    const declared = await h.call('incident-commander', {
      method: 'POST', url: '/v1/incidents',
      payload: { id: 'inc-gone', reason: 'checkout is down', decision: (await decideOk(h, 'incident-commander', { action: 'declare_incident', resource: 'incident:inc-gone', fields: [] })).token },
    });
    expect(declared.status, JSON.stringify(declared.body)).toBe(201);
    const gone = new AbortController();
    const { ctx, told } = observed(h, () => gone.abort());
    const commander = (await decideOk(h, 'incident-commander', deploy)).token;
    const ghost = await acquireLeases(ctx, 'incident-commander', { decisions: [commander], ttl_ms: 30_000, preempt: true }, { callerGone: gone.signal });
    expect(ghost.preempted).toEqual([expect.objectContaining({ lease_id: held.lease_id, holder: 'release-controller', key })]);
    // Before: told as a plain `released`, nothing said of the holder it displaced.
    expect(told).toEqual([{
      outcome: 'released_after_preemption', principal: 'incident-commander', keys: [key], lease_id: ghost.lease_id,
      preempted: [{ lease_id: held.lease_id, holder: 'release-controller', key }],
    }]);
    expect((await h.ctx.leases.describe(key))?.holderIdentity ?? null).toBeNull();
    // Fencing is not weakened: the displaced lease stays ended, and its holder takes the key anew at the next epoch.
    const renew = await h.call('release-controller', { method: 'POST', url: `/v1/leases/${held.lease_id}/renew`, payload: { token: held.token } });
    expect(renew.body.code).toBe('LEASE_PREEMPTED');
    const again = await leaseOk(h, 'release-controller', [(await decideOk(h, 'release-controller', deploy)).token]);
    expect(again.epochs[key]).toBe(ghost.epochs[key]! + 1);
  });
});
