import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import { openWrit } from '../../src/service/index.js';
import { BUNDLE_DIR, REPO } from '../support/harness.js';
import { CLI, requireDist } from '../support/server-process.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
beforeAll(() => requireDist());

/** A data directory with a SQLite store, its signing key and governance's admin credential. */
async function dataDir(): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'writ-damaged-'));
  dirs.push(dir);
  await (await openWrit(loadConfig({ dataDir: dir, bundleDir: BUNDLE_DIR, policiesDir: join(REPO, 'policies') }, {}))).close();
  return dir;
}

describe('damaged key files in the data directory', () => {
  it('writ serve refuses to start on a damaged signing key file, naming it, and makes no key beside it', async () => {
    const dir = await dataDir();
    const [name] = readdirSync(join(dir, 'keys'));
    writeFileSync(join(dir, 'keys', name!), '{"kty":"OKP", broken');
    // Not runWrit: a serve that starts (the defect) must not stay behind, so it is killed after 20 s.
    const r = await new Promise<{ code: number | null; output: string }>((done) => {
      execFile(process.execPath, [CLI, 'serve', '--port', '0', '--no-upstream', '--data-dir', dir], { cwd: REPO, timeout: 20_000 }, (e, stdout, stderr) => done({ code: e ? (typeof e.code === 'number' ? e.code : null) : 0, output: stdout + stderr }));
    });
    expect(r.code).not.toBe(0);
    expect(r.output).toContain('UNPROCESSABLE');
    expect(r.output).toContain(join(dir, 'keys', name!));
    expect(r.output).toMatch(/restore it from a backup/i);
    expect(r.output).not.toMatch(/listening on/);
    expect(readdirSync(join(dir, 'keys'))).toEqual([name]);
  });

  it('an admin.jwk holding garbage is said to be no JWK, not another store\'s key', async () => {
    const dir = await dataDir();
    writeFileSync(join(dir, 'admin.jwk'), 'garbage, not json');
    const w = await openWrit(loadConfig({ dataDir: dir, bundleDir: BUNDLE_DIR, policiesDir: join(REPO, 'policies') }, {}));
    try {
      expect(w.credentialUnregistered).toBe(false);
      expect(w.credentialUnreadable).toMatch(/JSON/);
    } finally {
      await w.close();
    }
  });
});
