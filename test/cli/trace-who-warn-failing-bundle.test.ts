import { execFile } from 'node:child_process';
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findOpa } from '../../src/cli/opa.js';
import { ManualClock } from '../../src/clock.js';
import { loadConfig } from '../../src/config/index.js';
import { buildPolicyBundle } from '../../src/policy/index.js';
import { CLI } from '../../scripts/server-process.js';
import { decideOk } from '../support/agent.js';
import { BUNDLE_DIR, REPO, startHarness, type Harness } from '../support/harness.js';
import { TWO_VALUES_FILE, TWO_VALUES_RULE } from '../support/policy-mistakes.js';
import { requireDist } from '../support/server-process.js';

const exec = promisify(execFile);

let h: Harness;
let work: string;
let conflicting: string;
let decisionId: string;

/** The compiled `writ` with `env` added: stdout and stderr apart, whatever the exit. */
async function writ(env: Record<string, string>, ...args: string[]): Promise<{ stdout: string; stderr: string; code: number }> {
  try {
    const { stdout, stderr } = await exec(process.execPath, [CLI, ...args, '--data-dir', h.dataDir], { cwd: REPO, env: { ...process.env, WRIT_DECISION_LOG_FILE: join(work, 'decisions.jsonl'), ...env } });
    return { stdout, stderr, code: 0 };
  } catch (e) {
    const err = e as { stdout: string; stderr: string; code: number };
    return { stdout: err.stdout, stderr: err.stderr, code: err.code };
  }
}

beforeAll(async () => {
  requireDist();
  work = mkdtempSync(join(tmpdir(), 'writ-failing-bundle-cli-'));
  h = await startHarness({ clock: new ManualClock(Date.now()), config: { decisionLog: { ...loadConfig({}, {}).decisionLog, file: join(work, 'decisions.jsonl') } } });
  // Recorded: a production request on the title field, which the conflicting rule fails on.
  decisionId = (await decideOk(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['title'] })).body.decision_id as string;
  await h.ctx.decisionLog.flush();
  const policies = join(work, 'policies-conflict');
  cpSync(join(REPO, 'policies'), policies, { recursive: true });
  writeFileSync(join(policies, TWO_VALUES_FILE), TWO_VALUES_RULE);
  conflicting = join(work, 'bundle-conflict');
  // It compiles and answers well-formed inputs: the build publishes it (only a running server checks its last inputs).
  await buildPolicyBundle({ opaPath: findOpa(REPO), policiesDir: policies, outDir: conflicting });
}, 90_000);
afterAll(async () => {
  await h?.close();
  if (work) rmSync(work, { recursive: true, force: true });
});

describe('writ trace and writ who say when the bundle they judge with fails on the recent decisions', () => {
  const failing = (bundle: string) =>
    new RegExp(`^writ: WARNING: policy sha256:[0-9a-f]{16} \\(${bundle}\\) fails on 1 of the last 1 recorded decisions \\(decision log\\), first ${decisionId} \\(seo-agent-7 update_post wp:post:1024 in production fields \\[title\\]\\): INTERNAL: .*var assignment conflict`, 'm');

  it('writ who, writ trace and writ can with a live bundle that fails on a recent decision: the answer, and a warning on stderr saying what to do', { timeout: 60_000 }, async () => {
    const env = { WRIT_BUNDLE_DIR: conflicting };
    // A request the rule does not fail on is answered, as before.
    const who = await writ(env, 'who', 'update_post', 'wp:post:1024', '--env', 'staging', '--fields', 'title');
    expect(who.code, who.stderr).toBe(0);
    expect(who.stdout).toMatch(/^who may update_post wp:post:1024 in staging fields \[title\]/);
    expect(who.stdout).not.toContain('WARNING');
    expect(who.stderr).toMatch(failing(`the live bundle of ${conflicting}`));
    expect(who.stderr).toContain('a server refuses such a rebuild and keeps the bundle it has (GET /readyz');
    expect(who.stderr).toContain('writ policy impact POLICIES_DIR');

    const trace = await writ(env, 'trace', 'seo-agent-7', 'update_post', 'wp:post:1024', '--env', 'staging', '--fields', 'title');
    expect(trace.stdout).toMatch(/seo-agent-7/);
    expect(trace.stdout).not.toContain('WARNING');
    expect(trace.stderr).toMatch(failing(`the live bundle of ${conflicting}`));

    // writ can judges every chain in production, where this bundle fails: the warning comes first, then that failure.
    const can = await writ(env, 'can', 'seo-agent-7');
    expect(can.stderr).toMatch(failing(`the live bundle of ${conflicting}`));
    expect(can.stdout).not.toContain('WARNING');

    // --json stays the answer alone.
    const json = await writ(env, 'who', 'update_post', 'wp:post:1024', '--env', 'staging', '--fields', 'title', '--json');
    expect(Array.isArray(JSON.parse(json.stdout))).toBe(true);
    expect(json.stderr).toMatch(failing(`the live bundle of ${conflicting}`));
  });

  it('writ trace --policy CANDIDATE that fails on a recent decision says so, naming writ policy impact CANDIDATE', { timeout: 60_000 }, async () => {
    const trace = await writ({ WRIT_BUNDLE_DIR: BUNDLE_DIR }, 'trace', 'seo-agent-7', 'update_post', 'wp:post:1024', '--env', 'staging', '--fields', 'title', '--policy', conflicting);
    expect(trace.stdout).toMatch(/seo-agent-7/);
    expect(trace.stderr).toMatch(failing(`the candidate ${conflicting}`));
    expect(trace.stderr).toContain(`fix it before deploying it: writ policy impact ${conflicting} lists every decision it fails on`);
  });

  it('a bundle that judges the recent decisions: no warning', { timeout: 60_000 }, async () => {
    const env = { WRIT_BUNDLE_DIR: BUNDLE_DIR };
    const who = await writ(env, 'who', 'update_post', 'wp:post:1024', '--fields', 'title');
    expect(who.code).toBe(0);
    expect(who.stderr).toBe('');
    const trace = await writ(env, 'trace', 'seo-agent-7', 'update_post', 'wp:post:1024', '--fields', 'title');
    expect(trace.code).toBe(0);
    expect(trace.stderr).toBe('');
    const can = await writ(env, 'can', 'seo-agent-7');
    expect(can.code).toBe(0);
    expect(can.stderr).toBe('');
  });
});
