import type { LoadedPolicy } from '@open-policy-agent/opa-wasm';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { matchesPattern, patternCovers } from '../../src/graph/patterns.js';
import { buildScopeHarness } from './support.js';

/**
 * The resource patterns live twice: in TypeScript (src/graph/patterns.ts: chain resolution, key
 * validation, the gateway's routes) and in Rego (lib/scope.rego: the policy judging chains and
 * resource classes). The Rego is written for speed in wasm (fast paths for literal patterns and a
 * final `**`), so this checks the two agree on generated keys and patterns, through a real
 * `opa build -t wasm` of lib/scope.rego evaluated by opa-wasm, as decisions are.
 */
const HARNESS = `package writ_patterns_harness

import data.writ.authz.lib.scope

matches := [m |
	some q in input.pairs
	m := count({1 | scope.matches(q[0], q[1])}) == 1
]

within := [w |
	some q in input.pairs
	w := count({1 | scope.pattern_within(q[0], q[1])}) == 1
]
`;

let policy: LoadedPolicy;
let cleanup: () => Promise<void>;

beforeAll(async () => {
  ({ policy, remove: cleanup } = await buildScopeHarness('patterns-agree', HARNESS, ['writ_patterns_harness/matches', 'writ_patterns_harness/within']));
});
afterAll(() => cleanup());

function evaluate(entrypoint: 'matches' | 'within', pairs: [string, string][]): boolean[] {
  const id = (policy.entrypoints as Record<string, number>)[`writ_patterns_harness/${entrypoint}`]!;
  return (policy.evaluate({ pairs }, id) as { result: boolean[] }[])[0]!.result;
}

// Few distinct segments, so matches are common; keys have no wildcards, patterns may end in `**`.
const literal = fc.constantFrom('a', 'b', 'wp');
const key = fc.array(literal, { minLength: 1, maxLength: 4 }).map((s) => s.join(':'));
const pattern = fc
  .tuple(fc.array(fc.oneof(literal, fc.constant('*')), { minLength: 0, maxLength: 4 }), fc.boolean())
  .filter(([s, open]) => s.length > 0 || open)
  .map(([s, open]) => [...s, ...(open ? ['**'] : [])].join(':'));
/** Child patterns for containment: any pattern (a child may hold `*` and `**` too). */
const child = fc.oneof(key, pattern);

describe('resource patterns: Rego (wasm) agrees with TypeScript', () => {
  it('scope.matches(key, pattern) is matchesPattern(pattern, key)', () => {
    const pairs = fc.sample(fc.tuple(key, pattern), { numRuns: 3_000, seed: 1 });
    pairs.push(['wp', 'wp:**'], ['wp', '**'], ['wp:b', 'wp:b'], ['wp:b', 'wp:a'], ['a:b', '*:**'], ['a', '*:*:**'], ['a:b', 'a:*'], ['a:b:c', 'a:*']);
    const rego = evaluate('matches', pairs);
    const disagree = pairs.filter(([k, p], i) => rego[i] !== matchesPattern(p, k));
    expect(disagree).toEqual([]);
    // Both outcomes occur, so the agreement is not on a constant.
    expect(new Set(rego)).toEqual(new Set([true, false]));
  });

  it('scope.pattern_within(child, parent) is patternCovers(parent, child)', () => {
    const pairs = fc.sample(fc.tuple(child, pattern), { numRuns: 3_000, seed: 2 });
    const rego = evaluate('within', pairs);
    const disagree = pairs.filter(([c, p], i) => rego[i] !== patternCovers(p, c));
    expect(disagree).toEqual([]);
    expect(new Set(rego)).toEqual(new Set([true, false]));
  });

  it('agrees on property-generated batches too (shrinks to the smallest disagreement)', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(key, pattern), { minLength: 1, maxLength: 50 }), (pairs) => {
        const rego = evaluate('matches', pairs);
        return pairs.every(([k, p], i) => rego[i] === matchesPattern(p, k));
      }),
      { numRuns: 100, seed: 3 },
    );
  });
});
