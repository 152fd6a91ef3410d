/**
 * `writ serve` as a real process, configured through WRIT_DECISION_LOG_*: events wait in the buffer
 * (a long flush interval) and a SIGTERM sends them to the collector before the process exits.
 */
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gunzipSync } from 'node:zlib';
import { afterAll, describe, expect, it } from 'vitest';
import { WritClient } from '../../src/sdk/index.js';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fixtureKey, REPO } from '../support/harness.js';
import { startServerProcess, type ServerProcess } from '../support/server-process.js';

const received: { decision_id: string; labels: Record<string, string> }[] = [];
const collector = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    received.push(...(JSON.parse(gunzipSync(Buffer.concat(chunks)).toString('utf8')) as typeof received));
    res.writeHead(204).end();
  });
});

let server: ServerProcess | undefined;
afterAll(async () => {
  await server?.stop();
  await new Promise<void>((r) => collector.close(() => r()));
});

describe('decision log at shutdown', () => {
  it('a SIGTERM flushes the buffered events to the collector before the process exits', async () => {
    collector.listen(0, '127.0.0.1');
    await once(collector, 'listening');
    const { port } = collector.address() as AddressInfo;
    server = await startServerProcess({
      env: { WRIT_DECISION_LOG_URL: `http://127.0.0.1:${port}/logs`, WRIT_DECISION_LOG_FLUSH_MS: '600000', WRIT_DECISION_LOG_LABELS: 'deployment=e2e' },
    });
    const agent = new WritClient({ baseUrl: server.url, principal: 'seo-agent-7', privateJwk: fixtureKey('seo-agent-7') });
    const ids: string[] = [];
    for (const fields of [['title'], ['body'], ['meta_description']]) ids.push((await agent.decide({ action: 'update_post', resource: 'wp:post:9', environment: 'production', fields })).decision_id);
    expect(received).toEqual([]);
    await server.stop();
    server = undefined;
    expect(received.map((e) => e.decision_id)).toEqual(ids);
    const { version } = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { version: string };
    expect(received[0]!.labels).toMatchObject({ app: 'writ', deployment: 'e2e', version });
  });
});
