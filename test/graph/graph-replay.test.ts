import { describe, expect, it } from 'vitest';
import { AuthorityGraph, managedStateNodeId } from '../../src/graph/index.js';
import { WritError } from '../../src/errors.js';
import { EventLogBuilder, T0 } from './graph-events.js';

function basic(): EventLogBuilder {
  return new EventLogBuilder()
    .principal('governance', 'governance')
    .principal('orchestrator', 'service')
    .principal('seo-agent-7')
    .edge('g1', 'grant', 'governance', 'orchestrator')
    .edge('d1', 'delegate', 'orchestrator', 'seo-agent-7', { fields: ['title'] });
}

function codeOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (e) {
    return e instanceof WritError ? e.code : 'not a WritError';
  }
  return undefined;
}

describe('authority graph replay', () => {
  it('folds events into principals and edges and tracks the revision', () => {
    const log = basic();
    const g = AuthorityGraph.replay(log.events);
    expect(g.revision).toBe(5);
    expect(g.principals().map((p) => p.id).sort()).toEqual(['governance', 'orchestrator', 'seo-agent-7']);
    expect(g.edge('d1')).toMatchObject({ from: 'orchestrator', to: 'seo-agent-7', revision: 5, revoked_at: null });
    expect(g.incoming('seo-agent-7').map((e) => e.id)).toEqual(['d1']);
    expect(g.outgoing('governance', ['grant']).map((e) => e.id)).toEqual(['g1']);
    expect(g.outgoing('governance', ['delegate'])).toEqual([]);
  });

  it('rejects an event that skips a revision or repeats one, and stays where it was', () => {
    const log = basic();
    const g = AuthorityGraph.replay(log.events.slice(0, 3));
    expect(codeOf(() => g.apply(log.events[4]!))).toBe('INTERNAL');
    expect(codeOf(() => g.apply(log.events[2]!))).toBe('INTERNAL');
    expect(g.revision).toBe(3);
    g.apply(log.events[3]!);
    expect(g.revision).toBe(4);
  });

  it('refuses edges to unknown principals and duplicate ids without advancing', () => {
    const g = AuthorityGraph.replay(basic().events);
    const next = (event: Parameters<EventLogBuilder['add']>[0]) => ({ revision: g.revision + 1, at: T0, actor: 'x', event });
    const dup = new EventLogBuilder().edge('g1', 'grant', 'governance', 'orchestrator').events[0]!.event;
    expect(codeOf(() => g.apply(next(dup)))).toBe('ALREADY_EXISTS');
    const unknown = new EventLogBuilder().edge('x1', 'delegate', 'orchestrator', 'ghost').events[0]!.event;
    expect(codeOf(() => g.apply(next(unknown)))).toBe('UNKNOWN_PRINCIPAL');
    expect(codeOf(() => g.apply(next({ type: 'edge.revoked', id: 'nope', at: T0, reason: '' })))).toBe('UNKNOWN_EDGE');
    expect(g.revision).toBe(5);
    expect(g.edge('x1')).toBeUndefined();
  });

  it('records revocations of edges and principals at the event time, once', () => {
    const log = basic().revokeEdge('d1', T0 + 1000).revokeEdge('d1', T0 + 2000).revokePrincipal('seo-agent-7', T0 + 3000);
    const g = AuthorityGraph.replay(log.events);
    expect(g.edge('d1')!.revoked_at).toBe(T0 + 1000);
    expect(g.principal('seo-agent-7')!.revoked_at).toBe(T0 + 3000);
  });

  it('points owns edges at a managed-state node and preempts edges at a priority class', () => {
    const log = basic()
      .principal('seo-control-plane', 'control_plane')
      .principal('incident-commander', 'human')
      .edge('o1', 'owns', 'seo-control-plane', 'wp:post:*', { resources: ['wp:post:*'], fields: ['meta_description'] })
      .edge('p1', 'preempts', 'incident-commander', 'class:release');
    const g = AuthorityGraph.replay(log.events);
    expect(g.incoming(managedStateNodeId('wp:post:*')).map((e) => e.id)).toEqual(['o1']);
    expect(g.incoming('class:release').map((e) => e.id)).toEqual(['p1']);
    expect(g.principal('class:release')).toBeUndefined();
    expect(g.principals()).toHaveLength(5);
  });

  it('shares identical scopes between edges and freezes them', () => {
    const log = basic().edge('d2', 'delegate', 'orchestrator', 'seo-agent-7', { fields: ['title'] });
    const g = AuthorityGraph.replay(log.events);
    expect(g.edge('d2')!.scope).toBe(g.edge('d1')!.scope);
    expect(Object.isFrozen(g.edge('d1')!.scope.fields)).toBe(true);
  });

  it('replays up to a revision', () => {
    const log = basic().revokeEdge('d1');
    expect(AuthorityGraph.replay(log.events, { upTo: 5 }).edge('d1')!.revoked_at).toBeNull();
    expect(AuthorityGraph.replay(log.events).edge('d1')!.revoked_at).not.toBeNull();
  });
});
