import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase } from '../../scripts/test-database.js';
import { runWrit } from '../support/cli.js';
import { CLI, requireDist } from '../support/server-process.js';
import { REPO } from '../support/harness.js';

/**
 * An auditor runs `writ` against the deployment's PostgreSQL from a directory of its own, where no policy
 * bundle is (WRIT_BUNDLE_DIR defaults to ./build/policy). Verifying the receipt chains, listing receipts and
 * exporting the graph judge nothing: they answer there. A command that judges (trace) still says the bundle is missing.
 */
let db: { url: string; drop(): Promise<void> };
let dataDir: string;
let elsewhere: string;

function withoutWritSettings(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  delete env.WRIT_BUNDLE_DIR;
  delete env.WRIT_DATABASE_URL;
  return env;
}

/** `writ ARGS` run from `elsewhere` (not the checkout), against the database. */
async function writElsewhere(...args: string[]): Promise<{ code: number; output: string }> {
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, [CLI, ...args, '--data-dir', dataDir, '--database', db.url], { cwd: elsewhere, env: withoutWritSettings() });
    return { code: 0, output: stdout + stderr };
  } catch (e) {
    const err = e as { stdout: string; stderr: string; code: number };
    return { code: err.code, output: err.stdout + err.stderr };
  }
}

beforeAll(async () => {
  requireDist();
  db = await createTestDatabase('writ_cli_elsewhere');
  dataDir = mkdtempSync(join(tmpdir(), 'writ-elsewhere-data-'));
  elsewhere = mkdtempSync(join(tmpdir(), 'writ-elsewhere-cwd-'));
  const applied = await runWrit(dataDir, 'graph', 'apply', 'graph/example.yaml', '--database', db.url);
  expect(applied.code, applied.output).toBe(0);
});
afterAll(async () => {
  await db?.drop();
  rmSync(dataDir, { recursive: true, force: true });
  rmSync(elsewhere, { recursive: true, force: true });
});

describe('writ run by an auditor outside the checkout, against PostgreSQL', () => {
  it('audit verify, receipts and graph export answer without a policy bundle', async () => {
    const verify = await writElsewhere('audit', 'verify');
    expect(verify.output).toMatch(/^OK: 0 entries in 0 chains/);
    expect(verify.code).toBe(0);
    const receipts = await writElsewhere('receipts', '--json');
    expect(receipts).toMatchObject({ code: 0, output: expect.stringContaining('"receipts": []') });
    const graph = await writElsewhere('graph', 'export');
    expect(graph).toMatchObject({ code: 0, output: expect.stringContaining('d-orch-seo') });
  });

  it('graph apply, which may make the store, still refuses before bootstrapping anything (no admin credential)', async () => {
    const fresh = mkdtempSync(join(tmpdir(), 'writ-elsewhere-fresh-'));
    try {
      const r = await promisify(execFile)(process.execPath, [CLI, 'graph', 'apply', join(REPO, 'graph/example.yaml'), '--data-dir', fresh], { cwd: elsewhere, env: withoutWritSettings() })
        .then(() => ({ code: 0, output: '' }), (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, output: e.stdout + e.stderr }));
      expect(r).toMatchObject({ code: 1, output: expect.stringMatching(/^writ: POLICY_UNAVAILABLE /) });
      expect(existsSync(join(fresh, 'admin.jwk'))).toBe(false);
    } finally {
      rmSync(fresh, { recursive: true, force: true });
    }
  });

  it('trace, which judges, still says the bundle is missing', async () => {
    const trace = await writElsewhere('trace', 'seo-agent-7', 'update_post', 'wp:post:1', '--fields', 'title');
    expect(trace).toMatchObject({ code: 1, output: expect.stringMatching(/^writ: POLICY_UNAVAILABLE .*no policy bundle in .*build\/policy/) });
  });
});
