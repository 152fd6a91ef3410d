import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WritApiError, type LeaseHandle } from '../../src/sdk/index.js';
import { startServerProcess, type ServerProcess } from '../support/server-process.js';
import { clientFor, leasesOn } from './sdk-support.js';
import { typeErrors } from './type-check.js';

/** renewLease and releaseLease over HTTP, against the lease stream's renew and release. */
let server: ServerProcess;
beforeAll(async () => {
  server = await startServerProcess();
});
afterAll(async () => server?.stop());

const refusal = (p: Promise<unknown>) => p.then(() => null, (e: unknown) => e);

describe('renewLease and releaseLease', () => {
  it('renewLease(lease, 0) is refused as stream.renew(lease, 0) is, and the lease keeps its expiry (it was renewed with its own TTL)', async () => {
    const { client } = clientFor(server, 'seo-agent-7');
    const resource = 'wp:post:7401';
    const decision = await client.decide({ action: 'update_post', resource, environment: 'production', fields: ['title'] });
    expect(decision.allow, decision.reasons.join('; ')).toBe(true);
    const lease = await client.acquireLease([decision], { ttlMs: 5_000 });
    const stream = await client.openLeaseStream();
    try {
      const before = (await leasesOn(client, lease.keys[0]!))[0]!.renewTime;
      const overHttp = await refusal(client.renewLease(lease, 0));
      const overStream = await refusal(stream.renew(lease, 0));
      expect(overStream).toBeInstanceOf(WritApiError);
      expect(overHttp).toBeInstanceOf(WritApiError);
      expect((overHttp as WritApiError).code).toBe((overStream as WritApiError).code);
      expect((overHttp as WritApiError).status).toBe((overStream as WritApiError).status);
      expect(overHttp).toMatchObject({ code: 'MALFORMED_REQUEST', detail: expect.stringContaining('ttl_ms') });
      expect((await leasesOn(client, lease.keys[0]!))[0]!.renewTime).toBe(before);
    } finally {
      await stream.close();
      await client.releaseLease(lease);
    }
  });

  it('take a LeaseHandle ({lease_id, token}: what an agent persisted across a crash) and answer the release\'s type', async () => {
    const { client } = clientFor(server, 'seo-agent-7');
    const resource = 'wp:post:7402';
    const decision = await client.decide({ action: 'update_post', resource, environment: 'production', fields: ['title'] });
    const { lease_id, token, epochs } = await client.acquireLease([decision], { ttlMs: 5_000 });
    const persisted: LeaseHandle = JSON.parse(JSON.stringify({ lease_id, token })) as LeaseHandle;
    const renewed = await client.renewLease(persisted, 6_000);
    expect(renewed.lease_id).toBe(lease_id);
    const released = await client.releaseLease(persisted);
    expect(released).toEqual({ lease_id, epochs });
    expect((await leasesOn(client, `${resource}#title`))[0]).toMatchObject({ state: 'FREE' });

    // What an agent's code sees: no cast needed, and the release is a LeaseRelease.
    expect(typeErrors({
      'lease-handle': [
        "import type { LeaseHandle, LeaseRelease, LeaseRenewal, WritClient } from '@writ/sdk';",
        'declare const writ: WritClient;',
        'const handle: LeaseHandle = { lease_id: "l", token: "t" };',
        'const renewed: LeaseRenewal = await writ.renewLease(handle, 1_000);',
        'const released: LeaseRelease = await writ.releaseLease(handle);',
        'export const epochs: Record<string, number> = { ...renewed.epochs, ...released.epochs };',
      ].join('\n'),
    })).toEqual([]);
  });
});
