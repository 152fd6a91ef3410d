import { afterEach, describe, expect, it } from 'vitest';
import { GOVERNANCE_ID } from '../../../src/graph/model.js';
import { acquireLeases, createOwnership, declareIncident, listLeases, renewLease, resolveIncident, revokeEdge, type WritContext } from '../../../src/service/index.js';
import { allowToken, holdTransactionAfter, outcomeOf, settledOrWaitingForLock, twoReplicas, type PostgresReplicas } from '../../support/postgres-replicas.js';

/**
 * A takeover (preemption during an incident) on replica A races a change on replica B that would have
 * refused it: A's transaction is held open after it checked, B's change is made meanwhile. On READ
 * COMMITTED a plain SELECT would let B's change commit before A's takeover, so that the takeover lands
 * after the incident ended (or the preempts edge went); what A checked must hold until A commits.
 */
const KEY = 'deploy:site:www';
const deploy = { action: 'deploy', resource: KEY, fields: [] as string[] };

let r: PostgresReplicas | undefined;
afterEach(async () => {
  await r?.close();
  r = undefined;
});

/** release-controller holds the deploy key; incident-commander has declared a production incident. */
async function heldDuringIncident(ctx: WritContext) {
  const held = await acquireLeases(ctx, 'release-controller', { decisions: [await allowToken(ctx, 'release-controller', deploy)], ttl_ms: 60_000 });
  const declaring = await allowToken(ctx, 'incident-commander', { action: 'declare_incident', resource: 'incident:checkout-down', fields: [] });
  await declareIncident(ctx, 'incident-commander', { id: 'checkout-down', reason: 'checkout is down', decision: declaring });
  return held;
}

const takeOver = async (ctx: WritContext) =>
  acquireLeases(ctx, 'incident-commander', { decisions: [await allowToken(ctx, 'incident-commander', deploy)], ttl_ms: 5_000, preempt: true });

describe('a takeover on one replica against an incident resolved on another', () => {
  it('the resolve waits for the takeover that counted the incident, so no takeover commits after the incident ended', { timeout: 60_000 }, async () => {
    r = await twoReplicas('writ_takeover_incident');
    const { a, b, url } = r;
    const held = await heldDuringIncident(a);
    const hold = holdTransactionAfter(a.store, 'incidents', 'active');
    const takeover = outcomeOf(takeOver(a));
    await hold.reached;
    // The takeover has counted the incident in its transaction, and not committed.
    const resolve = outcomeOf(resolveIncident(b, 'incident-commander', 'checkout-down'));
    const meanwhile = await settledOrWaitingForLock(resolve, url);
    hold.release();
    const taken = await takeover;
    const resolved = await resolve;
    expect(meanwhile).toBe('waiting');
    expect(taken.ok, String(!taken.ok && taken.error)).toBe(true);
    expect(taken.ok && taken.value.preempted).toEqual([{ lease_id: held.lease_id, holder: 'release-controller', key: KEY, epoch: held.epochs[KEY] }]);
    expect(resolved.ok && resolved.value.resolved_at).toEqual(expect.any(Number));
  });

  it('a takeover that reads the incidents while a resolve is in flight waits for it, and then preempts nothing', { timeout: 60_000 }, async () => {
    r = await twoReplicas('writ_takeover_incident');
    const { a, b, url } = r;
    const held = await heldDuringIncident(a);
    const hold = holdTransactionAfter(b.store, 'incidents', 'resolve');
    const resolve = outcomeOf(resolveIncident(b, 'incident-commander', 'checkout-down'));
    await hold.reached;
    // The resolve has updated the incident, and not committed.
    const takeover = outcomeOf(takeOver(a));
    const meanwhile = await settledOrWaitingForLock(takeover, url);
    hold.release();
    expect((await resolve).ok).toBe(true);
    const taken = await takeover;
    expect(meanwhile).toBe('waiting');
    expect(!taken.ok && taken.error).toMatchObject({ code: 'NO_INCIDENT', details: { environments: ['production'] } });
    // The holder keeps its lease, at its epoch.
    expect((await renewLease(a, 'release-controller', held.lease_id, held.token)).epochs).toEqual(held.epochs);
  });
});

describe('a takeover on one replica against its preempts edge revoked on another', () => {
  it('a revocation after the takeover\'s transaction read the graph waits for the takeover, which goes through', { timeout: 60_000 }, async () => {
    r = await twoReplicas('writ_takeover_preempts');
    const { a, b, url } = r;
    const held = await heldDuringIncident(a);
    const hold = holdTransactionAfter(a.store, 'incidents', 'active');
    const takeover = outcomeOf(takeOver(a));
    await hold.reached;
    const revoke = outcomeOf(revokeEdge(b, GOVERNANCE_ID, 'p-incident-release', 'no more takeovers of releases'));
    const meanwhile = await settledOrWaitingForLock(revoke, url);
    hold.release();
    const taken = await takeover;
    const revoked = await revoke;
    expect(meanwhile).toBe('waiting');
    expect(taken.ok, String(!taken.ok && taken.error)).toBe(true);
    expect(taken.ok && taken.value.preempted).toEqual([{ lease_id: held.lease_id, holder: 'release-controller', key: KEY, epoch: held.epochs[KEY] }]);
    expect(revoked.ok && revoked.value.revoked).toBe(true);
  });

  it('a revocation committed after the preemption was checked, before the takeover, refuses the takeover and changes nothing', { timeout: 60_000 }, async () => {
    r = await twoReplicas('writ_takeover_preempts');
    const { a, b } = r;
    const held = await heldDuringIncident(a);
    // The check has been made on A's graph; B revokes the edge before A's takeover transaction begins.
    const acquire = a.leases.acquire.bind(a.leases);
    a.leases.acquire = async (req) => {
      await revokeEdge(b, GOVERNANCE_ID, 'p-incident-release', 'no more takeovers of releases');
      return acquire(req);
    };
    const taken = await outcomeOf(takeOver(a));
    expect(!taken.ok && taken.error).toMatchObject({ code: 'FORBIDDEN', message: expect.stringMatching(/p-incident-release.*revoked/) });
    // The holder keeps its lease, at its epoch.
    expect((await renewLease(a, 'release-controller', held.lease_id, held.token)).epochs).toEqual(held.epochs);
  });
});

describe('a takeover on one replica against the chain or the owners of the decision it presents, changed on another', () => {
  /** The takeover on A, with `change` committed on B after A checked the decision and the preemption, before A's takeover. */
  async function takeOverAfter(change: (b: WritContext) => Promise<unknown>) {
    r = await twoReplicas('writ_takeover_chain');
    const { a, b } = r;
    const held = await heldDuringIncident(a);
    const acquire = a.leases.acquire.bind(a.leases);
    a.leases.acquire = async (req) => {
      await change(b);
      return acquire(req);
    };
    return { held, taken: await outcomeOf(takeOver(a)) };
  }

  it('a revocation of the decision\'s chain committed before the takeover refuses it AUTHORITY_REVOKED and changes nothing', { timeout: 60_000 }, async () => {
    const { held, taken } = await takeOverAfter((b) => revokeEdge(b, GOVERNANCE_ID, 'g-incident-commander', 'rotated off call'));
    expect(!taken.ok && taken.error).toMatchObject({ code: 'AUTHORITY_REVOKED', message: expect.stringMatching(/g-incident-commander/) });
    expect((await renewLease(r!.a, 'release-controller', held.lease_id, held.token)).epochs).toEqual(held.epochs);
  });

  it('a more specific owns edge for the key\'s state committed before the takeover refuses it OWNER_CHANGED and changes nothing', { timeout: 60_000 }, async () => {
    const { held, taken } = await takeOverAfter((b) => createOwnership(b, GOVERNANCE_ID, { id: 'o-www', owner: 'incident-commander', resource: KEY, reason: 'www is frozen' }));
    expect(!taken.ok && taken.error).toMatchObject({ code: 'OWNER_CHANGED', message: expect.stringMatching(/incident-commander now, not release-controller/) });
    // The holder keeps its lease (until its own renewal, which the new owner ends too).
    expect((await listLeases(r!.a, { key: KEY })).leases.map((l) => [l.state, l.holderIdentity, l.leaseId])).toEqual([['HELD', 'release-controller', held.lease_id]]);
  });
});
