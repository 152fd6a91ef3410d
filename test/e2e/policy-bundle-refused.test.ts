import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bundleRevision } from '../../src/policy/index.js';
import { WritClient } from '../../src/sdk/index.js';
import { fixtureKey, REPO } from '../support/harness.js';
import { CLI, startServerProcess, type ServerProcess } from '../support/server-process.js';
import { publishUncheckedBundle, TWO_VALUES_FILE, TWO_VALUES_RULE } from '../support/policy-mistakes.js';
import { opaPath } from '../policy/support.js';

/**
 * A policy author's mistakes, as a user meets them: a typo in data.json is refused by `writ policy
 * build`, which says where, and a running `writ serve` keeps deciding with the bundle it has, also
 * when a bundle with such data is put in its folder by other means; a Rego rule that compiles but fails
 * on the requests being made is not swapped in either.
 */
const run = promisify(execFile);
let work: string;
let env: Record<string, string>;
let server: ServerProcess;
let agent: WritClient;

async function policyBuild(): Promise<{ code: number; output: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [CLI, 'policy', 'build'], { cwd: REPO, env: { ...process.env, ...env } });
    return { code: 0, output: stdout + stderr };
  } catch (e) {
    const err = e as { stdout: string; stderr: string; code: number };
    return { code: err.code, output: err.stdout + err.stderr };
  }
}

function editData(edit: (writ: Record<string, any>) => void): void {
  const file = join(env.WRIT_POLICIES_DIR!, 'data.json');
  const data = JSON.parse(readFileSync(file, 'utf8'));
  edit(data.writ);
  writeFileSync(file, JSON.stringify(data, null, 2));
}

const decideTitle = () => agent.decide({ action: 'update_post', resource: 'wp:post:1024', environment: 'production', fields: ['title'] });

/** The revision the last `writ policy build` published. */
const builtRevision = () => readFileSync(join(env.WRIT_BUNDLE_DIR!, 'revision'), 'utf8').trim();

/** Decides until the service answers under `revision` (it takes a rebuilt bundle within a second or so). */
async function decideUnderRevision(revision: string) {
  let decision = await decideTitle();
  for (let i = 0; i < 100 && decision.policy_revision !== revision; i++) {
    await new Promise((r) => setTimeout(r, 100));
    decision = await decideTitle();
  }
  expect(decision.policy_revision).toBe(revision);
  return decision;
}

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'writ-policy-data-'));
  env = { WRIT_POLICIES_DIR: join(work, 'policies'), WRIT_BUNDLE_DIR: join(work, 'bundle') };
  cpSync(join(REPO, 'policies'), env.WRIT_POLICIES_DIR!, { recursive: true });
  const built = await policyBuild();
  expect(built.code, built.output).toBe(0);
  expect(built.output).toMatch(/^policy bundle sha256:[0-9a-f]{16} written to .*\na running service takes it within a second .*unless it fails on the requests it answered last: GET \/readyz names/);
  server = await startServerProcess({ dataDir: join(work, 'data'), env });
  agent = new WritClient({ baseUrl: server.url, principal: 'seo-agent-7', privateJwk: fixtureKey('seo-agent-7') });
}, 120_000);
afterAll(async () => {
  await server?.stop();
  rmSync(work, { recursive: true, force: true });
});

describe('policy data a policy would misread never reaches a decision', () => {
  it('writ policy build refuses a class typo, naming it; the running service keeps its bundle and its obligations', { timeout: 60_000 }, async () => {
    const before = await decideTitle();
    expect(before.allow).toBe(true);
    expect(before.obligations.lease_required).toBe(true);

    // Would make titles of posts need neither a lease nor a version.
    editData((w) => (w.resource_classes[0].fields.title = 'WRITE_EXCLUSVE'));
    const refused = await policyBuild();
    expect(refused.code).toBe(1);
    expect(refused.output).toContain('POLICY_UNAVAILABLE');
    expect(refused.output).toContain('data.writ.resource_classes[0].fields.title: "WRITE_EXCLUSVE" is not one of READ_SHARED, WRITE_OPTIMISTIC, WRITE_EXCLUSIVE, MULTI_WRITER_MERGEABLE');
    expect(builtRevision()).toBe(before.policy_revision);

    await new Promise((r) => setTimeout(r, 400)); // past the service's stat check of the bundle folder
    const after = await decideTitle();
    expect(after.policy_revision).toBe(before.policy_revision);
    expect(after.obligations.lease_required).toBe(true);
  });

  it('a bundle with such data put in place by hand is not loaded: the service says so and keeps deciding', { timeout: 60_000 }, async () => {
    const live = (await decideTitle()).policy_revision;
    const folder = join(env.WRIT_BUNDLE_DIR!, 'bundles', live.slice('sha256:'.length));
    const wasm = readFileSync(join(folder, 'policy.wasm'));
    const data = JSON.parse(readFileSync(join(folder, 'data.json'), 'utf8'));
    data.writ.approval_threshold.production = '2'; // no number exceeds a string in Rego: approvals would never be asked for
    const bad = Buffer.from(JSON.stringify(data));
    const revision = bundleRevision(wasm, bad);
    const badFolder = join(env.WRIT_BUNDLE_DIR!, 'bundles', revision.slice('sha256:'.length));
    mkdirSync(badFolder, { recursive: true });
    writeFileSync(join(badFolder, 'policy.wasm'), wasm);
    writeFileSync(join(badFolder, 'data.json'), bad);
    // Published as a build publishes (a rename), so the service never reads a half-written file.
    writeFileSync(join(env.WRIT_BUNDLE_DIR!, 'revision.tmp'), `${revision}\n`);
    renameSync(join(env.WRIT_BUNDLE_DIR!, 'revision.tmp'), join(env.WRIT_BUNDLE_DIR!, 'revision'));

    const deadline = Date.now() + 20_000;
    while (!server.log().includes(`keeping policy ${live}`) && Date.now() < deadline) {
      await decideTitle();
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(server.log()).toContain(`keeping policy ${live}`);
    expect(server.log()).toContain(`[policy] keeping policy ${live}: the new bundle in ${env.WRIT_BUNDLE_DIR} was not taken: POLICY_UNAVAILABLE: the policy data of policy bundle ${revision} is not usable`);
    expect(server.log()).toContain('  - data.writ.approval_threshold.production must be integer (found "2")\n');
    expect(server.log()).not.toMatch(/\n +at /); // a message for the author, not a stack trace
    const after = await decideTitle();
    expect(after.allow).toBe(true);
    expect(after.policy_revision).toBe(live);

    // The author's fix builds, and the service takes it without a restart.
    editData((w) => {
      w.resource_classes[0].fields.title = 'WRITE_EXCLUSIVE';
      w.actions.update_post.risk = 5;
    });
    const fixed = await policyBuild();
    expect(fixed.code, fixed.output).toBe(0);
    const decision = await decideUnderRevision(builtRevision());
    expect(decision.allow).toBe(false);
  });

  it('a rule that compiles but fails on the requests being made is not swapped in; the author\'s fix is', { timeout: 60_000 }, async () => {
    const live = (await decideTitle()).policy_revision;
    const rule = join(env.WRIT_POLICIES_DIR!, TWO_VALUES_FILE);
    writeFileSync(rule, TWO_VALUES_RULE);
    const built = await policyBuild();
    expect(built.code, built.output).toBe(0); // opa build cannot know: the conflict needs an input
    const conflicting = builtRevision();

    const deadline = Date.now() + 20_000;
    while (!server.log().includes(`policy bundle ${conflicting} fails on`) && Date.now() < deadline) {
      const d = await decideTitle(); // answered, by the live bundle, not INTERNAL
      expect(d.policy_revision).toBe(live);
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(server.log()).toMatch(new RegExp(`keeping policy ${live}: the new bundle in \\S+ was not taken: POLICY_UNAVAILABLE: policy bundle ${conflicting} fails on \\d+ of the last \\d+ inputs policy ${live} answered: .*var assignment conflict`));
    expect((await decideTitle()).policy_revision).toBe(live);
    // What a deploy script polls after its build.
    const ready = (await (await fetch(`${server.url}/readyz`)).json()) as { policy_revision: string; policy_refused?: { revision: string; reason: string } };
    expect(ready.policy_revision).toBe(live);
    expect(ready.policy_refused).toMatchObject({ revision: conflicting, reason: expect.stringContaining('var assignment conflict') });

    unlinkSync(rule);
    const fixed = await policyBuild();
    expect(fixed.code, fixed.output).toBe(0);
    expect(builtRevision()).toBe(live); // the same policies as before: the same revision, which is live
    writeFileSync(rule, ['package writ.authz.domain.two_values', '', 'deny contains "no titles in production" if {', '\tinput.request.environment == "production"', '\t"title" in input.request.fields', '}', ''].join('\n'));
    expect((await policyBuild()).code).toBe(0);
    const decision = await decideUnderRevision(builtRevision());
    expect(decision.reasons).toContain('no titles in production');
    expect(((await (await fetch(`${server.url}/readyz`)).json()) as { policy_refused?: unknown }).policy_refused).toBeUndefined();
  });

  it('a policy that forgets an output Writ reads is refused by the build and by the running service, naming it; decisions and explanations go on', { timeout: 60_000 }, async () => {
    const live = (await decideTitle()).policy_revision;
    const entrypoint = join(env.WRIT_POLICIES_DIR!, 'writ', 'authz', 'decision.rego');
    const original = readFileSync(entrypoint, 'utf8');
    writeFileSync(entrypoint, original.replace(/^risk := .*$/m, ''));
    const refused = await policyBuild();
    expect(refused.code).toBe(1);
    expect(refused.output).toMatch(/^writ: POLICY_UNAVAILABLE \(Policy unavailable\): policy bundle sha256:[0-9a-f]{16} cannot be used: its writ\/authz\/decision result lacks or mistypes what Writ reads .*: risk is missing \(an integer\)\n$/);
    expect(builtRevision()).toBe(live);

    // The same bundle put in the folder by other means (another tool, an older Writ): not swapped in.
    const lacking = await publishUncheckedBundle(opaPath(), env.WRIT_POLICIES_DIR!, env.WRIT_BUNDLE_DIR!);
    writeFileSync(entrypoint, original);
    let ready = { policy_revision: '', policy_refused: undefined as { revision: string; reason: string } | undefined };
    for (let i = 0; i < 100 && ready.policy_refused?.revision !== lacking; i++) {
      await new Promise((r) => setTimeout(r, 100));
      ready = (await (await fetch(`${server.url}/readyz`)).json()) as typeof ready;
    }
    expect(ready.policy_revision).toBe(live);
    expect(ready.policy_refused).toMatchObject({ revision: lacking, reason: expect.stringMatching(/result lacks or mistypes what Writ reads .*: risk is missing \(an integer\)$/) });
    const decision = await decideTitle();
    expect(decision).toMatchObject({ policy_revision: live, risk: 5 }); // answered by the live bundle (risk 5 since the test above)
    const explained = await agent.explain({ action: 'update_post', resource: 'wp:post:1024', environment: 'production', fields: ['title'] });
    expect(explained.chains.length).toBeGreaterThan(0);
    expect(explained.policy_revision).toBe(live);

    expect((await policyBuild()).code).toBe(0);
    expect(builtRevision()).toBe(live);
  });
});