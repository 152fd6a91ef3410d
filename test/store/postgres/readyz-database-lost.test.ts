import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/config/index.js';
import { buildApp } from '../../../src/http/index.js';
import { openWrit } from '../../../src/service/index.js';
import { BUNDLE_DIR, REPO } from '../../support/harness.js';
import { createTestDatabase } from '../conformance/engines.js';

/** A TCP proxy to the local PostgreSQL that can be cut: every connection through it ends, and new ones are refused. */
async function cuttableProxy(port = 0): Promise<{ port: number; cut(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = connect(5432, '127.0.0.1');
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => undefined);
    }
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((r) => server.listen(port, '127.0.0.1', r));
  return {
    port: (server.address() as { port: number }).port,
    async cut() {
      const closed = new Promise<void>((r) => server.close(() => r()));
      for (const s of sockets) s.destroy();
      await closed;
    },
  };
}

const cleanups: (() => Promise<void> | void)[] = [];
afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

describe('readiness on PostgreSQL', () => {
  it('answers 503 with a code naming the cause once the database is unreachable, and logs the loss and the recovery at warn', { timeout: 60_000 }, async () => {
    const db = await createTestDatabase('writ_readyz');
    cleanups.push(db.drop);
    const proxy = await cuttableProxy();
    let cut = false;
    cleanups.push(async () => { if (!cut) await proxy.cut(); });
    const dataDir = mkdtempSync(join(tmpdir(), 'writ-readyz-'));
    cleanups.push(() => rmSync(dataDir, { recursive: true, force: true }));
    const url = new URL(db.url);
    url.port = String(proxy.port);
    const config = loadConfig({ dataDir, bundleDir: BUNDLE_DIR, policiesDir: join(REPO, 'policies'), databaseUrl: url.toString() }, {});
    const w = await openWrit(config);
    cleanups.push(() => w.close());
    const lines: { level: number; msg: string }[] = [];
    const app = await buildApp(w.ctx, { logger: { level: 'warn', stream: { write: (line: string) => lines.push(JSON.parse(line)) } } as never });
    cleanups.push(() => app.close());

    expect((await app.inject({ method: 'GET', url: '/readyz' })).statusCode).toBe(200);

    await proxy.cut();
    cut = true;
    const started = performance.now();
    const res = await app.inject({ method: 'GET', url: '/readyz' });
    expect(performance.now() - started).toBeLessThan(4_000);
    expect(res.statusCode).toBe(503);
    const body = JSON.parse(res.body);
    expect(body).toMatchObject({ status: 'not ready', code: 'OVERLOADED' });
    expect(body.error).toMatch(/database/);
    // Asked again while still down: said once, not at every probe.
    expect((await app.inject({ method: 'GET', url: '/readyz' })).statusCode).toBe(503);
    const warned = lines.filter((l) => l.level === 40);
    expect(warned).toHaveLength(1);
    expect(warned[0]!.msg).toMatch(/not ready/);

    // The database is back (on the same address): ready again, and said so.
    const back = await cuttableProxy(proxy.port);
    cleanups.push(() => back.cut());
    expect((await app.inject({ method: 'GET', url: '/readyz' })).statusCode).toBe(200);
    expect(lines.filter((l) => l.level === 40).map((l) => l.msg)).toEqual([warned[0]!.msg, expect.stringMatching(/ready again/)]);
  });
});
