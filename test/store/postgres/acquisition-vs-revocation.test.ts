import { afterEach, describe, expect, it } from 'vitest';
import { GOVERNANCE_ID } from '../../../src/graph/model.js';
import { acquireLeases, createOwnership, listLeases, revokeEdge, type WritContext } from '../../../src/service/index.js';
import { allowToken, holdTransactionAfter, outcomeOf, settledOrWaitingForLock, twoReplicas, type PostgresReplicas } from '../../support/postgres-replicas.js';
import { replicaBehind } from '../../support/replica-behind.js';

/**
 * An acquisition (no takeover) never lands on authority revoked, or owners changed, before its commit,
 * whichever replica changed them. Replica A's in-memory graph may not have folded in a change that
 * replica B committed a moment ago: the acquisition's transaction reads the graph events since A's
 * checks from the store, under the graph log's shared lock, as a renewal and a takeover do.
 */
let r: PostgresReplicas | undefined;
afterEach(async () => {
  await r?.close();
  r = undefined;
});

const title = { action: 'update_post', resource: 'wp:post:1024', fields: ['title'] };
const KEY = 'wp:post:1024#title';

/** seo-agent-7's acquisition on replica A, decided on A, with `change` made on B after A's graph stopped. */
async function acquireAfterChangeOnB(change: (b: WritContext) => Promise<unknown>) {
  r = await twoReplicas('writ_acquisition_revocation');
  const { a, b } = r;
  const token = await allowToken(a, 'seo-agent-7', title);
  const behind = await replicaBehind(a, (await a.graph.current()).revision);
  await change(b);
  return outcomeOf(acquireLeases(behind, 'seo-agent-7', { decisions: [token], ttl_ms: 60_000 }));
}

describe('an acquisition on one replica against a change committed on another', () => {
  it('a revocation of the chain that this replica has not folded in yet refuses the acquisition AUTHORITY_REVOKED, nothing held', { timeout: 60_000 }, async () => {
    const got = await acquireAfterChangeOnB((b) => revokeEdge(b, GOVERNANCE_ID, 'd-orch-seo', 'compromised'));
    expect(!got.ok && got.error).toMatchObject({ code: 'AUTHORITY_REVOKED', message: expect.stringMatching(/d-orch-seo/) });
    expect((await listLeases(r!.a, { key: KEY })).leases.filter((l) => l.state === 'HELD')).toEqual([]);
  });

  it('a more specific owns edge that this replica has not folded in yet refuses the acquisition OWNER_CHANGED, nothing held', { timeout: 60_000 }, async () => {
    const got = await acquireAfterChangeOnB((b) => createOwnership(b, GOVERNANCE_ID, { id: 'o-1024-title', owner: 'editor-alice', resource: 'wp:post:1024', fields: ['title'], reason: 'hand-tuned' }));
    expect(!got.ok && got.error).toMatchObject({ code: 'OWNER_CHANGED', message: expect.stringMatching(/editor-alice now/) });
    expect((await listLeases(r!.a, { key: KEY })).leases.filter((l) => l.state === 'HELD')).toEqual([]);
  });

  it('a less specific owns edge does not refuse it', { timeout: 60_000 }, async () => {
    const got = await acquireAfterChangeOnB((b) => createOwnership(b, GOVERNANCE_ID, { id: 'o-wp-title', owner: 'editor-alice', resource: 'wp:**', fields: ['title'], reason: 'fallback owner' }));
    expect(got.ok, String(!got.ok && got.error)).toBe(true);
  });

  it('a revocation while the acquisition\'s transaction is open waits for its commit', { timeout: 60_000 }, async () => {
    r = await twoReplicas('writ_acquisition_revocation');
    const { a, b, url } = r;
    const token = await allowToken(a, 'seo-agent-7', title);
    const hold = holdTransactionAfter(a.store, 'leases', 'acquire');
    const acquisition = outcomeOf(acquireLeases(a, 'seo-agent-7', { decisions: [token], ttl_ms: 60_000 }));
    await hold.reached;
    const revoke = outcomeOf(revokeEdge(b, GOVERNANCE_ID, 'd-orch-seo', 'compromised'));
    const meanwhile = await settledOrWaitingForLock(revoke, url);
    hold.release();
    const got = await acquisition;
    expect(meanwhile).toBe('waiting');
    expect(got.ok, String(!got.ok && got.error)).toBe(true);
    expect((await revoke).ok).toBe(true);
  });
});
