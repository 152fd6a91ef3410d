import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CLI, spawnListening } from '../../scripts/server-process.js';
import { freePort, requireDist, startServerProcess } from '../support/server-process.js';

/**
 * `writ serve` says where the gateway forwards writes. With --no-upstream and no WRIT_UPSTREAM_URL they
 * go to the default http://127.0.0.1:4100, which on a shared host may be anyone's (another Writ's
 * sample upstream): that start warns.
 */
const cleanups: (() => Promise<void> | void)[] = [];
afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

describe('`writ serve` names where writes go', () => {
  it('warns when --no-upstream leaves the default upstream URL; names the sample upstream and a configured one', async () => {
    requireDist();
    const dataDir = mkdtempSync(join(tmpdir(), 'writ-upstream-line-'));
    cleanups.push(() => rmSync(dataDir, { recursive: true, force: true }));
    const env = { ...process.env };
    delete env.WRIT_UPSTREAM_URL;
    const bare = await spawnListening('writ serve', [CLI, 'serve', '--data-dir', dataDir, '--port', String(await freePort()), '--no-upstream'], env);
    bare.proc.kill('SIGTERM');
    await bare.exited;
    expect(bare.output()).toContain('[writ] WARNING: --no-upstream and WRIT_UPSTREAM_URL is not set: writes go to the default http://127.0.0.1:4100, whatever answers there (set WRIT_UPSTREAM_URL to your upstream)');
    expect(bare.output()).toContain('[writ] writes to wp:post:* in production go to http://127.0.0.1:4100');

    const sample = await startServerProcess();
    cleanups.push(async () => {
      await sample.stop();
      rmSync(sample.dataDir, { recursive: true, force: true });
    });
    expect(sample.log()).toContain(`[writ] writes to wp:post:* in production go to ${sample.upstreamUrl}`);
    expect(sample.log()).not.toContain('WARNING');
  }, 60_000);
});
