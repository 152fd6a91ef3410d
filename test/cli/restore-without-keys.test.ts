import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { startHarness } from '../support/harness.js';
import { runWrit } from '../support/cli.js';
import { requireDist, startServerProcess } from '../support/server-process.js';

/**
 * README "Backup and restore": keys/ is copied with the store. A store restored without it (a new
 * machine) holds a checkpoint signed by a key its new keys/ lacks: `writ audit verify` cannot check it
 * and no checkpoint is built on it, so `writ serve` says so at start instead of failing every interval.
 */
const dirs: string[] = [];
afterAll(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));

describe('a SQLite store restored without its keys/', () => {
  it('`writ serve` warns at start, naming the key that signed the latest checkpoint; with the keys it does not', async () => {
    requireDist();
    const h = await startHarness();
    const aside = mkdtempSync(join(tmpdir(), 'writ-restore-no-keys-'));
    dirs.push(aside);
    try {
      await h.ctx.receipts.recordRejection({ principal: 'seo-agent-7', action: 'update_post', resource_key: 'wp:post:7', error: { code: 'FORBIDDEN', message: 'no' } });
      expect((await runWrit(h.dataDir, 'audit', 'checkpoint')).code).toBe(0);
      expect((await runWrit(h.dataDir, 'backup', join(aside, 'backup.sqlite'))).code).toBe(0);
      cpSync(join(h.dataDir, 'keys'), join(aside, 'with-keys', 'keys'), { recursive: true });
    } finally {
      await h.close();
    }
    const restored = join(aside, 'data');
    const r = await runWrit(restored, 'restore', join(aside, 'backup.sqlite'), '--trust-backup', '--reason', 'new machine');
    expect(r.code, r.output).toBe(0);
    // No key at all in keys/: nothing could be checked (NOT_FOUND, exit 3), not a verdict.
    const verify = await runWrit(restored, 'audit', 'verify');
    expect([verify.code, verify.output]).toEqual([3, expect.stringMatching(/NOT_FOUND .*nothing was checked: checkpoint 1: .*not among the published keys/)]);
    const server = await startServerProcess({ dataDir: restored });
    try {
      expect(server.log()).toMatch(/WARNING: the store's latest receipt checkpoint was signed by key \S+, which \S+\/keys does not hold \(the data directory's keys\/ was lost/);
    } finally {
      await server.stop();
    }
    // Restarted, its own key now in keys/, it still says so; and verify, with a key ring that lacks the signer, says BROKEN.
    const again = await startServerProcess({ dataDir: restored });
    try {
      expect(again.log()).toContain("WARNING: the store's latest receipt checkpoint was signed by key");
    } finally {
      await again.stop();
    }
    const broken = await runWrit(restored, 'audit', 'verify');
    expect([broken.code, broken.output]).toEqual([1, expect.stringMatching(/^BROKEN.*not among the published keys/)]);
    // Restored with the keys/ that signed it: verified, and nothing to warn about.
    const withKeys = join(aside, 'with-keys');
    expect((await runWrit(withKeys, 'restore', join(aside, 'backup.sqlite'), '--trust-backup', '--reason', 'with its keys')).code).toBe(0);
    expect((await runWrit(withKeys, 'audit', 'verify')).code).toBe(0);
    const keyed = await startServerProcess({ dataDir: withKeys });
    try {
      expect(keyed.log()).not.toContain('WARNING');
    } finally {
      await keyed.stop();
    }
  }, 120_000);
});
