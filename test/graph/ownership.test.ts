import { describe, expect, it } from 'vitest';
import { AuthorityGraph, approvalEdges, findOwnershipConflict, ownershipAfter, resolveOwners } from '../../src/graph/index.js';
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
  it('ownershipAfter answers as the graph replayed to the end, however many of the events the graph has folded in; null when none touches ownership', () => {
    const base = owners().events.length;
    const log = owners()
      .principal('late-owner', 'control_plane')
      .edge('d-x', 'delegate', 'approver', 'seo-agent-7', { resources: ['wp:post:*'] })
      .edge('o-late', 'owns', 'late-owner', 'wp:post:1024', { resources: ['wp:post:1024'], fields: ['meta_description'] })
      .revokeEdge('o-1024')
      .revokePrincipal('content-control-plane')
      .edge('o-wide', 'owns', 'approver', 'wp:**', { resources: ['wp:**'], fields: ['title'] })
      .revokeEdge('o-late');
    const fields = ['title', 'meta_description', 'body'];
    const expected = [
      { field: 'title', owner: 'seo-control-plane', edge_id: 'o-seo' },
      { field: 'meta_description', owner: 'seo-control-plane', edge_id: 'o-seo' },
      { field: 'body', owner: null, edge_id: null },
    ];
    expect(resolveOwners(AuthorityGraph.replay(log.events), 'wp:post:1024', fields, NOW)).toEqual(expected);
    for (let folded = base; folded <= log.events.length; folded++) {
      const g = AuthorityGraph.replay(log.events, { upTo: folded });
      // Read from the graph's revision on, or from before it (events the graph has count once).
      for (const from of [folded, base]) {
        const view = ownershipAfter(g, log.events.slice(from));
        expect(resolveOwners(view ?? g, 'wp:post:1024', fields, NOW), `graph at ${folded}, events from ${from}`).toEqual(expected);
      }
    }
    // Before o-late is revoked, it owns meta_description.
    const upToLate = log.events.slice(0, base + 3);
    expect(resolveOwners(ownershipAfter(AuthorityGraph.replay(upToLate, { upTo: base }), upToLate.slice(base))!, 'wp:post:1024', ['meta_description'], NOW))
      .toEqual([{ field: 'meta_description', owner: 'late-owner', edge_id: 'o-late' }]);
    // A principal created, a delegation, a principal that owns nothing revoked: nothing to judge again.
    const quiet = owners().principal('late', 'agent').edge('d-x', 'delegate', 'approver', 'seo-agent-7', { resources: ['wp:post:*'] }).revokePrincipal('seo-agent-7').revokeEdge('d-x');
    expect(ownershipAfter(AuthorityGraph.replay(quiet.events, { upTo: base }), quiet.events.slice(base))).toBeNull();
  });

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
