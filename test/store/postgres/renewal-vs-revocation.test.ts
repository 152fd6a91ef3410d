import { afterEach, describe, expect, it } from 'vitest';
import { GOVERNANCE_ID } from '../../../src/graph/model.js';
import { acquireLeases, listLeases, renewLease, revokeEdge } from '../../../src/service/index.js';
import { allowToken, holdTransactionAfter, outcomeOf, settledOrWaitingForLock, twoReplicas, type PostgresReplicas } from '../../support/postgres-replicas.js';
import { replicaBehind } from '../../support/replica-behind.js';

/**
 * A renewal keeps a lease only while the authority it was taken with holds. Replica A's in-memory graph
 * may not have folded in a revocation that replica B committed a moment ago (its notification is on the
 * way, or A's listening connection is down): the renewal's transaction reads the graph events since A's
 * graph from the store, under the graph log's shared lock.
 */
let r: PostgresReplicas | undefined;
afterEach(async () => {
  await r?.close();
  r = undefined;
});


const title = { action: 'update_post', resource: 'wp:post:1024', fields: ['title'] };

describe('a renewal on one replica against a revocation on another', () => {
  it('a revocation of the chain that this replica has not folded in yet ends the lease at its renewal', { timeout: 60_000 }, async () => {
    r = await twoReplicas('writ_renewal_revocation');
    const { a, b } = r;
    const lease = await acquireLeases(a, 'seo-agent-7', { decisions: [await allowToken(a, 'seo-agent-7', title)], ttl_ms: 60_000 });
    const behind = await replicaBehind(a, (await a.graph.current()).revision);
    await revokeEdge(b, GOVERNANCE_ID, 'd-orch-seo', 'compromised');
    const renewed = await outcomeOf(renewLease(behind, 'seo-agent-7', lease.lease_id, lease.token));
    expect(!renewed.ok && renewed.error).toMatchObject({ code: 'AUTHORITY_REVOKED', message: expect.stringMatching(/d-orch-seo/) });
    // The keys were given back with the refusal.
    expect((await listLeases(a, { key: 'wp:post:1024#title' })).leases.map((l) => [l.state, l.holderIdentity])).toEqual([['FREE', null]]);
  });

  it('a revocation while the renewal\'s transaction is open waits for the renewal', { timeout: 60_000 }, async () => {
    r = await twoReplicas('writ_renewal_revocation');
    const { a, b, url } = r;
    const lease = await acquireLeases(a, 'seo-agent-7', { decisions: [await allowToken(a, 'seo-agent-7', title)], ttl_ms: 60_000 });
    const hold = holdTransactionAfter(a.store, 'leaseAuthority', 'get');
    const renewal = outcomeOf(renewLease(a, 'seo-agent-7', lease.lease_id, lease.token));
    await hold.reached;
    const revoke = outcomeOf(revokeEdge(b, GOVERNANCE_ID, 'd-orch-seo', 'compromised'));
    const meanwhile = await settledOrWaitingForLock(revoke, url);
    hold.release();
    const renewed = await renewal;
    expect(meanwhile).toBe('waiting');
    expect(renewed.ok, String(!renewed.ok && renewed.error)).toBe(true);
    expect((await revoke).ok).toBe(true);
  });
});
