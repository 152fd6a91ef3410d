import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort, requireDist } from '../support/server-process.js';
import { runWrit } from '../support/cli.js';

const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

describe('writ serve on a port already taken', () => {
  it('exits non-zero at once with EADDRINUSE (the sample upstream it had started must not keep it alive)', async () => {
    requireDist();
    const taken: Server = createServer();
    await new Promise<void>((r) => taken.listen(0, '127.0.0.1', () => r()));
    const port = (taken.address() as { port: number }).port;
    const dataDir = mkdtempSync(join(tmpdir(), 'writ-port-'));
    dirs.push(dataDir);
    try {
      const started = Date.now();
      const r = await runWrit(dataDir, 'serve', '--port', String(port), '--upstream-port', String(await freePort()));
      expect(r.code).not.toBe(0);
      expect(r.output).toContain('EADDRINUSE');
      expect(r.output).not.toContain('listening on');
      expect(Date.now() - started).toBeLessThan(20_000);
    } finally {
      await new Promise((r) => taken.close(r));
    }
  }, 30_000);

  it('and the same when the sample upstream cannot listen on --upstream-port', async () => {
    requireDist();
    const taken: Server = createServer();
    await new Promise<void>((r) => taken.listen(0, '127.0.0.1', () => r()));
    const port = (taken.address() as { port: number }).port;
    const dataDir = mkdtempSync(join(tmpdir(), 'writ-port-'));
    dirs.push(dataDir);
    try {
      const started = Date.now();
      const r = await runWrit(dataDir, 'serve', '--port', String(await freePort()), '--upstream-port', String(port), '--graph', 'graph/example.yaml');
      expect(r.code).not.toBe(0);
      expect(r.output).toContain('EADDRINUSE');
      expect(r.output).not.toContain('listening on');
      expect(Date.now() - started).toBeLessThan(20_000);
    } finally {
      await new Promise((r) => taken.close(r));
    }
  }, 30_000);
});
