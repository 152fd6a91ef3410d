import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { JWK } from 'jose';
import { loadConfig } from '../config/index.js';
import { GOVERNANCE_ID } from '../graph/model.js';
import { UpstreamRouter } from '../gateway/index.js';
import { buildApp } from '../http/index.js';
import { WritClient } from '../sdk/index.js';
import { applyManifest, openWrit, readAdminCredential, readManifest } from '../service/index.js';
import { startSampleUpstream } from '../upstream/index.js';

/** A throw-away Writ + sample upstream on free loopback ports, with the example graph, for the demo. */
export interface Stage {
  url: string;
  upstreamUrl: string;
  dataDir: string;
  agent(principal: string): WritClient;
  readPost(id: number): Promise<{ revision: number; fields: Record<string, unknown>; field_revisions?: Record<string, number> }>;
  close(): Promise<void>;
}

export async function openStage(repoRoot: string): Promise<Stage> {
  const dataDir = mkdtempSync(join(tmpdir(), 'writ-demo-'));
  const upstream = await startSampleUpstream({ port: 0, host: '127.0.0.1', dbFile: join(dataDir, 'upstream.sqlite') });
  const config = loadConfig({ dataDir, bundleDir: resolve(repoRoot, 'build/policy'), policiesDir: resolve(repoRoot, 'policies') }, {});
  const w = await openWrit(config, { upstreams: UpstreamRouter.fromConfig([{ pattern: 'wp:post:*', url: upstream.url, timeoutMs: 5000, environment: 'production' }]) });
  const { manifest, baseDir } = readManifest(resolve(repoRoot, 'graph/example.yaml'));
  await applyManifest(w.ctx, GOVERNANCE_ID, manifest, baseDir);
  const app = await buildApp(w.ctx);
  const url = await app.listen({ port: 0, host: '127.0.0.1' });
  const keyOf = (principal: string): JWK =>
    principal === GOVERNANCE_ID ? (readAdminCredential(dataDir).privateJwk as JWK) : (JSON.parse(readFileSync(resolve(repoRoot, 'fixtures/keys', `${principal}.jwk`), 'utf8')) as JWK);
  return {
    url,
    upstreamUrl: upstream.url,
    dataDir,
    agent: (principal) => new WritClient({ baseUrl: url, principal, privateJwk: keyOf(principal) }),
    readPost: async (id) => {
      const res = await fetch(`${upstream.url}/posts/${id}`);
      return res.status === 404 ? { revision: 0, fields: {} } : ((await res.json()) as Awaited<ReturnType<Stage['readPost']>>);
    },
    async close() {
      await app.close();
      await upstream.app.close();
      await w.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
