import { execFile } from 'node:child_process';
import { cp, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO } from '../support/harness.js';
import { CLI, requireDist } from '../support/server-process.js';

let dir: string;
beforeAll(async () => {
  requireDist();
  dir = await mkdtemp(join(tmpdir(), 'writ-policy-test-failures-'));
});
afterAll(() => rm(dir, { recursive: true, force: true }));

describe('writ policy test when many Rego tests fail', () => {
  it('shows all of opa\'s output, its summary included, and exits 1', { timeout: 120_000 }, async () => {
    // A domain rule that denies everything: every test expecting an allow fails, each with its trace (megabytes).
    const policies = join(dir, 'policies');
    await cp(join(REPO, 'policies'), policies, { recursive: true });
    await writeFile(join(policies, 'writ', 'authz', 'domain', 'freeze.rego'), 'package writ.authz.domain.freeze\n\ndeny contains "frozen" if true\n');
    const r = await promisify(execFile)(process.execPath, [CLI, 'policy', 'test', '--data-dir', join(dir, 'data')], {
      cwd: REPO,
      env: { ...process.env, WRIT_POLICIES_DIR: policies, WRIT_BUNDLE_DIR: join(dir, 'bundle') },
      maxBuffer: 256 * 1024 * 1024,
    }).then(
      ({ stdout, stderr }) => ({ code: 0, output: stdout + stderr }),
      (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, output: e.stdout + e.stderr }),
    );
    expect(r.code).toBe(1);
    expect(r.output.length).toBeGreaterThan(1024 * 1024);
    expect(r.output).toMatch(/\nPASS: \d+\/(\d+)\nFAIL: \d+\/\1\n$/);
    expect(r.output).toContain('data.writ.authz.decision_test.test_allow');
  });
});
