import { afterAll, describe, expect, it } from 'vitest';
import { WritClient, WritApiError } from '../../src/sdk/index.js';
import { fixtureKey } from '../support/harness.js';
import { startServerProcess, type ServerProcess } from '../support/server-process.js';

let server: ServerProcess | undefined;
afterAll(async () => server?.stop());

const client = (url: string, principal = 'editor-alice') => new WritClient({ baseUrl: url, principal, privateJwk: fixtureKey(principal) });

async function leasedTitleWrite(c: WritClient, resource: string, title: string, expected: number) {
  const d = await c.decide({ action: 'update_post', resource, environment: 'production', fields: ['title'] });
  return c.withLease([d], (scope) => scope.act({ decision: d, action: 'update_post', resource, fields: ['title'], payload: { title }, expected_version: expected }), { ttlMs: 5000 });
}

describe('kill -9 in the middle of a stream of writes', () => {
  it('after restart every acknowledged write has a COMPLETED receipt, PENDING ones are reconciled, the chain verifies, epochs keep growing', async () => {
    server = await startServerProcess({ env: { WRIT_UPSTREAM_TIMEOUT_MS: '1000' } });
    const { dataDir } = server;
    const port = Number(new URL(server.url).port);
    const upstreamPort = Number(new URL(server.upstreamUrl).port);
    const c = client(server.url);
    const acknowledged: string[] = [];
    const versions = new Map<string, number>();
    let lastEpoch = 0;
    // A stream of writes over a few posts; acknowledge each as it returns.
    for (let i = 0; i < 12; i++) {
      const resource = `wp:post:${900 + (i % 3)}`;
      const receipt = await leasedTitleWrite(c, resource, `t${i}`, versions.get(resource) ?? 0);
      expect(receipt.status).toBe('COMPLETED');
      acknowledged.push(receipt.receipt_id);
      versions.set(resource, receipt.final_version!);
      if (resource === 'wp:post:900') lastEpoch = Math.max(lastEpoch, receipt.lease_epoch as number);
    }
    // Several writes in flight when the process dies.
    const inflight = [0, 1, 2].map((k) => leasedTitleWrite(c, `wp:post:${900 + k}`, `crash${k}`, versions.get(`wp:post:${900 + k}`)!).then(
      (r) => ({ ok: true as const, r }),
      (e: unknown) => ({ ok: false as const, e }),
    ));
    await new Promise((r) => setTimeout(r, 15));
    await server.kill9();
    server = await startServerProcess({ dataDir, port, upstreamPort, env: { WRIT_UPSTREAM_TIMEOUT_MS: '1000' } });
    // Settled only now: the SDK waits out a restart while it takes a lease (refused connections are retried
    // within the deadline), so a write whose lease was not yet taken goes on against the restarted Writ.
    const outcomes = await Promise.all(inflight);
    for (const o of outcomes) if (o.ok && o.r.status === 'COMPLETED') acknowledged.push(o.r.receipt_id);
    const gov = new WritClient({ baseUrl: server.url, principal: 'governance', privateJwk: JSON.parse((await import('node:fs')).readFileSync(`${dataDir}/admin.jwk`, 'utf8')) });
    for (const id of acknowledged) {
      const { receipt } = await gov.request<{ receipt: { status: string } }>('GET', `/v1/receipts/${id}`);
      expect(receipt.status, id).toBe('COMPLETED');
    }
    // Writes in flight at the crash are settled by the background sweep once older than the upstream timeout.
    let pending = await gov.request<{ receipts: unknown[] }>('GET', '/v1/receipts?status=PENDING');
    for (let i = 0; i < 60 && pending.receipts.length > 0; i++) {
      await new Promise((r) => setTimeout(r, 500));
      pending = await gov.request<{ receipts: unknown[] }>('GET', '/v1/receipts?status=PENDING');
    }
    expect(pending.receipts).toEqual([]);
    const verify = await gov.request<{ ok: boolean; entries: number }>('GET', '/v1/audit/verify');
    expect(verify.ok).toBe(true);
    // Epochs continue after the crash: the next lease on a post is above anything issued before.
    const before = await gov.request<{ leases: { key: string; epoch: number }[] }>('GET', '/v1/leases?resource=wp%3Apost%3A900%23title');
    const highWater = before.leases[0]!.epoch;
    expect(highWater).toBeGreaterThanOrEqual(lastEpoch);
    const post = (await (await fetch(`${server.upstreamUrl}/posts/900`)).json()) as { revision: number };
    const after = await leasedTitleWrite(client(server.url), 'wp:post:900', 'after restart', post.revision).catch((e: WritApiError) => {
      throw new Error(`${e.code}: ${e.detail}`);
    });
    expect(after.status).toBe('COMPLETED');
    expect(after.lease_epoch).toBe(highWater + 1);
  });
});
