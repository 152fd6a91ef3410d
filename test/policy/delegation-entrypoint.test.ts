import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PolicyEngine } from '../../src/policy/index.js';
import { buildShippedPolicy, delegation, delegationInput, grant, MS_DAY, NOW } from './support.js';

let engine: PolicyEngine;
let cleanup: () => Promise<void>;

beforeAll(async () => {
  ({ engine, remove: cleanup } = await buildShippedPolicy('policy-delegation'));
});
afterAll(() => cleanup());

const scope = delegation().scope;

describe('delegation entrypoint: a delegation wider than its delegator is refused, per dimension', () => {
  it('accepts a delegation within the delegator’s edge', () => {
    expect(engine.checkDelegation(delegationInput(delegation()))).toEqual({ allow: true, violations: [], chain_index: 0 });
  });

  it.each([
    ['actions', delegation({ scope: { ...scope, actions: ['deploy', 'update_post'] } }), grant(), "actions: deploy is not in the delegator's [publish_post, update_post]"],
    ['resources', delegation({ scope: { ...scope, resources: ['wp:**'] } }), grant(), "resources: wp:** is not within the delegator's [wp:post:*]"],
    ['environments', delegation({ scope: { ...scope, environments: ['development'] } }), grant(), "environments: development is not in the delegator's [production, staging]"],
    [
      'fields',
      delegation({ scope: { ...scope, fields: ['body', 'title'] } }),
      grant({ scope: { ...grant().scope, fields: ['meta_description', 'title'] } }),
      "fields: body is not in the delegator's [meta_description, title]",
    ],
    ['risk', delegation({ scope: { ...scope, constraints: { risk_max: 3 } } }), grant(), "risk: 3 exceeds the delegator's risk_max 2"],
    [
      'time window',
      delegation({ expires_at: NOW + 31 * MS_DAY }),
      grant({ expires_at: NOW + 14 * MS_DAY }),
      "time window: expires_at 2026-02-01T00:00:00Z is after the delegator's 2026-01-15T00:00:00Z",
    ],
    ['depth', delegation(), grant({ max_depth: 0 }), "depth: the delegator's edge allows no further delegation (max_depth 0)"],
  ])('%s', (_dimension, proposed, parent, violation) => {
    expect(engine.checkDelegation(delegationInput(proposed, parent))).toEqual({ allow: false, violations: [violation], chain_index: null });
  });

  it('refuses a delegator without a valid chain', () => {
    const r = engine.checkDelegation(delegationInput(delegation(), grant({ expires_at: NOW })));
    expect(r.allow).toBe(false);
    expect(r.violations).toEqual([
      'chain: orchestrator holds no valid chain from governance',
      'chain: candidate 0: edge g-orch (governance → orchestrator) expired at 2026-01-01T00:00:00Z',
    ]);
  });
});
