import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findOpa } from '../../src/cli/opa.js';
import { REPO } from '../support/harness.js';
import { CLI, requireDist } from '../support/server-process.js';

/**
 * The policy commands find OPA from the Writ install (its tools/bin/opa), not from the folder they run
 * in; with no OPA at all, each says so in one line with its code.
 */
let elsewhere: string;
let noOpaOnPath: string;

async function writElsewhere(env: Record<string, string>, ...args: string[]): Promise<{ code: number; output: string }> {
  const { WRIT_OPA: _, ...inherited } = process.env;
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, [CLI, ...args, '--data-dir', join(elsewhere, 'data')], { cwd: elsewhere, env: { ...inherited, PATH: noOpaOnPath, ...env } });
    return { code: 0, output: stdout + stderr };
  } catch (e) {
    const err = e as { stdout: string; stderr: string; code: number };
    return { code: err.code, output: err.stdout + err.stderr };
  }
}

beforeAll(() => {
  requireDist();
  elsewhere = mkdtempSync(join(tmpdir(), 'writ-elsewhere-'));
  noOpaOnPath = join(elsewhere, 'bin');
  mkdirSync(noOpaOnPath);
});
afterAll(() => rmSync(elsewhere, { recursive: true, force: true }));

describe('writ policy commands run outside the Writ checkout', () => {
  it('policy test and policy build use the install\'s tools/bin/opa when none is on PATH', { timeout: 60_000 }, async () => {
    const env = { WRIT_POLICIES_DIR: join(REPO, 'policies'), WRIT_BUNDLE_DIR: join(elsewhere, 'bundle') };
    const tested = await writElsewhere(env, 'policy', 'test');
    expect(tested.code, tested.output).toBe(0);
    expect(tested.output).toMatch(/PASS: \d+\/\d+/);
    const built = await writElsewhere(env, 'policy', 'build');
    expect(built.code, built.output).toBe(0);
    expect(readFileSync(join(elsewhere, 'bundle', 'revision'), 'utf8')).toMatch(/^sha256:[0-9a-f]{16}\n$/);
  });

  it.each([[['policy', 'test']], [['policy', 'build']], [['policy', 'impact', join(REPO, 'policies')]], [['trace', 'seo-agent-7', 'update_post', 'wp:post:1024', '--policy', join(REPO, 'policies')]]])(
    '%j with WRIT_OPA naming no opa: one line with its code, exit 1',
    async (args) => {
      const r = await writElsewhere({ WRIT_OPA: join(elsewhere, 'no-opa'), WRIT_BUNDLE_DIR: join(elsewhere, 'unused') }, ...args);
      expect(r.code).toBe(1);
      expect(r.output).toBe(`writ: POLICY_UNAVAILABLE (Policy unavailable): WRIT_OPA is "${join(elsewhere, 'no-opa')}", which is not an executable file: point it at an opa binary, or unset it to use opa on PATH or ${join(REPO, 'tools/bin/opa')}\n`);
    },
  );

  it('with no opa on PATH nor in the install, findOpa says where it looked, with its code', () => {
    const saved = { PATH: process.env.PATH, WRIT_OPA: process.env.WRIT_OPA };
    try {
      process.env.PATH = noOpaOnPath;
      delete process.env.WRIT_OPA;
      expect(findOpa(REPO)).toBe(join(REPO, 'tools/bin/opa'));
      // A folder named opa on PATH is passed over (it passes X_OK, and fails only when run); as WRIT_OPA it is refused.
      const folderOnPath = mkdtempSync(join(tmpdir(), 'writ-opa-folder-'));
      mkdirSync(join(folderOnPath, 'opa'));
      process.env.PATH = `${folderOnPath}${delimiter}${noOpaOnPath}`;
      expect(findOpa(REPO)).toBe(join(REPO, 'tools/bin/opa'));
      process.env.WRIT_OPA = join(folderOnPath, 'opa');
      expect(() => findOpa(REPO)).toThrow(expect.objectContaining({ code: 'POLICY_UNAVAILABLE', message: expect.stringContaining('which is not an executable file') }));
      delete process.env.WRIT_OPA;
      process.env.PATH = noOpaOnPath;
      expect(() => findOpa(elsewhere)).toThrow(expect.objectContaining({ code: 'POLICY_UNAVAILABLE', message: `the OPA CLI was not found (not on PATH, not at ${join(elsewhere, 'tools/bin/opa')}): run \`bash scripts/ensure-opa.sh\` in the Writ checkout (installs opa v1.22.3 with Go into tools/bin) or set WRIT_OPA` }));
    } finally {
      process.env.PATH = saved.PATH;
      if (saved.WRIT_OPA === undefined) delete process.env.WRIT_OPA;
      else process.env.WRIT_OPA = saved.WRIT_OPA;
    }
  });
});
