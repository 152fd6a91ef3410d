import { describe, expect, it } from 'vitest';
import { AuthorityGraph, resolveChainsTo } from '../../src/graph/index.js';
import type { RecordedGraphEvent } from '../../src/graph/model.js';
import { EventLogBuilder, T0 } from './graph-events.js';

function graph(): AuthorityGraph {
  const log = new EventLogBuilder()
    .principal('governance', 'governance')
    .principal('lead', 'human')
    .principal('agent')
    .edge('g-lead', 'grant', 'governance', 'lead', { resources: ['wp:post:*'] })
    .edge('d-agent', 'delegate', 'lead', 'agent', { resources: ['wp:post:*'] })
    .edge('o-posts', 'owns', 'lead', 'wp:post:*');
  return AuthorityGraph.replay(log.events);
}

const chainsOf = (g: AuthorityGraph, p: string) => resolveChainsTo(g, p, T0 + 3_600_000, { mode: 'decide' }).map((c) => c.edges.map((e) => e.id).join('>'));

describe('a fork of the authority graph (what-if analysis)', () => {
  it('changes to the fork leave the original untouched; undo brings the fork back to the original', () => {
    const live = graph();
    const fork = live.fork();
    expect(fork.revision).toBe(live.revision);
    expect(fork.principalCount).toBe(live.principalCount);
    expect(fork.edgeCount).toBe(live.edgeCount);
    expect(fork.ownsCandidates('wp').map((e) => e.id)).toEqual(['o-posts']);

    const at = T0 + 120 * 60_000;
    const revoke: RecordedGraphEvent = { revision: live.revision + 1, at, actor: 'governance', event: { type: 'edge.revoked', id: 'g-lead', at, reason: 'what if' } };
    fork.apply(revoke);
    expect(chainsOf(fork, 'agent')).toEqual([]);
    expect(chainsOf(live, 'agent')).toEqual(['g-lead>d-agent']);
    expect(live.edge('g-lead')!.revoked_at).toBeNull();
    fork.undo(revoke);
    expect(fork.revision).toBe(live.revision);
    expect(chainsOf(fork, 'agent')).toEqual(['g-lead>d-agent']);

    const revokeLead: RecordedGraphEvent = { revision: live.revision + 1, at, actor: 'governance', event: { type: 'principal.revoked', id: 'lead', at, reason: 'what if' } };
    fork.apply(revokeLead);
    expect(fork.principal('lead')!.revoked_at).toBe(at);
    expect(live.principal('lead')!.revoked_at).toBeNull();
    fork.undo(revokeLead);
    expect(fork.principal('lead')!.revoked_at).toBeNull();

    const add: RecordedGraphEvent = {
      revision: live.revision + 1, at, actor: 'lead',
      event: { type: 'edge.created', edge: { ...live.edge('d-agent')!, id: 'd-more', revision: undefined } as never },
    };
    fork.apply(add);
    expect(fork.edge('d-more')).toBeDefined();
    expect(live.edge('d-more')).toBeUndefined();
    fork.undo(add);
    expect(fork.edge('d-more')).toBeUndefined();
    expect(fork.edgeCount).toBe(live.edgeCount);
  });

  it('only the last event can be undone', () => {
    const fork = graph().fork();
    const at = T0 + 120 * 60_000;
    const rec: RecordedGraphEvent = { revision: fork.revision + 1, at, actor: 'governance', event: { type: 'edge.revoked', id: 'd-agent', at, reason: 'x' } };
    expect(() => fork.undo(rec)).toThrow(/only the last event/);
  });
});
