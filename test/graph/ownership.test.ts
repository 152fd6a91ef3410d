import { describe, expect, it } from 'vitest';
import { AuthorityGraph, approvalEdges, findOwnershipConflict, resolveOwners } from '../../src/graph/index.js';
import { EventLogBuilder, T0 } from './graph-events.js';

const NOW = T0 + 3_600_000;

function owners(): EventLogBuilder {
  return new EventLogBuilder()
    .principal('governance', 'governance')
    .principal('seo-control-plane', 'control_plane')
    .principal('content-control-plane', 'control_plane')
    .principal('post-1024-owner', 'control_plane')
    .principal('approver', 'human')
    .principal('seo-agent-7')
    .edge('o-seo', 'owns', 'seo-control-plane', 'wp:post:*', { resources: ['wp:post:*'], fields: ['meta_description', 'title'] })
    .edge('o-body', 'owns', 'content-control-plane', 'wp:**', { resources: ['wp:**'], fields: ['*'] })
    .edge('o-1024', 'owns', 'post-1024-owner', 'wp:post:1024', { resources: ['wp:post:1024'], fields: ['title'] });
}

describe('ownership', () => {
  it('resolves each field to the most specific live owner, and a whole-resource request to a "*" owner', () => {
    const g = AuthorityGraph.replay(owners().events);
    expect(resolveOwners(g, 'wp:post:1024', ['title', 'meta_description', 'body'], NOW)).toEqual([
      { field: 'title', owner: 'post-1024-owner', edge_id: 'o-1024' },
      { field: 'meta_description', owner: 'seo-control-plane', edge_id: 'o-seo' },
      { field: 'body', owner: 'content-control-plane', edge_id: 'o-body' },
    ]);
    expect(resolveOwners(g, 'wp:post:7', [], NOW)).toEqual([{ field: '*', owner: 'content-control-plane', edge_id: 'o-body' }]);
    expect(resolveOwners(g, 'site:example.com:robots', ['body'], NOW)).toEqual([{ field: 'body', owner: null, edge_id: null }]);
  });

  it('ignores revoked and expired ownerships and revoked owners', () => {
    const g = AuthorityGraph.replay(owners().revokeEdge('o-1024').revokePrincipal('content-control-plane').events);
    expect(resolveOwners(g, 'wp:post:1024', ['title', 'body'], NOW)).toEqual([
      { field: 'title', owner: 'seo-control-plane', edge_id: 'o-seo' },
      { field: 'body', owner: null, edge_id: null },
    ]);
    const expiring = AuthorityGraph.replay(
      owners().edge('o-tmp', 'owns', 'approver', 'wp:post:5', { resources: ['wp:post:5'], fields: ['body'] }, { expires_at: NOW }).events,
    );
    expect(resolveOwners(expiring, 'wp:post:5', ['body'], NOW - 1)[0]!.owner).toBe('approver');
    expect(resolveOwners(expiring, 'wp:post:5', ['body'], NOW)[0]!.owner).toBe('content-control-plane');
  });

  it('finds a conflict only for the same pattern with overlapping fields, and none once the owner is revoked', () => {
    const g = AuthorityGraph.replay(owners().events);
    expect(findOwnershipConflict(g, { resources: ['wp:post:*'], fields: ['title'] }, NOW)?.id).toBe('o-seo');
    expect(findOwnershipConflict(g, { resources: ['wp:post:*'], fields: ['*'] }, NOW)?.id).toBe('o-seo');
    expect(findOwnershipConflict(g, { resources: ['wp:post:*'], fields: ['body'] }, NOW)).toBeNull();
    expect(findOwnershipConflict(g, { resources: ['wp:post:9'], fields: ['title'] }, NOW)).toBeNull();
    expect(findOwnershipConflict(g, { resources: ['wp:**'], fields: ['body'] }, NOW)?.id).toBe('o-body');
    const revoked = AuthorityGraph.replay(owners().revokeEdge('o-seo').events);
    expect(findOwnershipConflict(revoked, { resources: ['wp:post:*'], fields: ['title'] }, NOW)).toBeNull();
  });

  it('lists live approves edges from the approver to the requester', () => {
    const log = owners()
      .edge('a1', 'approves', 'approver', 'seo-agent-7', { constraints: { risk_max: 3 } })
      .edge('a2', 'approves', 'approver', 'seo-agent-7')
      .edge('a3', 'approves', 'approver', 'seo-control-plane')
      .revokeEdge('a2');
    const g = AuthorityGraph.replay(log.events);
    expect(approvalEdges(g, 'approver', 'seo-agent-7', NOW).map((e) => e.id)).toEqual(['a1']);
    expect(approvalEdges(g, 'seo-agent-7', 'approver', NOW)).toEqual([]);
    const revoked = AuthorityGraph.replay(log.revokePrincipal('approver').events);
    expect(approvalEdges(revoked, 'approver', 'seo-agent-7', NOW)).toEqual([]);
  });
});
