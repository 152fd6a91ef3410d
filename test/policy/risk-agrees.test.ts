import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { requestRisk, type PolicyEngine } from '../../src/policy/index.js';
import { buildShippedPolicy, decisionInput } from './support.js';

/**
 * The risk a request is judged at lives twice: in Rego (lib/decide.rego `risk`, which the last edge's
 * risk_max must reach) and in TypeScript (src/policy/request-risk.ts, which decide-mode chain resolution
 * skips edges below). Pruning at a higher risk than the policy's would lose valid chains, at a lower one
 * let chains the policy rejects for risk crowd out valid ones; so this checks, through the real bundle
 * built to wasm, that the two are equal for every catalogue action, an unknown one and names on
 * Object.prototype, without and with declared risks.
 */
let engine: PolicyEngine;
let cleanup: () => Promise<void>;

beforeAll(async () => {
  ({ engine, remove: cleanup } = await buildShippedPolicy('risk-agrees'));
});
afterAll(() => cleanup());

describe('requestRisk agrees with the policy\'s risk', () => {
  it('for every catalogue action, an unknown action and prototype names, with no declared risk and declared 0 to 5', () => {
    const actions = [...Object.keys(engine.data.writ.actions), 'no_such_action', 'constructor', 'toString', '__proto__'];
    expect(actions.length).toBeGreaterThan(8);
    for (const action of actions) {
      for (const declared of [null, 0, 1, 2, 3, 5]) {
        const policyRisk = engine.decide(decisionInput({}, { action, risk: declared })).risk;
        expect(policyRisk, `${action} declared ${declared}`).toBe(requestRisk(engine.data, action, declared));
      }
    }
  });
});
