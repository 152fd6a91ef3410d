import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort, requireDist } from '../support/server-process.js';
import { runWrit } from '../support/cli.js';

const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

/** Runs `writ serve` with `args(takenPort)` while another socket holds that port: it must fail at once, not hang. */
async function serveOnTakenPort(args: (taken: number) => Promise<string[]>): Promise<void> {
  requireDist();
  const taken: Server = createServer();
  await new Promise<void>((r) => taken.listen(0, '127.0.0.1', () => r()));
  const port = (taken.address() as { port: number }).port;
  const dataDir = mkdtempSync(join(tmpdir(), 'writ-port-'));
  dirs.push(dataDir);
  try {
    const started = Date.now();
    const r = await runWrit(dataDir, 'serve', ...(await args(port)));
    expect(r.code).not.toBe(0);
    expect(r.output).toContain('EADDRINUSE');
    // One line that says which port and what to do, no stack trace.
    expect(r.output).toMatch(/^writ: port \d+ (for the sample upstream )?on 127\.0\.0\.1 is in use \(EADDRINUSE\): pass --(upstream-)?port N/m);
    expect(r.output).not.toMatch(/^\s+at /m);
    expect(r.output).not.toContain('listening on');
    expect(Date.now() - started).toBeLessThan(20_000);
  } finally {
    await new Promise((r) => taken.close(r));
  }
}

describe('writ serve on a port already taken', () => {
  it('exits non-zero at once with EADDRINUSE (the sample upstream it had started must not keep it alive)', () =>
    serveOnTakenPort(async (port) => ['--port', String(port), '--upstream-port', String(await freePort())]), 30_000);

  it('and the same when the sample upstream cannot listen on --upstream-port', () =>
    serveOnTakenPort(async (port) => ['--port', String(await freePort()), '--upstream-port', String(port), '--graph', 'graph/example.yaml']), 30_000);
});
