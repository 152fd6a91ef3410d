import { rmSync } from 'node:fs';
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LeaseExpiredError, LeaseStream, LeaseStreamClosedError } from '../../src/sdk/index.js';
import { createTestDatabase } from '../store/conformance/engines.js';
import { fixtureKey } from '../support/harness.js';
import { startServerProcess, type ServerProcess } from '../support/server-process.js';
import { clientFor, leasesOn, sleep } from './sdk-support.js';

/**
 * A lease stream cut in the middle of an acquisition: the acquire was sent, and the connection ended
 * before its answer was read. The SDK's LeaseStream gives every acquisition its own lease token (as
 * acquireLease does), and its LeaseStreamClosedError carries it: asked again with it, over a new
 * stream or HTTP, Writ answers with the lease granted (replayed), never a second one, nor a wait
 * behind it. Against a real `writ serve`, on each engine, through a TCP proxy that cuts the connection.
 */
const ENGINES = [
  { name: 'SQLite', database: async () => null },
  { name: 'PostgreSQL', database: async () => createTestDatabase('writ_stream_lost') },
];
const PRINCIPAL = 'seo-agent-7';

/**
 * A TCP proxy to `target`. `loseNextAnswer()`: the next WebSocket text frame from Writ (an answer, not a
 * ping) is not delivered, and the connection is cut both ways. `cut()`: cuts every connection now.
 */
async function cuttingProxy(target: string): Promise<{ url: string; loseNextAnswer(): void; cut(): void; lost(): number; close(): Promise<void> }> {
  const { hostname, port } = new URL(target);
  const pairs = new Set<[Socket, Socket]>();
  let armed = false;
  let lost = 0;
  const server: Server = createServer((client) => {
    const upstream = createConnection({ host: hostname, port: Number(port) });
    const pair: [Socket, Socket] = [client, upstream];
    pairs.add(pair);
    const end = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('data', (b) => upstream.write(b));
    upstream.on('data', (b: Buffer) => {
      // 0x81: a final text frame, unmasked from the server: an answer.
      if (armed && b[0] === 0x81) {
        armed = false;
        lost++;
        end();
        return;
      }
      client.write(b);
    });
    client.on('close', end).on('error', end);
    upstream.on('close', end).on('error', end);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    loseNextAnswer: () => (armed = true),
    cut: () => {
      for (const [a, b] of pairs) (a.destroy(), b.destroy());
      pairs.clear();
    },
    lost: () => lost,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

describe.each(ENGINES)('a lease stream cut mid-acquire, on $name', ({ database }) => {
  let server: ServerProcess;
  let drop: (() => Promise<void>) | undefined;
  let proxy: Awaited<ReturnType<typeof cuttingProxy>>;
  beforeAll(async () => {
    const db = await database();
    drop = db?.drop;
    server = await startServerProcess(db ? { env: { WRIT_DATABASE_URL: db.url } } : {});
    proxy = await cuttingProxy(server.url);
  });
  afterAll(async () => {
    proxy?.cut();
    await proxy?.close();
    await server?.stop();
    if (server) rmSync(server.dataDir, { recursive: true, force: true });
    await drop?.();
  });

  const open = (baseUrl: string) => LeaseStream.open({ baseUrl, principal: PRINCIPAL, privateJwk: fixtureKey(PRINCIPAL) });

  it('the answer lost after the grant: LeaseStreamClosedError carries the token; asked again with it on a new stream and over HTTP, the same lease, replayed', async () => {
    const { client } = clientFor(server, PRINCIPAL);
    const key = 'wp:post:911#title';
    const decision = await client.decide({ action: 'update_post', resource: 'wp:post:911', environment: 'production', fields: ['title'] });
    const cut = await open(proxy.url);
    proxy.loseNextAnswer();
    const lost = await cut.acquire([decision.token!], { ttlMs: 60_000 }).then(() => null, (e: unknown) => e);
    expect(proxy.lost()).toBe(1);
    expect(lost).toBeInstanceOf(LeaseStreamClosedError);
    const { token, requestId } = lost as LeaseStreamClosedError;
    expect(requestId).toBe(1);
    expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect((lost as Error).message).not.toContain(token!);
    // Granted, with nobody told: the key is held by the lease of that token.
    const [held] = await leasesOn(client, key);
    expect(held).toMatchObject({ state: 'HELD', holderIdentity: PRINCIPAL, epoch: 1 });

    const again = await open(server.url);
    try {
      const started = Date.now();
      const replayed = await again.acquire([decision.token!], { ttlMs: 60_000, token: token! });
      expect(Date.now() - started).toBeLessThan(10_000); // not after the 60 s TTL
      expect(replayed).toMatchObject({ lease_id: held!.leaseId, token, replayed: true, epochs: { [key]: 1 }, holder: PRINCIPAL });
      expect(await client.acquireLease([decision], { token: token! })).toMatchObject({ lease_id: held!.leaseId, replayed: true, epochs: { [key]: 1 } });
      await again.release(replayed);
      // Ended now: the token is spent; a new acquisition takes a new token (one a new call makes itself), one epoch up.
      await expect(again.acquire([decision.token!], { token: token! })).rejects.toBeInstanceOf(LeaseExpiredError);
      const next = await again.acquire([decision.token!]);
      expect(next.token).not.toBe(token);
      expect(next).toMatchObject({ replayed: false, epochs: { [key]: 2 } });
      await again.release(next);
    } finally {
      await again.close();
    }
  });

  it('cut while the acquisition waits in the queue: asked again over HTTP with its token, one lease, taken once, whichever of the two Writ serves first', async () => {
    const { client } = clientFor(server, PRINCIPAL);
    const key = 'wp:post:912#title';
    const decision = await client.decide({ action: 'update_post', resource: 'wp:post:912', environment: 'production', fields: ['title'] });
    const blocker = await client.acquireLease([decision], { ttlMs: 30_000 });
    const cut = await open(proxy.url);
    const pending = cut.acquire([decision.token!], { ttlMs: 60_000, waitMs: 20_000 }).then(() => null, (e: unknown) => e);
    // Queued in Writ (one waiter on the key), then the connection is cut; Writ's acquisition goes on waiting.
    const queued = async () => (await client.request<{ queues: { key: string }[] }>('GET', '/v1/leases/queues')).queues.some((q) => q.key === key);
    for (const until = Date.now() + 10_000; !(await queued()); ) {
      if (Date.now() > until) throw new Error('the stream acquisition never queued');
      await sleep(20);
    }
    proxy.cut();
    const lost = await pending;
    expect(lost).toBeInstanceOf(LeaseStreamClosedError);
    const { token } = lost as LeaseStreamClosedError;
    const retry = client.acquireLease([decision], { ttlMs: 60_000, waitMs: 20_000, token: token! });
    await sleep(200);
    await client.releaseLease(blocker);
    const lease = await retry;
    expect(lease).toMatchObject({ token, epochs: { [key]: 2 } });
    // Whichever was served first, the other was answered with that lease: the key went to it once.
    await sleep(1_500);
    const [row] = await leasesOn(client, key);
    expect(row).toMatchObject({ state: 'HELD', leaseId: lease.lease_id, epoch: 2 });
    await client.releaseLease(lease);
    expect((await leasesOn(client, key))[0]).toMatchObject({ state: 'FREE', epoch: 2 });
  });
});
