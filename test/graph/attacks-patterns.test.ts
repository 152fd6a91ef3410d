/**
 * Patterns that match more than they look: checked exhaustively against what the patterns mean. The
 * Rego and the TypeScript agree (test/policy/patterns-agree.test.ts); this checks that what they agree
 * on is sound: whenever patternCovers(parent, child) says a child is within its parent, every key the
 * child matches, the parent matches too (so a delegation judged within its parent gives nothing more),
 * and the same for scopeCovers, which also reads actions, environments, fields and risk.
 */
import { describe, expect, it } from 'vitest';
import { matchesPattern, patternCovers, patternsOverlap, validatePattern } from '../../src/graph/patterns.js';
import { scopeCovers } from '../../src/graph/edge-cover.js';
import type { Scope } from '../../src/graph/model.js';
import { AuthorityGraph, resolveChains } from '../../src/graph/index.js';
import { EventLogBuilder, REQUEST, T0 } from './graph-events.js';

/** Every sequence over `alphabet` of length min..max. */
function sequences(alphabet: readonly string[], min: number, max: number): string[][] {
  const out: string[][] = [];
  const grow = (prefix: string[]) => {
    if (prefix.length >= min) out.push(prefix);
    if (prefix.length < max) for (const s of alphabet) grow([...prefix, s]);
  };
  grow([]);
  return out;
}

// Patterns of up to three segments over a, b and *, each also with a final **; `**` alone too.
const PATTERNS = sequences(['a', 'b', '*'], 0, 3)
  .flatMap((s) => [s, [...s, '**']])
  .filter((s) => s.length > 0)
  .map((s) => s.join(':'));
// Keys one longer than the longest pattern and with a segment no pattern names (c).
const KEYS = sequences(['a', 'b', 'c'], 1, 5).map((s) => s.join(':'));

describe('resource patterns, exhaustively', () => {
  it('every generated pattern is valid, and no key is matched by a pattern it should not be (** only last, * one segment)', () => {
    for (const p of PATTERNS) expect(validatePattern(p), p).toBeNull();
    expect(matchesPattern('a:*', 'a')).toBe(false);
    expect(matchesPattern('a:*', 'a:b:c')).toBe(false);
    expect(matchesPattern('a:**', 'a')).toBe(true);
    expect(matchesPattern('a:**', 'ab')).toBe(false);
    expect(matchesPattern('*', 'a:b')).toBe(false);
  });

  it('patternCovers(parent, child) is sound: the child matches no key its parent does not', () => {
    const unsound: string[] = [];
    let covered = 0;
    for (const parent of PATTERNS) {
      const pm = new Set(KEYS.filter((k) => matchesPattern(parent, k)));
      for (const child of PATTERNS) {
        if (!patternCovers(parent, child)) continue;
        covered++;
        const escape = KEYS.find((k) => matchesPattern(child, k) && !pm.has(k));
        if (escape !== undefined) unsound.push(`${child} within ${parent}, yet ${escape}`);
      }
    }
    expect(unsound).toEqual([]);
    expect(covered).toBeGreaterThan(PATTERNS.length);
  });

  it('patternsOverlap is never false for two patterns that share a key (the registry check cannot be slipped past)', () => {
    const missed: string[] = [];
    for (const a of PATTERNS) {
      for (const b of PATTERNS) {
        if (patternsOverlap(a, b)) continue;
        const shared = KEYS.find((k) => matchesPattern(a, k) && matchesPattern(b, k));
        if (shared !== undefined) missed.push(`${a} and ${b} share ${shared}`);
      }
    }
    expect(missed).toEqual([]);
  });

  it('scopeCovers: a `*` in the narrow scope is covered only by a `*`, and every dimension counts', () => {
    const wide: Scope = { actions: ['update_post'], resources: ['wp:post:*'], environments: ['production'], fields: ['title'], constraints: { risk_max: 1 } };
    expect(scopeCovers(wide, wide)).toBe(true);
    const wider: Partial<Scope>[] = [
      { actions: ['*'] }, { actions: ['update_post', 'publish_post'] },
      { environments: ['*'] }, { fields: ['*'] }, { fields: ['title', 'body'] },
      { resources: ['wp:post:**'] }, { resources: ['wp:*:*'] }, { resources: ['**'] }, { resources: ['wp:post:1', 'wp:page:1'] },
      { constraints: { risk_max: 2 } },
    ];
    for (const w of wider) expect(scopeCovers(wide, { ...wide, ...w }), JSON.stringify(w)).toBe(false);
  });
});

describe('decide-mode resolution drops paths no valid chain can take', () => {
  const ids = (g: AuthorityGraph, mode: 'decide' | 'explain') => resolveChains(g, { ...REQUEST, fields: ['title'] }, T0 + 3_600_000, { mode }).map((c) => c.edges.map((e) => e.id).join('>'));
  const base = () => new EventLogBuilder().principal('governance', 'governance').principal('lead').principal('seo-agent-7');

  it('an edge wider than the one after it (fields), or one after a parent that allows no delegation: explain keeps them for the reasons', () => {
    const wider = AuthorityGraph.replay(base().edge('g', 'grant', 'governance', 'lead', { fields: ['title'] }).edge('d', 'delegate', 'lead', 'seo-agent-7', { fields: ['title', 'body'] }).events);
    expect(ids(wider, 'decide')).toEqual([]);
    expect(ids(wider, 'explain')).toEqual(['g>d']);
    const depth0 = AuthorityGraph.replay(base().edge('g', 'grant', 'governance', 'lead', {}, { max_depth: 0 }).edge('d', 'delegate', 'lead', 'seo-agent-7').events);
    expect(ids(depth0, 'decide')).toEqual([]);
    expect(ids(depth0, 'explain')).toEqual(['g>d']);
    const outlives = AuthorityGraph.replay(base().edge('g', 'grant', 'governance', 'lead', {}, { expires_at: T0 + 7_200_000 }).edge('d', 'delegate', 'lead', 'seo-agent-7').events);
    expect(ids(outlives, 'decide')).toEqual([]);
    const fine = AuthorityGraph.replay(base().edge('g', 'grant', 'governance', 'lead').edge('d', 'delegate', 'lead', 'seo-agent-7', { fields: ['title'] }).events);
    expect(ids(fine, 'decide')).toEqual(['g>d']);
  });

  it('an edge that keeps more depth than its parent leaves (max_depth at most the parent\'s less one, null read as 0)', () => {
    const chain = (parent: number | null, child: number | null) =>
      AuthorityGraph.replay(base().edge('g', 'grant', 'governance', 'lead', {}, { max_depth: parent }).edge('d', 'delegate', 'lead', 'seo-agent-7', {}, { max_depth: child }).events);
    expect(ids(chain(1, 1), 'decide')).toEqual([]);
    expect(ids(chain(1, 1), 'explain')).toEqual(['g>d']);
    expect(ids(chain(2, 3), 'decide')).toEqual([]);
    expect(ids(chain(1, 0), 'decide')).toEqual(['g>d']);
    expect(ids(chain(1, null), 'decide')).toEqual(['g>d']);
    expect(ids(chain(3, 2), 'decide')).toEqual(['g>d']);
    expect(ids(chain(null, null), 'decide')).toEqual([]);
  });

  it('17 paths whose last edge keeps too much depth no longer fill the 16 chains judged ahead of a valid one', () => {
    const log = base().principal('pub').edge('g-a', 'grant', 'governance', 'pub', {}, { max_depth: 1 });
    for (let i = 0; i < 17; i++) log.edge(`left-${String(i).padStart(2, '0')}`, 'delegate', 'pub', 'seo-agent-7', {}, { max_depth: 1 });
    log.edge('g-z', 'grant', 'governance', 'lead').edge('own', 'delegate', 'lead', 'seo-agent-7', { fields: ['title'] });
    const g = AuthorityGraph.replay(log.events);
    expect(ids(g, 'decide')).toEqual(['g-z>own']);
    expect(ids(g, 'explain')).toHaveLength(16); // explain still shows them (for the reasons), shorter first and by id
  });
});
