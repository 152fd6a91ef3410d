/**
 * Do two policy folders judge alike? For a refactor of the Rego that must not change a verdict (e.g.
 * one made for speed): both are built with the real `opa build` into wasm bundles, and the decision
 * entrypoint of each judges the same generated inputs — the example decision's input (seo-agent-7
 * update_post wp:post:1024 on graph/example.yaml) with its resource, action, environment, fields, risk,
 * owners and candidate chains varied (random keys and patterns, scopes, time windows, revocations,
 * edge kinds, and chains whose scopes cover the key, so that some inputs allow). Every result must be
 * the same object. `writ policy impact` answers the other question (which recorded decisions a
 * candidate flips).
 *
 *   git archive 27f8bf8 policies | tar -x -C /tmp/old
 *   npx tsc -p tsconfig.json && node dist/bench/policy-equivalence.js --old /tmp/old/policies --new policies [--inputs 20000] [--seed 7]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { findOpa } from '../src/cli/opa.js';
import { loadConfig } from '../src/config/index.js';
import { GOVERNANCE_ID } from '../src/graph/model.js';
import { buildPolicyBundle, loadPolicyEngine, type DecisionInput, type PolicyEdge, type PolicyEngine } from '../src/policy/index.js';
import { applyManifest, decide, openWrit, readManifest } from '../src/service/index.js';
import { argValue } from './results-file.js';

const INPUTS = Number(argValue('inputs', '20000'));
const SEED = Number(argValue('seed', '7'));

/** The input Writ's policy engine is given for the example decision. */
async function exampleInput(): Promise<DecisionInput> {
  const dataDir = mkdtempSync(join(tmpdir(), 'writ-policy-equivalence-'));
  const w = await openWrit(loadConfig({ dataDir }));
  try {
    const { manifest, baseDir } = readManifest('graph/example.yaml');
    await applyManifest(w.ctx, GOVERNANCE_ID, manifest, baseDir);
    let captured: DecisionInput | undefined;
    const engine = w.ctx.policy;
    const original = engine.decide.bind(engine);
    engine.decide = (input) => ((captured = structuredClone(input)), original(input));
    await decide(w.ctx, 'seo-agent-7', { action: 'update_post', resource: 'wp:post:1024', environment: 'production', fields: ['title', 'meta_description'] });
    return captured!;
  } finally {
    await w.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

async function engineOf(policiesDir: string, work: string): Promise<PolicyEngine> {
  const outDir = mkdtempSync(join(work, 'bundle-'));
  await buildPolicyBundle({ opaPath: findOpa(), policiesDir, outDir });
  return loadPolicyEngine(outDir);
}

function inputs(base: DecisionInput): fc.Arbitrary<DecisionInput> {
  const seg = fc.constantFrom('wp', 'post', 'page', 'site', 'a', 'template', 'canonical', 'canonical-bulk', 'deploy', 'worker', 'job', 'incident', 'audit', 'principal', '1024', 'x');
  const key = fc.array(seg, { minLength: 1, maxLength: 5 }).map((s) => s.join(':'));
  const pattern = fc
    .tuple(fc.array(fc.oneof(seg, fc.constant('*')), { maxLength: 4 }), fc.boolean())
    .filter(([s, open]) => s.length > 0 || open)
    .map(([s, open]) => [...s, ...(open ? ['**'] : [])].join(':'));
  const action = fc.constantFrom('update_post', 'publish_post', 'deploy', 'run_job', 'read_post', 'audit_read', 'not_in_the_catalogue');
  const environment = fc.constantFrom('production', 'staging', 'dev');
  const field = fc.constantFrom('title', 'meta_description', 'body', '*');
  const time = fc.option(fc.integer({ min: base.now - 5_000, max: base.now + 5_000 }), { nil: null });
  const [grant, delegation] = base.chains[0]!.edges as [PolicyEdge, PolicyEdge];
  const scope = fc.record({
    actions: fc.array(fc.oneof(action, fc.constant('*')), { minLength: 1, maxLength: 3 }),
    resources: fc.array(fc.oneof(pattern, key), { minLength: 1, maxLength: 3 }),
    environments: fc.array(fc.oneof(environment, fc.constant('*')), { minLength: 1, maxLength: 2 }),
    fields: fc.array(field, { minLength: 1, maxLength: 3 }),
    constraints: fc.record({ risk_max: fc.integer({ min: 0, max: 3 }) }),
  });
  const edge = (like: PolicyEdge) =>
    fc
      .record({ scope, max_depth: fc.option(fc.integer({ min: 0, max: 3 }), { nil: null }), not_before: time, expires_at: time, revoked_at: time, kind: fc.constantFrom('grant', 'delegate', 'delegate', 'approves') })
      .map((e) => ({ ...like, ...e }) as PolicyEdge);
  // Chains like the example's, with only the resource patterns varied: these allow when the key is covered.
  const covering = fc.tuple(pattern, pattern).map(([p0, p1]) => ({
    edges: [grant, delegation].map((e, i) => ({ ...e, scope: { ...e.scope, actions: ['*'], environments: ['*'], fields: ['*'], resources: i === 0 ? [p0, '**'] : [p1] } })),
  }));
  const chains = fc.oneof(fc.array(fc.tuple(edge(grant), edge(delegation)).map((edges) => ({ edges })), { maxLength: 2 }), fc.array(covering, { minLength: 1, maxLength: 2 }));
  return fc
    .record({
      resource: fc.oneof(key, fc.constantFrom('wp:post:1024', 'site:a:template:canonical', 'site:a:canonical-bulk', 'deploy:x:y', 'job:nightly', 'incident:1', 'audit:principal:x')),
      action,
      environment,
      fields: fc.uniqueArray(field, { maxLength: 3 }),
      risk: fc.option(fc.integer({ min: 0, max: 3 }), { nil: null }),
      chains,
      unowned: fc.boolean(),
    })
    .map((g) => ({
      ...base,
      request: { ...base.request, resource: g.resource, action: g.action, environment: g.environment, fields: [...g.fields].sort(), risk: g.risk },
      chains: g.chains,
      owners: g.fields.map((f) => ({ field: f, owner: g.unowned ? null : 'seo-control-plane', edge_id: 'o-generated' })),
    }));
}

async function main(): Promise<void> {
  const work = mkdtempSync(join(tmpdir(), 'writ-policy-equivalence-'));
  try {
    const base = await exampleInput();
    const before = await engineOf(argValue('old'), work);
    const after = await engineOf(argValue('new'), work);
    let allowed = 0;
    const differ: { input: DecisionInput; old: string; new: string }[] = [];
    for (const input of fc.sample(inputs(base), { numRuns: INPUTS, seed: SEED })) {
      const judged = before.decide(input);
      const a = JSON.stringify(judged);
      const b = JSON.stringify(after.decide(input));
      if (a !== b) differ.push({ input, old: a, new: b });
      if (judged.allow) allowed += 1;
    }
    console.log(`${INPUTS} generated inputs (seed ${SEED}), ${allowed} allowed by the old policy: ${differ.length} judged differently`);
    for (const d of differ.slice(0, 3)) console.log(JSON.stringify(d, null, 1));
    process.exitCode = differ.length === 0 ? 0 : 1;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

void main();
