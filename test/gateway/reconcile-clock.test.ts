import { createServer, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { reconcileReceipts } from '../../src/service/index.js';
import { act, decideOk } from '../support/agent.js';
import { startHarness, type Harness } from '../support/harness.js';

/**
 * The background reconciliation judges a PENDING receipt's age by the store's clock, not by its own
 * process's: a replica whose clock runs 30 s ahead must not take another replica's write, still in
 * flight, for an old one, settle it FAILED, and see the upstream apply it afterwards (found with three
 * replicas on PostgreSQL, one of them skewed: test/e2e/replicas-postgres.test.ts).
 */
class SkewedClock extends ManualClock {
  skewMs = 0;
  override now(): number {
    return Date.now() + this.skewMs;
  }
}

// An upstream that accepts the write and never answers: its receipt stays PENDING.
let silent: Server;
const sockets: Socket[] = [];
let h: Harness;
const clock = new SkewedClock();
beforeAll(async () => {
  silent = createServer((s) => sockets.push(s));
  await new Promise<void>((r) => silent.listen(0, '127.0.0.1', () => r()));
  const port = (silent.address() as { port: number }).port;
  h = await startHarness({ clock, upstreamRoutes: [{ pattern: 'wp:post:*', url: `http://127.0.0.1:${port}`, timeoutMs: 300, environment: 'production' }] });
});
afterAll(async () => {
  await h?.close();
  for (const s of sockets) s.destroy();
  silent?.close();
});

describe('the reconciliation sweep and clock skew', () => {
  it('leaves a receipt younger than the settle age alone even when this process\'s clock runs 30 s ahead; takes it once it is old by the store\'s clock', async () => {
    const d = await decideOk(h, 'seo-agent-7', { resource: 'wp:post:9', fields: ['meta_description'] });
    const r = await act(h, 'seo-agent-7', { resource: 'wp:post:9', fields: ['meta_description'], payload: { meta_description: 'm' }, expected_version: 0 }, { decision: d.token });
    expect(r.status).toBe(504); // PENDING: the upstream may still apply it until its deadline
    clock.skewMs = 30_000;
    const early = await reconcileReceipts(h.ctx, { olderThanMs: 2_000 });
    expect(early.examined).toBe(0);
    clock.skewMs = 0;
    await new Promise((resolve) => setTimeout(resolve, 2_100));
    const due = await reconcileReceipts(h.ctx, { olderThanMs: 2_000 });
    expect(due.examined).toBe(1); // the silent upstream cannot be asked: unresolved, not guessed
    expect(due.unresolved.map((u) => u.receipt_id)).toEqual([r.body.receipt_id]);
  });
});
