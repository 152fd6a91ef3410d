import type { LoadedPolicy } from '@open-policy-agent/opa-wasm';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { narrowsTo } from '../../src/graph/edge-cover.js';
import type { Scope } from '../../src/graph/model.js';
import { buildScopeHarness } from './support.js';

/**
 * The narrowing rules live twice: in Rego (lib/scope.rego, narrowing_violations: what the policy judges
 * a chain and a proposed delegation by) and in TypeScript (src/graph/edge-cover.ts, narrowsTo: what
 * decide-mode chain resolution prunes by). Pruning a pair the policy would accept would lose a valid
 * chain; not pruning one it rejects lets invalid paths crowd valid ones out of the chains judged. So
 * this checks that they agree exactly, on generated (parent, child) pairs over every dimension, through
 * a real `opa build -t wasm` of lib/scope.rego evaluated by opa-wasm, as decisions are.
 */
const HARNESS = `package writ_narrowing_harness

import data.writ.authz.lib.scope

who := {"poss": "the delegator's", "edge": "the delegator's edge"}

violations := [v |
	some q in input.pairs
	v := scope.narrowing_violations(q[1], q[0], who)
]
`;

let policy: LoadedPolicy;
let cleanup: () => Promise<void>;

beforeAll(async () => {
  ({ policy, remove: cleanup } = await buildScopeHarness('narrowing-agrees', HARNESS, ['writ_narrowing_harness/violations']));
});
afterAll(() => cleanup());

interface Side {
  scope: Scope;
  not_before: number | null;
  expires_at: number | null;
  max_depth: number | null;
}

/** The policy's violations for each (parent, child) pair. */
function violations(pairs: [Side, Side][]): string[][] {
  return (policy.evaluate({ pairs }) as { result: string[][] }[])[0]!.result;
}

// Small domains, so that a child is often within its parent and both verdicts are common.
const values = (domain: string[]) => fc.uniqueArray(fc.constantFrom(...domain, '*'), { minLength: 1, maxLength: 3 });
const segment = fc.constantFrom('wp', 'post', '1', '*');
const pattern = fc
  .tuple(fc.array(segment, { minLength: 0, maxLength: 3 }), fc.boolean())
  .filter(([s, open]) => s.length > 0 || open)
  .map(([s, open]) => [...s, ...(open ? ['**'] : [])].join(':'));
// No risk_max reads as 0 on both sides (no edge Writ writes lacks it, but the rules should not differ there).
const constraints = fc.oneof(fc.constant({} as Scope['constraints']), fc.integer({ min: 0, max: 3 }).map((risk_max) => ({ risk_max })));
const instant = fc.option(fc.constantFrom(1_000, 2_000, 3_000), { nil: null, freq: 3 });
const side: fc.Arbitrary<Side> = fc.record({
  scope: fc.record({
    actions: values(['read', 'update_post']),
    resources: fc.uniqueArray(pattern, { minLength: 1, maxLength: 2 }),
    environments: values(['production', 'staging']),
    fields: values(['title', 'body']),
    constraints,
  }),
  not_before: instant,
  expires_at: instant,
  max_depth: fc.option(fc.integer({ min: 0, max: 3 }), { nil: null, freq: 4 }),
});
/** A child that keeps each of its parent's dimensions (its depth less one) four times in five, else takes another's (so one dimension alone often decides). */
const pair: fc.Arbitrary<[Side, Side]> = fc.tuple(side, side, fc.array(fc.integer({ min: 0, max: 4 }).map((n) => n > 0), { minLength: 8, maxLength: 8 })).map(([parent, other, keep]) => {
  const pick = <T>(i: number, p: T, o: T): T => (keep[i] ? p : o);
  const child: Side = {
    scope: {
      actions: pick(0, parent.scope.actions, other.scope.actions),
      resources: pick(1, parent.scope.resources, other.scope.resources),
      environments: pick(2, parent.scope.environments, other.scope.environments),
      fields: pick(3, parent.scope.fields, other.scope.fields),
      constraints: pick(4, parent.scope.constraints, other.scope.constraints),
    },
    not_before: pick(5, parent.not_before, other.not_before),
    expires_at: pick(6, parent.expires_at, other.expires_at),
    max_depth: pick(7, parent.max_depth === null ? null : Math.max(0, parent.max_depth - 1), other.max_depth),
  };
  return [parent, child];
});

describe('narrowing rules: Rego (wasm) agrees with TypeScript', () => {
  it('scope.narrowing_violations(child, parent) is empty exactly when narrowsTo(parent, child)', () => {
    const pairs = fc.sample(pair, { numRuns: 800, seed: 130 });
    const rego = violations(pairs);
    const disagree = pairs
      .map(([parent, child], i) => ({ parent, child, rego: rego[i]!, ts: narrowsTo(parent, child) }))
      .filter((c) => (c.rego.length === 0) !== c.ts);
    expect(disagree).toEqual([]);
    // Both verdicts are common, and each dimension alone decides some pair: the agreement is not on a constant.
    const allowed = rego.filter((v) => v.length === 0).length;
    expect(allowed).toBeGreaterThan(80);
    expect(allowed).toBeLessThan(720);
    const alone = new Set(rego.filter((v) => v.length === 1).map((v) => v[0]!.split(':')[0]));
    expect([...alone].sort()).toEqual(['actions', 'depth', 'environments', 'fields', 'resources', 'risk', 'time window']);
  });

  it('agrees at the edges of every dimension', () => {
    const base: Side = {
      scope: { actions: ['update_post'], resources: ['wp:post:*'], environments: ['production'], fields: ['title'], constraints: { risk_max: 1 } },
      not_before: 1_000, expires_at: 3_000, max_depth: 2,
    };
    const child = (c: Partial<Omit<Side, 'scope'>> & { scope?: Partial<Scope> }): Side => ({ ...base, ...c, scope: { ...base.scope, ...c.scope } });
    const cases: [Side, Side][] = [
      [base, child({ max_depth: 1 })], // keeps the most it may
      [base, child({})], // depth 2 under depth 2
      [base, child({ max_depth: null })], // null is 0
      [{ ...base, max_depth: 1 }, child({ max_depth: 0 })],
      [{ ...base, max_depth: 1 }, child({ max_depth: null })],
      [{ ...base, max_depth: 0 }, child({ max_depth: 0 })], // a parent that allows no delegation
      [{ ...base, max_depth: null }, child({ max_depth: null })],
      [base, child({ max_depth: 1, scope: { actions: ['*'] } })],
      [{ ...base, scope: { ...base.scope, fields: ['*'] } }, child({ max_depth: 1, scope: { fields: ['*'] } })],
      [base, child({ max_depth: 1, scope: { resources: ['wp:post:**'] } })],
      [base, child({ max_depth: 1, scope: { resources: ['wp:post:1'] } })],
      [base, child({ max_depth: 1, scope: { constraints: {} as Scope['constraints'] } })],
      [base, child({ max_depth: 1, scope: { constraints: { risk_max: 2 } } })],
      [base, child({ max_depth: 1, not_before: null })],
      [base, child({ max_depth: 1, not_before: 999 })],
      [base, child({ max_depth: 1, expires_at: 3_001 })],
      [base, child({ max_depth: 1, expires_at: null })],
      [{ ...base, not_before: null, expires_at: null }, child({ max_depth: 1, not_before: null, expires_at: null })],
    ];
    const rego = violations(cases);
    expect(cases.map(([p, c]) => narrowsTo(p, c))).toEqual(rego.map((v) => v.length === 0));
    expect(rego.map((v) => v.length === 0)).toEqual([true, false, true, true, true, false, false, false, true, false, true, true, false, false, false, false, false, true]);
  });
});
