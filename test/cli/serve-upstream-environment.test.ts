import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
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
});
