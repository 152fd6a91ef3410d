import { rmSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LeaseExpiredError } from '../../src/sdk/index.js';
import { startServerProcess, type ServerProcess } from '../support/server-process.js';
import { aborted, clientFor, sleep } from './sdk-support.js';

// A Writ that is paused (SIGSTOP) or cut off by a partition that drops packets still has its
// connections accepted by the kernel and answers nothing: a renewal or a release sent to it hangs
// until fetch gives up (minutes). Its own server, since it is paused.
let server: ServerProcess;
beforeAll(async () => {
  server = await startServerProcess();
});
afterAll(async () => {
  server?.proc.kill('SIGCONT');
  await server?.kill9(); // already exited, unless the last test failed
  if (server) rmSync(server.dataDir, { recursive: true, force: true });
});

describe('withLease when Writ stops answering (paused, not down)', () => {
  it('aborts the task once the lease would have expired and then returns within about a TTL, not when Writ answers again', { timeout: 40_000 }, async () => {
    const { client } = clientFor(server, 'seo-agent-7');
    const decision = await client.decide({ action: 'update_post', resource: 'wp:post:601', environment: 'production', fields: ['title'] });
    let abortedAt = 0;
    const resume = setTimeout(() => server.proc.kill('SIGCONT'), 20_000);
    try {
      const outcome = client.withLease([decision], async ({ signal }) => {
        server.proc.kill('SIGSTOP');
        const reason = await aborted(signal, 5_000);
        abortedAt = Date.now();
        return reason;
      }, { ttlMs: 1_000 });
      const reason = await outcome;
      const returnedAfterAbortMs = Date.now() - abortedAt;
      expect(reason).toBeInstanceOf(LeaseExpiredError);
      // The release is given up when the lease would have lapsed anyway (with a 1 s floor): well under the 20 s pause.
      expect(returnedAfterAbortMs).toBeLessThan(4_000);
    } finally {
      clearTimeout(resume);
      server.proc.kill('SIGCONT');
    }
    await sleep(100);
  });

  it('gives up taking the lease at deadlineMs (plus 2 s for an answer on its way), with TimeoutError, and the task never runs', { timeout: 40_000 }, async () => {
    const { client } = clientFor(server, 'seo-agent-7');
    const decision = await client.decide({ action: 'update_post', resource: 'wp:post:602', environment: 'production', fields: ['title'] });
    let ran = false;
    server.proc.kill('SIGSTOP');
    const resume = setTimeout(() => server.proc.kill('SIGCONT'), 20_000);
    const started = Date.now();
    try {
      const error = await client.withLease([decision], async () => {
        ran = true;
      }, { deadlineMs: 2_000 }).then(() => null, (e: unknown) => e);
      const tookMs = Date.now() - started;
      expect((error as Error | null)?.name).toBe('TimeoutError');
      expect(tookMs).toBeLessThan(8_000);
      expect(ran).toBe(false);
    } finally {
      clearTimeout(resume);
      server.proc.kill('SIGCONT');
    }
  });

  it('acquireLease, renewLease and releaseLease given a signal are abandoned when it aborts', { timeout: 30_000 }, async () => {
    const { client } = clientFor(server, 'seo-agent-7');
    const decision = await client.decide({ action: 'update_post', resource: 'wp:post:603', environment: 'production', fields: ['title'] });
    const lease = await client.acquireLease([decision], { ttlMs: 5_000 });
    server.proc.kill('SIGSTOP');
    try {
      const started = Date.now();
      const calls = [
        client.acquireLease([decision], { signal: AbortSignal.timeout(500) }),
        client.renewLease(lease, undefined, { signal: AbortSignal.timeout(500) }),
        client.releaseLease(lease, { signal: AbortSignal.timeout(500) }),
      ];
      for (const call of calls) expect(((await call.then(() => null, (e: unknown) => e)) as Error | null)?.name).toBe('TimeoutError');
      expect(Date.now() - started).toBeLessThan(5_000);
    } finally {
      server.proc.kill('SIGCONT');
    }
    await sleep(100);
  });

  // After the calls given up above, a connection of this process stayed open that Node did not count
  // idle: `writ serve` said "drained" on SIGTERM and then waited for it (up to the 60 s headers timeout).
  it('after the pause, SIGTERM drains and exits while this process and its connections live on', { timeout: 20_000 }, async () => {
    await sleep(500);
    server.proc.kill('SIGTERM');
    const exited = await Promise.race([server.exited.then((code) => `exited ${code}`), sleep(6_000).then(() => 'still running 6 s after SIGTERM')]);
    expect(server.log()).toContain('drained: every admitted request has been answered');
    expect(exited).toBe('exited 0');
  });
});
