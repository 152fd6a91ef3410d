import { afterEach, describe, expect, it } from 'vitest';
import { GOVERNANCE_ID } from '../../../src/graph/model.js';
import { acquireLeases, createOwnership, listLeases, performAction, renewLease, revokeEdge, revokePrincipal, type WritContext } from '../../../src/service/index.js';
import { allowToken, outcomeOf, twoReplicas, type PostgresReplicas } from '../../support/postgres-replicas.js';
import { replicaBehind } from '../../support/replica-behind.js';

/**
 * DESIGN.md: the owner of the written state is unchanged since the decision at the moment of the write.
 * Replica A's in-memory graph has not folded in an ownership change that replica B committed a moment
 * ago: the gateway's intent and a renewal judge the owners on the graph events read from the store in
 * their own transaction, and refuse OWNER_CHANGED only when the owners of what is written really changed.
 * In the example graph, seo-control-plane owns wp:post:* [title, meta_description, canonical] (o-seo-metadata).
 */
let r: PostgresReplicas | undefined;
afterEach(async () => {
  await r?.close();
  r = undefined;
});

const meta = { action: 'update_post', resource: 'wp:post:1024', fields: ['meta_description'] };
const write = { ...meta, payload: { meta_description: 'late' }, expected_version: 0 };
const title = { action: 'update_post', resource: 'wp:post:1024', fields: ['title'] };

async function upstreamWrites(upstreamUrl: string): Promise<number> {
  return ((await (await fetch(`${upstreamUrl}/writes`)).json()) as { total: number }).total;
}

/** A write on replica A, decided on A, with the graph change made on B after A's graph stopped. */
async function writeAfterChangeOnB(change: (b: WritContext) => Promise<unknown>) {
  r = await twoReplicas('writ_owner_change');
  const { a, b } = r;
  const token = await allowToken(a, 'seo-agent-7', meta);
  const behind = await replicaBehind(a, (await a.graph.current()).revision);
  await change(b);
  return outcomeOf(performAction(behind, 'seo-agent-7', write, { decision: token }));
}

describe('a gateway write on a replica that has not folded in an ownership change made on another', () => {
  it('a more specific owns edge for the written field with another owner refuses the write OWNER_CHANGED, nothing upstream', { timeout: 60_000 }, async () => {
    const w = await writeAfterChangeOnB((b) => createOwnership(b, GOVERNANCE_ID, { id: 'o-1024-meta', owner: 'editor-alice', resource: 'wp:post:1024', fields: ['meta_description'], reason: 'hand-tuned' }));
    expect(!w.ok && w.error).toMatchObject({ code: 'OWNER_CHANGED', message: expect.stringMatching(/editor-alice now, not seo-control-plane/) });
    expect(await upstreamWrites(r!.upstreamUrl)).toBe(0);
  });

  it('the owns edge of the written field revoked on the other replica refuses the write OWNER_CHANGED, nothing upstream', { timeout: 60_000 }, async () => {
    const w = await writeAfterChangeOnB((b) => revokeEdge(b, GOVERNANCE_ID, 'o-seo-metadata', 'handed back'));
    expect(!w.ok && w.error).toMatchObject({ code: 'OWNER_CHANGED', message: expect.stringMatching(/nobody now, not seo-control-plane/) });
    expect(await upstreamWrites(r!.upstreamUrl)).toBe(0);
  });

  it('the owner of the written field revoked on the other replica refuses the write OWNER_CHANGED, nothing upstream', { timeout: 60_000 }, async () => {
    const w = await writeAfterChangeOnB((b) => revokePrincipal(b, GOVERNANCE_ID, 'seo-control-plane', 'retired'));
    expect(!w.ok && w.error).toMatchObject({ code: 'OWNER_CHANGED', message: expect.stringMatching(/nobody now, not seo-control-plane/) });
    expect(await upstreamWrites(r!.upstreamUrl)).toBe(0);
  });

  it('a less specific owns edge, or one for another field, changes no owner of the write: it goes through', { timeout: 60_000 }, async () => {
    const w = await writeAfterChangeOnB(async (b) => {
      await createOwnership(b, GOVERNANCE_ID, { id: 'o-wp-meta', owner: 'editor-alice', resource: 'wp:**', fields: ['meta_description'], reason: 'fallback owner' });
      await createOwnership(b, GOVERNANCE_ID, { id: 'o-1024-body', owner: 'editor-alice', resource: 'wp:post:1024', fields: ['body'], reason: 'hand-written body' });
    });
    expect(w.ok && w.value.receipt.status, String(!w.ok && w.error)).toBe('COMPLETED');
    expect(await upstreamWrites(r!.upstreamUrl)).toBe(1);
  });
});

describe('a renewal on a replica that has not folded in an ownership change made on another', () => {
  it('a more specific owns edge for the leased field with another owner ends the lease at its renewal (OWNER_CHANGED)', { timeout: 60_000 }, async () => {
    r = await twoReplicas('writ_owner_change');
    const { a, b } = r;
    const lease = await acquireLeases(a, 'seo-agent-7', { decisions: [await allowToken(a, 'seo-agent-7', title)], ttl_ms: 60_000 });
    const behind = await replicaBehind(a, (await a.graph.current()).revision);
    await createOwnership(b, GOVERNANCE_ID, { id: 'o-1024-title', owner: 'editor-alice', resource: 'wp:post:1024', fields: ['title'], reason: 'hand-tuned' });
    const renewed = await outcomeOf(renewLease(behind, 'seo-agent-7', lease.lease_id, lease.token));
    expect(!renewed.ok && renewed.error).toMatchObject({ code: 'OWNER_CHANGED', message: expect.stringMatching(/editor-alice now/) });
    expect((await listLeases(a, { key: 'wp:post:1024#title' })).leases.map((l) => [l.state, l.holderIdentity])).toEqual([['FREE', null]]);
  });

  it('a less specific owns edge does not end the lease', { timeout: 60_000 }, async () => {
    r = await twoReplicas('writ_owner_change');
    const { a, b } = r;
    const lease = await acquireLeases(a, 'seo-agent-7', { decisions: [await allowToken(a, 'seo-agent-7', title)], ttl_ms: 60_000 });
    const behind = await replicaBehind(a, (await a.graph.current()).revision);
    await createOwnership(b, GOVERNANCE_ID, { id: 'o-wp-title', owner: 'editor-alice', resource: 'wp:**', fields: ['title'], reason: 'fallback owner' });
    const renewed = await outcomeOf(renewLease(behind, 'seo-agent-7', lease.lease_id, lease.token));
    expect(renewed.ok, String(!renewed.ok && renewed.error)).toBe(true);
  });
});
