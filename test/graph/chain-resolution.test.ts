import { describe, expect, it } from 'vitest';
import { AuthorityGraph, principalsOf, resolveChains, resolveChainsTo } from '../../src/graph/index.js';
import { WritError } from '../../src/errors.js';
import type { CandidateChain } from '../../src/policy/types.js';
import { EventLogBuilder, REQUEST, T0 } from './graph-events.js';

const NOW = T0 + 3_600_000;
const ids = (chains: CandidateChain[]) => chains.map((c) => c.edges.map((e) => e.id).join('>'));

/** governance → orchestrator → lead → seo-agent-7, and a second, independent chain via editor. */
function twoChains(): EventLogBuilder {
  return new EventLogBuilder()
    .principal('governance', 'governance')
    .principal('orchestrator', 'service')
    .principal('lead')
    .principal('editor', 'human')
    .principal('seo-agent-7')
    .edge('g1', 'grant', 'governance', 'orchestrator', { fields: ['title', 'meta_description'] })
    .edge('d1', 'delegate', 'orchestrator', 'lead', { fields: ['title'] })
    .edge('d2', 'delegate', 'lead', 'seo-agent-7', { fields: ['title'] })
    .edge('g2', 'grant', 'governance', 'editor')
    .edge('d3', 'delegate', 'editor', 'seo-agent-7');
}

describe('chain resolution', () => {
  it('finds multi-hop chains from governance to the requester, shorter first', () => {
    const g = AuthorityGraph.replay(twoChains().events);
    const chains = resolveChains(g, REQUEST, NOW, { mode: 'decide' });
    expect(ids(chains)).toEqual(['g2>d3', 'g1>d1>d2']);
    expect(chains[1]!.edges[0]!.from).toBe('governance');
    expect(chains[1]!.edges.at(-1)!.to).toBe('seo-agent-7');
    expect(chains[1]!.edges[0]).not.toHaveProperty('revision');
  });

  it('decide mode drops a chain through a revoked middle edge; explain mode keeps it, after the live one', () => {
    const g = AuthorityGraph.replay(twoChains().revokeEdge('d1').events);
    expect(ids(resolveChains(g, REQUEST, NOW, { mode: 'decide' }))).toEqual(['g2>d3']);
    const explained = resolveChains(g, REQUEST, NOW, { mode: 'explain' });
    expect(ids(explained)).toEqual(['g2>d3', 'g1>d1>d2']);
    expect(explained[1]!.edges[1]!.revoked_at).not.toBeNull();
  });

  it('explain mode puts a live longer chain before a revoked shorter one', () => {
    const g = AuthorityGraph.replay(twoChains().revokeEdge('d3').events);
    expect(ids(resolveChains(g, REQUEST, NOW, { mode: 'explain' }))).toEqual(['g1>d1>d2', 'g2>d3']);
  });

  it('decide mode prunes edges that do not cover the request, expired ones and revoked principals', () => {
    const log = twoChains();
    const g = AuthorityGraph.replay(log.events);
    expect(ids(resolveChains(g, { ...REQUEST, fields: ['body'] }, NOW, { mode: 'decide' }))).toEqual(['g2>d3']);
    expect(ids(resolveChains(g, { ...REQUEST, fields: [] }, NOW, { mode: 'decide' }))).toEqual(['g2>d3']);
    expect(ids(resolveChains(g, { ...REQUEST, action: 'delete_post' }, NOW, { mode: 'decide' }))).toEqual([]);
    expect(ids(resolveChains(g, { ...REQUEST, environment: 'staging' }, NOW, { mode: 'decide' }))).toEqual([]);
    expect(ids(resolveChains(g, { ...REQUEST, resource: 'wp:page:1' }, NOW, { mode: 'decide' }))).toEqual([]);
    // too narrow chains still come back in explain mode, for the policy to say why
    expect(ids(resolveChains(g, { ...REQUEST, fields: ['body'] }, NOW, { mode: 'explain' }))).toEqual(['g2>d3', 'g1>d1>d2']);

    const expiring = new EventLogBuilder()
      .principal('governance', 'governance')
      .principal('seo-agent-7')
      .edge('g1', 'grant', 'governance', 'seo-agent-7', {}, { not_before: NOW, expires_at: NOW + 1000 });
    const eg = AuthorityGraph.replay(expiring.events);
    expect(ids(resolveChains(eg, REQUEST, NOW - 1, { mode: 'decide' }))).toEqual([]);
    expect(ids(resolveChains(eg, REQUEST, NOW, { mode: 'decide' }))).toEqual(['g1']);
    expect(ids(resolveChains(eg, REQUEST, NOW + 999, { mode: 'decide' }))).toEqual(['g1']);
    expect(ids(resolveChains(eg, REQUEST, NOW + 1000, { mode: 'decide' }))).toEqual([]);

    const revoked = AuthorityGraph.replay(twoChains().revokePrincipal('lead').events);
    expect(ids(resolveChains(revoked, REQUEST, NOW, { mode: 'decide' }))).toEqual(['g2>d3']);
    expect(ids(resolveChains(revoked, REQUEST, NOW, { mode: 'explain' }))).toEqual(['g2>d3', 'g1>d1>d2']);
  });

  it('does not loop on cycles and uses each principal at most once per chain', () => {
    const log = new EventLogBuilder()
      .principal('governance', 'governance')
      .principal('a')
      .principal('b')
      .principal('c')
      .edge('g1', 'grant', 'governance', 'a')
      .edge('ab', 'delegate', 'a', 'b')
      .edge('ba', 'delegate', 'b', 'a')
      .edge('bc', 'delegate', 'b', 'c')
      .edge('cb', 'delegate', 'c', 'b')
      .edge('cc', 'delegate', 'c', 'c');
    const g = AuthorityGraph.replay(log.events);
    const chains = resolveChains(g, { ...REQUEST, principal: 'c' }, NOW, { mode: 'explain' });
    expect(ids(chains)).toEqual(['g1>ab>bc']);
  });

  it('stops at maxDepth: longer paths are not chains', () => {
    const log = new EventLogBuilder().principal('governance', 'governance');
    for (let i = 0; i < 8; i++) log.principal(`p${i}`);
    log.edge('e0', 'grant', 'governance', 'p0');
    for (let i = 1; i < 8; i++) log.edge(`e${i}`, 'delegate', `p${i - 1}`, `p${i}`);
    const g = AuthorityGraph.replay(log.events);
    expect(resolveChains(g, { ...REQUEST, principal: 'p5' }, NOW, { mode: 'decide' })[0]!.edges).toHaveLength(6);
    expect(resolveChains(g, { ...REQUEST, principal: 'p6' }, NOW, { mode: 'decide' })).toEqual([]);
    expect(resolveChains(g, { ...REQUEST, principal: 'p6' }, NOW, { mode: 'decide', budget: { maxDepth: 7 } })).toHaveLength(1);
  });

  it('returns at most maxChains, the shortest ones, in a deterministic order', () => {
    const log = new EventLogBuilder().principal('governance', 'governance').principal('agent');
    for (let i = 0; i < 5; i++) log.principal(`m${i}`).edge(`g${i}`, 'grant', 'governance', `m${i}`).edge(`d${4 - i}`, 'delegate', `m${i}`, 'agent');
    log.edge('direct', 'grant', 'governance', 'agent');
    const g = AuthorityGraph.replay(log.events);
    const chains = resolveChains(g, { ...REQUEST, principal: 'agent' }, NOW, { mode: 'decide', budget: { maxChains: 3 } });
    expect(ids(chains)).toEqual(['direct', 'g0>d4', 'g1>d3']);
  });

  it('says whether every chain was returned: not when maxChains stopped the search or cut the chains found, nor when the budget ran out', () => {
    const log = new EventLogBuilder().principal('governance', 'governance').principal('agent');
    for (let i = 0; i < 5; i++) log.principal(`m${i}`).edge(`g${i}`, 'grant', 'governance', `m${i}`).edge(`d${i}`, 'delegate', `m${i}`, 'agent');
    const g = AuthorityGraph.replay(log.events);
    const stats = { visited: 0, truncated: false, complete: false };
    const run = (maxChains: number) => resolveChainsTo(g, 'agent', NOW, { mode: 'explain', budget: { maxChains }, stats }).length;
    expect([run(16), stats.complete]).toEqual([5, true]);
    expect([run(5), stats.complete]).toEqual([5, true]);
    expect([run(3), stats.complete]).toEqual([3, false]);
    const two = AuthorityGraph.replay(twoChains().events);
    expect(resolveChains(two, REQUEST, NOW, { mode: 'decide', budget: { maxChains: 1 }, stats })).toHaveLength(1);
    expect(stats.complete).toBe(false); // stopped after g2>d3: the longer g1>d1>d2 was never looked for
  });

  it('resolveChainsTo with `gives` prunes, in decide mode, every edge whose scope cannot give it', () => {
    const g = AuthorityGraph.replay(twoChains().events);
    expect(ids(resolveChainsTo(g, 'seo-agent-7', NOW, { mode: 'decide' }, (s) => s.fields.includes('*') || s.fields.includes('body')))).toEqual(['g2>d3']);
    expect(ids(resolveChainsTo(g, 'seo-agent-7', NOW, { mode: 'decide' }, () => true))).toEqual(['g2>d3', 'g1>d1>d2']);
  });

  it('a synthetic wide graph is searched up to maxVisited: no chain within it, BUDGET_EXCEEDED past it', () => {
    const log = new EventLogBuilder().principal('governance', 'governance').principal('target');
    // 100 delegators of the target, each with 100 delegators of its own, none reachable from governance
    for (let i = 0; i < 100; i++) log.principal(`m${i}`).edge(`m${i}>t`, 'delegate', `m${i}`, 'target');
    for (let j = 0; j < 100; j++) {
      log.principal(`u${j}`);
      for (let i = 0; i < 100; i++) log.edge(`u${j}>m${i}`, 'delegate', `u${j}`, `m${i}`);
    }
    const g = AuthorityGraph.replay(log.events);
    const fail = (budget: object) => {
      try {
        resolveChains(g, { ...REQUEST, principal: 'target' }, NOW, { mode: 'decide', budget });
      } catch (e) {
        return e as WritError;
      }
      throw new Error('no budget error');
    };
    const stats = { visited: 0, truncated: false, complete: false };
    expect(resolveChains(g, { ...REQUEST, principal: 'target' }, NOW, { mode: 'decide', stats })).toEqual([]);
    expect(stats).toEqual({ visited: 100 + 100 * 100, truncated: false, complete: true });
    const visits = fail({ maxVisited: 5000 });
    expect(visits).toBeInstanceOf(WritError);
    expect(visits.code).toBe('BUDGET_EXCEEDED');
    expect(visits.details).toMatchObject({ limit: 'maxVisited', visited: 5000 });
  });

  it('skips, in decide mode, an edge whose risk_max is below the request\'s risk, so that 17 such chains cannot push out a valid one', () => {
    const log = new EventLogBuilder().principal('governance', 'governance').principal('alice').principal('orchestrator').principal('target');
    // alice's grant id sorts first: her chains came first among equally long ones, and 16 filled maxChains.
    log.edge('g-alice', 'grant', 'governance', 'alice', {}, { max_depth: 1 });
    for (let i = 0; i < 17; i++) log.edge(`low-${String(i).padStart(2, '0')}`, 'delegate', 'alice', 'target', { constraints: { risk_max: 0 } });
    log.edge('g-orchestrator', 'grant', 'governance', 'orchestrator', {}, { max_depth: 1 }).edge('own', 'delegate', 'orchestrator', 'target', { constraints: { risk_max: 1 } });
    const g = AuthorityGraph.replay(log.events);
    const at = (risk: number, mode: 'decide' | 'explain' = 'decide') => ids(resolveChains(g, { ...REQUEST, principal: 'target', risk }, NOW, { mode }));
    expect(at(1)).toEqual(['g-orchestrator>own']);
    expect(at(2)).toEqual([]);
    expect(at(0)).toHaveLength(16);
    expect(at(0)[0]).toBe('g-alice>low-00');
    // An edge above the last one is skipped too: risk narrows along a chain.
    const above = new EventLogBuilder().principal('governance', 'governance').principal('lead').principal('target');
    above.edge('g', 'grant', 'governance', 'lead', { constraints: { risk_max: 0 } }, { max_depth: 1 }).edge('d', 'delegate', 'lead', 'target', { constraints: { risk_max: 0 } });
    expect(ids(resolveChains(AuthorityGraph.replay(above.events), { ...REQUEST, principal: 'target', risk: 1 }, NOW, { mode: 'decide' }))).toEqual([]);
    // Explain mode keeps them, for the reasons.
    expect(at(1, 'explain')).toHaveLength(16);
  });

  it('expands each parallel edge from one delegator, and any number of delegators into one principal', () => {
    const log = new EventLogBuilder().principal('governance', 'governance').principal('third').principal('lead').principal('target');
    // 65 parallel delegations from a third party (none of which covers title), and the target's own chain.
    log.edge('g-third', 'grant', 'governance', 'third', { fields: ['*'] });
    for (let i = 0; i < 65; i++) log.edge(`flood-${String(i).padStart(2, '0')}`, 'delegate', 'third', 'target', { fields: ['body'] });
    log.edge('g-lead', 'grant', 'governance', 'lead').edge('own', 'delegate', 'lead', 'target', { fields: ['title'] });
    const g = AuthorityGraph.replay(log.events);
    expect(ids(resolveChains(g, { ...REQUEST, principal: 'target' }, NOW, { mode: 'decide' }))).toEqual(['g-lead>own']);
    // Explain mode prunes no scope: 66 candidate edges from 2 delegators, each expanded (16 chains judged).
    const stats = { visited: 0, truncated: false, complete: false };
    const explained = resolveChains(g, { ...REQUEST, principal: 'target' }, NOW, { mode: 'explain', stats });
    expect(explained).toHaveLength(16);
    expect([stats.visited, stats.truncated]).toEqual([66 + 65 + 1, false]);
    // One parallel edge may narrow to the next on the path where another does not: each is tried.
    const two = new EventLogBuilder().principal('governance', 'governance').principal('a').principal('b').principal('c');
    two.edge('g', 'grant', 'governance', 'a').edge('ab-body', 'delegate', 'a', 'b', { fields: ['body'] }).edge('ab-title', 'delegate', 'a', 'b', { fields: ['title'] });
    two.edge('bc', 'delegate', 'b', 'c', { fields: ['title'] }, { max_depth: 0 });
    expect(ids(resolveChains(AuthorityGraph.replay(two.events), { ...REQUEST, principal: 'c' }, NOW, { mode: 'decide' }))).toEqual(['g>ab-title>bc']);
    // 500 distinct delegators, each holding a grant, into one principal (a fan-out of 64 was BUDGET_EXCEEDED):
    // the 16 first chains in order; none of them is wider than the others, so none is the principal's own.
    const wide = new EventLogBuilder().principal('governance', 'governance').principal('target');
    for (let i = 0; i < 500; i++) wide.principal(`m${i}`).edge(`g${String(i).padStart(3, '0')}`, 'grant', 'governance', `m${i}`).edge(`d${i}`, 'delegate', `m${i}`, 'target');
    const wideStats = { visited: 0, truncated: false, complete: false };
    const wideChains = ids(resolveChains(AuthorityGraph.replay(wide.events), { ...REQUEST, principal: 'target' }, NOW, { mode: 'decide', stats: wideStats }));
    expect(wideChains).toHaveLength(16);
    expect(wideChains[0]).toBe('g000>d0');
    expect(wideStats).toEqual({ visited: 1000, truncated: false, complete: false });
    // A direct grant (shorter) comes first, whoever else delegates to the principal.
    wide.edge('own', 'grant', 'governance', 'target');
    for (let i = 0; i < 300; i++) wide.principal(`x${i}`).edge(`x${i}>t`, 'delegate', `x${i}`, 'target');
    expect(ids(resolveChains(AuthorityGraph.replay(wide.events), { ...REQUEST, principal: 'target' }, NOW, { mode: 'decide' }))[0]).toBe('own');
  });

  it('returns the complete chains it found when the budget runs out later in the search', () => {
    const log = new EventLogBuilder().principal('governance', 'governance').principal('target');
    log.edge('short', 'grant', 'governance', 'target');
    for (let i = 0; i < 50; i++) {
      log.principal(`m${i}`).edge(`m${i}>t`, 'delegate', `m${i}`, 'target');
      for (let j = 0; j < 50; j++) log.principal(`u${i}-${j}`).edge(`u${i}-${j}>m${i}`, 'delegate', `u${i}-${j}`, `m${i}`);
    }
    const g = AuthorityGraph.replay(log.events);
    const chains = resolveChains(g, { ...REQUEST, principal: 'target' }, NOW, { mode: 'decide', budget: { maxVisited: 500 } });
    expect(ids(chains)).toEqual(['short']);
  });

  it('resolveChainsTo finds the delegator\'s chains whatever they cover, pruning only liveness in decide mode', () => {
    const g = AuthorityGraph.replay(twoChains().revokeEdge('g2').events);
    expect(ids(resolveChainsTo(g, 'seo-agent-7', NOW, { mode: 'decide' }))).toEqual(['g1>d1>d2']);
    expect(ids(resolveChainsTo(g, 'seo-agent-7', NOW, { mode: 'explain' }))).toEqual(['g1>d1>d2', 'g2>d3']);
  });

  it('has no chains for unknown principals or governance itself', () => {
    const g = AuthorityGraph.replay(twoChains().events);
    expect(resolveChains(g, { ...REQUEST, principal: 'ghost' }, NOW, { mode: 'decide' })).toEqual([]);
    expect(resolveChains(g, { ...REQUEST, principal: 'governance' }, NOW, { mode: 'decide' })).toEqual([]);
  });

  it('principalsOf lists every principal of the chains plus the extra ids it knows', () => {
    const g = AuthorityGraph.replay(twoChains().revokePrincipal('lead').events);
    const chains = resolveChains(g, REQUEST, NOW, { mode: 'explain' });
    const principals = principalsOf(g, chains, ['seo-agent-7', 'ghost']);
    expect(Object.keys(principals).sort()).toEqual(['editor', 'governance', 'lead', 'orchestrator', 'seo-agent-7']);
    expect(principals['lead']).toEqual({ id: 'lead', kind: 'agent', priority_class: 'agent', revoked_at: expect.any(Number) });
  });
});
