import { afterEach, describe, expect, it } from 'vitest';
import { GOVERNANCE_ID } from '../../../src/graph/model.js';
import { acquireLeases, createDelegation, createOwnership, listLeases, performAction, renewLease, revokeEdge, type WritContext } from '../../../src/service/index.js';
import { allowToken, outcomeOf, twoReplicas, type PostgresReplicas } from '../../support/postgres-replicas.js';
import { replicaBehind } from '../../support/replica-behind.js';

/**
 * A decision made on replica B, on a graph change that replica A has not folded in yet (its
 * notification is on the way), and used on A at once: A judges it on a graph at least as new as the
 * decision's, so a write or an acquisition the decision allows is not refused because A's graph is older.
 */
let r: PostgresReplicas | undefined;
afterEach(async () => {
  await r?.close();
  r = undefined;
});

/** Replica A stopped before `change`, made on B; then seo-agent-7's decision for `req`, made on B. */
async function decidedOnBAfter(change: (b: WritContext) => Promise<unknown>, req: { action: string; resource: string; fields: string[] }) {
  r = await twoReplicas('writ_decision_ahead');
  const { a, b } = r;
  const behind = await replicaBehind(a, (await a.graph.current()).revision);
  await change(b);
  const token = await allowToken(b, 'seo-agent-7', req);
  return { behind, token };
}

async function upstreamWrites(upstreamUrl: string): Promise<number> {
  return ((await (await fetch(`${upstreamUrl}/writes`)).json()) as { total: number }).total;
}

const meta = { action: 'update_post', resource: 'wp:post:1024', fields: ['meta_description'] };
const title = { action: 'update_post', resource: 'wp:post:1024', fields: ['title'] };
const newOwner = (b: WritContext) => createOwnership(b, GOVERNANCE_ID, { id: 'o-1024-meta', owner: 'editor-alice', resource: 'wp:post:1024', fields: ['meta_description', 'title'], reason: 'hand-tuned' });
/** seo-agent-7's only chain is now through a delegation A has not heard of. */
const newChain = async (b: WritContext) => {
  await createDelegation(b, GOVERNANCE_ID, { id: 'd-orch-seo-2', from: 'orchestrator', to: 'seo-agent-7', reason: 'a second chain', max_depth: 0,
    scope: { actions: ['update_post'], resources: ['wp:post:1024'], environments: ['production'], fields: ['title', 'meta_description'], risk_max: 1 } });
  await revokeEdge(b, GOVERNANCE_ID, 'd-orch-seo', 'replaced by d-orch-seo-2');
};

describe('a decision made on another replica, on a change this replica has not folded in yet', () => {
  it('a write with the decision, owned by the new owner, goes through', { timeout: 60_000 }, async () => {
    const { behind, token } = await decidedOnBAfter(newOwner, meta);
    const w = await outcomeOf(performAction(behind, 'seo-agent-7', { ...meta, payload: { meta_description: 'x' }, expected_version: 0 }, { decision: token }));
    expect(w.ok && w.value.receipt.status, String(!w.ok && w.error)).toBe('COMPLETED');
    expect(await upstreamWrites(r!.upstreamUrl)).toBe(1);
  });

  it('a write with the decision, through the new chain, goes through', { timeout: 60_000 }, async () => {
    const { behind, token } = await decidedOnBAfter(newChain, meta);
    const w = await outcomeOf(performAction(behind, 'seo-agent-7', { ...meta, payload: { meta_description: 'x' }, expected_version: 0 }, { decision: token }));
    expect(w.ok && w.value.receipt.status, String(!w.ok && w.error)).toBe('COMPLETED');
  });

  it('an acquisition with the decision, owned by the new owner, is granted', { timeout: 60_000 }, async () => {
    const { behind, token } = await decidedOnBAfter(newOwner, title);
    const got = await outcomeOf(acquireLeases(behind, 'seo-agent-7', { decisions: [token], ttl_ms: 60_000 }));
    expect(got.ok, String(!got.ok && got.error)).toBe(true);
  });

  it('a renewal of a lease taken on the other replica with the decision keeps the lease', { timeout: 60_000 }, async () => {
    const { behind, token } = await decidedOnBAfter(newOwner, title);
    const lease = await acquireLeases(r!.b, 'seo-agent-7', { decisions: [token], ttl_ms: 60_000 });
    const renewed = await outcomeOf(renewLease(behind, 'seo-agent-7', lease.lease_id, lease.token));
    expect(renewed.ok, String(!renewed.ok && renewed.error)).toBe(true);
    expect((await listLeases(r!.a, { key: 'wp:post:1024#title' })).leases.map((l) => [l.state, l.leaseId])).toEqual([['HELD', lease.lease_id]]);
  });

  it('a renewal of a lease taken on the other replica through the new chain keeps the lease', { timeout: 60_000 }, async () => {
    const { behind, token } = await decidedOnBAfter(newChain, title);
    const lease = await acquireLeases(r!.b, 'seo-agent-7', { decisions: [token], ttl_ms: 60_000 });
    const renewed = await outcomeOf(renewLease(behind, 'seo-agent-7', lease.lease_id, lease.token));
    expect(renewed.ok, String(!renewed.ok && renewed.error)).toBe(true);
  });
});
