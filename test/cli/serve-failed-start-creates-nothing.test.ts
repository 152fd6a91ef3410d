import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runWrit } from '../support/cli.js';
import { requireDist } from '../support/server-process.js';

const dirs: string[] = [];
beforeAll(() => requireDist());
afterAll(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));

function newDataDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'writ-failed-start-'));
  dirs.push(d);
  return join(d, 'data');
}

describe('a writ serve that cannot start creates nothing in a new data directory', () => {
  it('on a port in use: no store, no keys, no governance credential', { timeout: 30_000 }, async () => {
    const taken: Server = createServer();
    await new Promise<void>((r) => taken.listen(4843, '127.0.0.1', () => r()));
    try {
      const data = newDataDir();
      const r = await runWrit(data, 'serve', '--port', '4843', '--no-upstream');
      expect(r.code).not.toBe(0);
      expect(r.output).toContain('EADDRINUSE');
      expect(r.output).not.toContain('created the governance admin credential');
      expect(existsSync(data) ? readdirSync(data) : []).toEqual([]);
    } finally {
      await new Promise((r) => taken.close(r));
    }
  });

  it('without a policy bundle: POLICY_UNAVAILABLE, and nothing made', { timeout: 30_000 }, async () => {
    const data = newDataDir();
    const before = process.env.WRIT_BUNDLE_DIR;
    process.env.WRIT_BUNDLE_DIR = join(data, '..', 'no-bundle-here');
    try {
      const r = await runWrit(data, 'serve', '--port', '4844', '--no-upstream');
      expect(r.code).toBe(1);
      expect(r.output).toContain('writ: POLICY_UNAVAILABLE');
      expect(existsSync(data) ? readdirSync(data) : []).toEqual([]);
    } finally {
      if (before === undefined) delete process.env.WRIT_BUNDLE_DIR;
      else process.env.WRIT_BUNDLE_DIR = before;
    }
  });
});
