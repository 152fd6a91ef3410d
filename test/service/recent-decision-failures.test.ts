import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findOpa } from '../../src/cli/opa.js';
import { ManualClock } from '../../src/clock.js';
import { loadCandidatePolicy } from '../../src/policy/index.js';
import { policyImpact, recentDecisionFailures } from '../../src/service/index.js';
import { act, decideLeaseWrite } from '../support/agent.js';
import { BUNDLE_DIR, REPO, startHarness, type Harness } from '../support/harness.js';
import { TWO_VALUES_FILE, TWO_VALUES_RULE } from '../support/policy-mistakes.js';

let h: Harness;
let work: string;
const decisions: string[] = [];

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'writ-recent-decisions-'));
  // No decision log: the recorded decisions are the receipts'.
  h = await startHarness({ upstream: true, clock: new ManualClock(Date.UTC(2026, 5, 1, 12)) });
  for (const version of [0, 1]) {
    const { decision: d, answer: w } = await decideLeaseWrite(h, 'seo-agent-7', { resource: 'wp:post:1024', payload: { title: `v${version + 1}` }, expected_version: version }, { release: true });
    expect(w.status).toBe(201);
    decisions.push(d.body.decision_id as string);
    (h.clock as ManualClock).advance(1000);
  }
  // A refused write after them: a receipt without a decision, which does not count as one.
  const refused = await act(h, 'content-agent-3', { resource: 'wp:post:1024', fields: ['body'], payload: { body: 'no decision' }, expected_version: 2 }, {});
  expect(refused.status).toBeGreaterThanOrEqual(400);
}, 60_000);
afterAll(async () => {
  await h?.close();
  rmSync(work, { recursive: true, force: true });
});

describe('the recent decisions read from the receipts', () => {
  it('are the last N receipts that carry a decision, oldest first', { timeout: 60_000 }, async () => {
    const { engine } = await loadCandidatePolicy(BUNDLE_DIR, findOpa);
    const one = await policyImpact(h.ctx, engine, { decisionLogFile: null, limit: 1 });
    expect(one.replayed).toBe(1);
    expect(one.latest_recorded?.decision_id).toBe(decisions[1]);
    const both = await policyImpact(h.ctx, engine, { decisionLogFile: null, limit: 5 });
    expect(both.replayed).toBe(2);
    expect(both.latest_recorded?.decision_id).toBe(decisions[1]);
  });

  it('recentDecisionFailures lists those a bundle fails on, with the code and Rego\'s message; none for one that judges them', { timeout: 60_000 }, async () => {
    const policies = join(work, 'policies-conflict');
    cpSync(join(REPO, 'policies'), policies, { recursive: true });
    writeFileSync(join(policies, TWO_VALUES_FILE), TWO_VALUES_RULE);
    const { engine: failing } = await loadCandidatePolicy(policies, findOpa);
    const check = await recentDecisionFailures(h.ctx, failing, 32);
    expect(check).toMatchObject({ revision: failing.revision, source: 'receipts', checked: 2 });
    expect(check.failures.map((f) => f.decision_id)).toEqual(decisions);
    expect(check.failures[0]).toMatchObject({ code: 'INTERNAL', error: expect.stringContaining('var assignment conflict'), request: { principal: 'seo-agent-7', environment: 'production', fields: ['title'] } });
    expect((await recentDecisionFailures(h.ctx, failing, 1)).failures.map((f) => f.decision_id)).toEqual([decisions[1]]);
    const { engine: live } = await loadCandidatePolicy(BUNDLE_DIR, findOpa);
    expect(await recentDecisionFailures(h.ctx, live, 32)).toMatchObject({ checked: 2, failures: [] });
  });
});
