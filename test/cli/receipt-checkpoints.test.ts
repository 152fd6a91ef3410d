import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { WritClient } from '../../src/sdk/index.js';
import { startHarness, REPO, type Harness } from '../support/harness.js';
import { requireDist, startServerProcess, type ServerProcess } from '../support/server-process.js';
import { runWrit } from '../support/cli.js';

/**
 * The signed checkpoints over the receipt chain heads that bound how much of the log a rewrite can hide
 * (README "Receipts and audit"): `writ audit checkpoint` takes one on demand, and every `writ serve`
 * takes one each WRIT_RECEIPT_CHECKPOINT_INTERVAL_MS once a chain moved.
 */
const cleanups: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const verifyJson = async (dataDir: string) => JSON.parse((await runWrit(dataDir, 'audit', 'verify', '--json')).stdout) as { ok: boolean; checkpoint?: { seq: number; chains: number } };

describe('receipt checkpoints', () => {
  it('`writ audit checkpoint` signs one over the chain heads when a chain moved, and none when nothing did', async () => {
    requireDist();
    const h: Harness = await startHarness();
    cleanups.push(() => h.close());
    await h.ctx.receipts.recordRejection({ principal: 'seo-agent-7', action: 'update_post', resource_key: 'wp:post:7', error: { code: 'FORBIDDEN', message: 'no' } });
    expect((await verifyJson(h.dataDir)).checkpoint).toBeUndefined();
    const first = await runWrit(h.dataDir, 'audit', 'checkpoint', '--json');
    expect([first.code, JSON.parse(first.stdout)]).toEqual([0, { checkpoint: expect.objectContaining({ seq: 1, chains: 1 }) }]);
    const again = await runWrit(h.dataDir, 'audit', 'checkpoint');
    expect(again.stdout).toContain('no chain nor the graph log moved since the latest checkpoint: none taken');
    expect(await verifyJson(h.dataDir)).toMatchObject({ ok: true, checkpoint: { seq: 1, chains: 1 } });
  }, 60_000);

  it('`writ serve` takes one by itself after a write, every WRIT_RECEIPT_CHECKPOINT_INTERVAL_MS', async () => {
    requireDist();
    const server: ServerProcess = await startServerProcess({ env: { WRIT_RECEIPT_CHECKPOINT_INTERVAL_MS: '300' } });
    cleanups.push(() => server.stop());
    const agent = new WritClient({ baseUrl: server.url, principal: 'seo-agent-7', privateJwk: JSON.parse(readFileSync(join(REPO, 'fixtures/keys/seo-agent-7.jwk'), 'utf8')) });
    const decision = await agent.decide({ action: 'update_post', resource: 'wp:post:77', environment: 'production', fields: ['meta_description'] });
    const receipt = await agent.act({ decision, action: 'update_post', resource: 'wp:post:77', fields: ['meta_description'], payload: { meta_description: 'm' }, expected_version: 0 });
    expect(receipt.status).toBe('COMPLETED');
    await expect.poll(async () => (await verifyJson(server.dataDir)).checkpoint?.chains ?? 0, { timeout: 15_000, interval: 300 }).toBeGreaterThanOrEqual(1);
    expect(await verifyJson(server.dataDir)).toMatchObject({ ok: true });
  }, 60_000);
});
