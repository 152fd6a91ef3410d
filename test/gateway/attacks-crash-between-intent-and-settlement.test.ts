import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { WritApiError, WritClient, type Receipt } from '../../src/sdk/index.js';
import { startSampleUpstream } from '../../src/upstream/index.js';
import { startFlakyUpstream, type FlakyUpstream } from '../support/flaky-upstream.js';
import { fixtureKey } from '../support/harness.js';
import { startServerProcess, type ServerProcess } from '../support/server-process.js';
import { until } from '../support/wait.js';

/**
 * A real `writ serve` killed with SIGKILL while two writes are between their intent (durable: the write was
 * forwarded) and their settlement: one reaches the upstream in time after the crash (applied), one only
 * after its Writ-Deadline (refused). After the restart neither is forwarded again, whatever the caller
 * retries with (the same Idempotency-Key, or the same decision under a new key), and each receipt ends as
 * the upstream's own record says.
 */
const tmp = mkdtempSync(join(tmpdir(), 'writ-h124-crash-'));
let server: ServerProcess | undefined;
let flaky: FlakyUpstream | undefined;
let upstream: Awaited<ReturnType<typeof startSampleUpstream>> | undefined;
afterAll(async () => {
  await server?.stop();
  await flaky?.close();
  await upstream?.app.close();
  rmSync(tmp, { recursive: true, force: true });
});

const TIMEOUT_MS = 3000;
const waitFor = (what: string, ok: () => boolean | Promise<boolean>, ms = 20_000) => until(what, ok, ms);

describe('kill -9 between the intent and the settlement', () => {
  it('the receipts end as the upstream says (COMPLETED / FAILED), the chain verifies, and no write is forwarded twice', async () => {
    upstream = await startSampleUpstream({ port: 0, host: '127.0.0.1', dbFile: join(tmp, 'upstream.sqlite') });
    flaky = await startFlakyUpstream(upstream.url);
    const env = { WRIT_UPSTREAM_TIMEOUT_MS: String(TIMEOUT_MS) };
    server = await startServerProcess({ dataDir: join(tmp, 'writ'), upstreamUrl: flaky.url, env });
    const { dataDir } = server;
    const port = Number(new URL(server.url).port);
    const agent = new WritClient({ baseUrl: server.url, principal: 'seo-agent-7', privateJwk: fixtureKey('seo-agent-7') });
    const write = (resource: string) => ({ action: 'update_post', resource, fields: ['meta_description'], payload: { meta_description: `m ${resource}` }, expected_version: 0 });
    const dLate = await agent.decide({ action: 'update_post', resource: 'wp:post:71', environment: 'production', fields: ['meta_description'] });
    const dApplied = await agent.decide({ action: 'update_post', resource: 'wp:post:70', environment: 'production', fields: ['meta_description'] });

    // wp:post:71 reaches the upstream only after its deadline; wp:post:70 is held until Writ is dead.
    flaky.mode = 'slow-before';
    flaky.delayMs = TIMEOUT_MS + 2000;
    const late = agent.act({ decision: dLate, ...write('wp:post:71'), idempotencyKey: 'k-late' }).catch((e: unknown) => e);
    await waitFor('the late write at the proxy', () => flaky!.writesSeen === 1);
    flaky.mode = 'hold';
    const applied = agent.act({ decision: dApplied, ...write('wp:post:70'), idempotencyKey: 'k-applied' }).catch((e: unknown) => e);
    await waitFor('the held write at the proxy', () => flaky!.held === 1);
    await server.kill9();
    flaky.release();
    // Neither caller got a receipt: their connections died with the process.
    for (const outcome of await Promise.all([late, applied])) expect(outcome).toBeInstanceOf(Error);
    flaky.mode = 'pass';

    server = await startServerProcess({ dataDir, port, upstreamUrl: flaky.url, env });
    const again = new WritClient({ baseUrl: server.url, principal: 'seo-agent-7', privateJwk: fixtureKey('seo-agent-7') });
    const gov = new WritClient({ baseUrl: server.url, principal: 'governance', privateJwk: JSON.parse(readFileSync(join(dataDir, 'admin.jwk'), 'utf8')) });

    // The same decision under a new key: spent with the intent, before the crash.
    const replayed = await again.act({ decision: dApplied, ...write('wp:post:70'), idempotencyKey: 'k-other' }).catch((e: unknown) => e);
    expect(replayed).toBeInstanceOf(WritApiError);
    expect((replayed as WritApiError).code).toBe('DECISION_REPLAYED');

    // The same key: the first attempt's receipt (PENDING until the sweep settles it), nothing forwarded.
    const retried = await again.act({ decision: dApplied, ...write('wp:post:70'), idempotencyKey: 'k-applied' }).catch((e: unknown) => e);
    const ids: string[] = [];
    if (retried instanceof Error) throw retried;
    ids.push((retried as Receipt).receipt_id);

    // The sweep settles both once older than twice the timeout, from the upstream's record.
    const pendingCount = async () => (await gov.request<{ receipts: unknown[] }>('GET', '/v1/receipts?status=PENDING')).receipts.length;
    await waitFor('the sweep to settle both', async () => (await pendingCount()) === 0, 40_000);
    const all = (await gov.request<{ receipts: { receipt_id: string; resource_key: string; status: string; final_version: number | null }[] }>('GET', '/v1/receipts?principal=seo-agent-7')).receipts;
    const byResource = Object.fromEntries(all.filter((r) => r.status !== 'REJECTED').map((r) => [r.resource_key, r]));
    expect(byResource['wp:post:70']).toMatchObject({ receipt_id: ids[0], status: 'COMPLETED', final_version: 1 });
    expect(byResource['wp:post:71']).toMatchObject({ status: 'FAILED' });
    // After settlement the key still answers the first receipt.
    const settled = await again.act({ decision: dApplied, ...write('wp:post:70'), idempotencyKey: 'k-applied' });
    expect([settled.receipt_id, settled.status]).toEqual([ids[0], 'COMPLETED']);
    const lateAgain = await again.act({ decision: dLate, ...write('wp:post:71'), idempotencyKey: 'k-late' }).catch((e: unknown) => e);
    expect(lateAgain).toBeInstanceOf(WritApiError);

    // Each write was forwarded once, and only the one within its deadline was applied.
    expect(flaky.writesSeen).toBe(2);
    const writes = (await (await fetch(`${upstream.url}/writes`)).json()) as { total: number; per_post: Record<string, number> };
    expect(writes.per_post).toEqual({ '70': 1 });
    const verify = await gov.request<{ ok: boolean }>('GET', '/v1/audit/verify');
    expect(verify.ok).toBe(true);
  }, 120_000);
});
