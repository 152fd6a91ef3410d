import { execFile, spawn } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { REPO } from '../support/harness.js';
import { CLI, freePort, requireDist } from '../support/server-process.js';

const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

describe('writ serve with an upstream configured for an environment the policy does not have', () => {
  it('refuses to start, naming the setting and the closest environment (every write there would be NO_UPSTREAM)', async () => {
    requireDist();
    const dataDir = mkdtempSync(join(tmpdir(), 'writ-upstream-env-'));
    dirs.push(dataDir);
    const started = Date.now();
    const r = await promisify(execFile)(process.execPath, [CLI, 'serve', '--port', String(await freePort()), '--no-upstream', '--data-dir', dataDir], {
      cwd: REPO,
      env: { ...process.env, WRIT_UPSTREAM_ENVIRONMENT: 'prodution', WRIT_DATABASE_URL: '' },
    }).then(() => ({ code: 0, stderr: '' }), (e: { code: number; stderr: string }) => e);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('writ: UNPROCESSABLE (Unprocessable): the upstream for wp:post:* (http://127.0.0.1:4100): its environment (WRIT_UPSTREAM_ENVIRONMENT): "prodution" is not an environment of the policy (data.writ.environments: production, staging, development) (did you mean "production"?)');
    expect(r.stderr).not.toContain('listening on');
    expect(Date.now() - started).toBeLessThan(20_000);
  }, 30_000);

  it('left at its default (production) under a policy without it: starts, and warns that writes there will be NO_UPSTREAM', async () => {
    requireDist();
    const work = mkdtempSync(join(tmpdir(), 'writ-upstream-env-default-'));
    dirs.push(work);
    const policies = join(work, 'policies');
    cpSync(join(REPO, 'policies'), policies, { recursive: true });
    const data = JSON.parse(readFileSync(join(policies, 'data.json'), 'utf8'));
    data.writ.environments = ['staging', 'development'];
    data.writ.approval_threshold = { staging: 2 };
    writeFileSync(join(policies, 'data.json'), JSON.stringify(data, null, 2));
    const env: NodeJS.ProcessEnv = { ...process.env, WRIT_POLICIES_DIR: policies, WRIT_BUNDLE_DIR: join(work, 'bundle'), WRIT_DATABASE_URL: '' };
    delete env.WRIT_UPSTREAM_ENVIRONMENT;
    await promisify(execFile)(process.execPath, [CLI, 'policy', 'build'], { cwd: REPO, env });
    const server = spawn(process.execPath, [CLI, 'serve', '--port', String(await freePort()), '--no-upstream', '--data-dir', join(work, 'data')], { cwd: REPO, env });
    let output = '';
    server.stdout.on('data', (b: Buffer) => (output += b));
    server.stderr.on('data', (b: Buffer) => (output += b));
    const exited = new Promise((resolve) => server.on('exit', resolve));
    try {
      const deadline = Date.now() + 20_000;
      while (!output.includes('listening on') && server.exitCode === null && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      expect(output).toContain('listening on');
      expect(output).toContain('[writ] WARNING: the upstream for wp:post:* (http://127.0.0.1:4100): its environment (WRIT_UPSTREAM_ENVIRONMENT): "production" is not an environment of the policy (data.writ.environments: staging, development): writes there will be NO_UPSTREAM (set WRIT_UPSTREAM_ENVIRONMENT)');
    } finally {
      server.kill('SIGTERM');
      await exited;
    }
  }, 60_000);
});
