import { rmSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { WritClient } from '../../src/sdk/index.js';
import { fixtureKey } from '../support/harness.js';
import { startServerProcess, type ServerProcess } from '../support/server-process.js';

let server: ServerProcess | undefined;
afterAll(async () => {
  await server?.stop();
  if (server) rmSync(server.dataDir, { recursive: true, force: true });
});

describe('writ serve --upstream-port N', () => {
  it('routes wp:post:* to the sample upstream it starts on that port when WRIT_UPSTREAM_URL is not set', async () => {
    // WRIT_UPSTREAM_URL empty: as on a shell that never set it (startServerProcess sets it otherwise).
    server = await startServerProcess({ env: { WRIT_UPSTREAM_URL: '' } });
    const seo = new WritClient({ baseUrl: server.url, principal: 'seo-agent-7', privateJwk: fixtureKey('seo-agent-7') });
    const decision = await seo.decide({ action: 'update_post', resource: 'wp:post:31', environment: 'production', fields: ['meta_description'] });
    const receipt = await seo.act({ decision, action: 'update_post', resource: 'wp:post:31', fields: ['meta_description'], payload: { meta_description: 'routed' }, expected_version: 0 });
    expect(receipt.status).toBe('COMPLETED');
    // The write is in that upstream (its port is the one --upstream-port named).
    const post = (await (await fetch(`${server.upstreamUrl}/posts/31`)).json()) as { fields: Record<string, unknown> };
    expect(post.fields.meta_description).toBe('routed');
  }, 60_000);
});
