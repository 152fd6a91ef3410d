import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/config/index.js';
import { GOVERNANCE_ID } from '../../../src/graph/model.js';
import { openWrit, registerPrincipal, type OpenedWrit } from '../../../src/service/index.js';
import { BUNDLE_DIR, REPO } from '../../support/harness.js';
import { createTestDatabase } from '../conformance/engines.js';

/**
 * On PostgreSQL a replica's in-memory graph is fed by NOTIFY: a change made on replica A reaches
 * replica B's graph without B reading the log's head on every request. Measures how long that takes.
 */
const cleanups: (() => Promise<void> | void)[] = [];
afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

describe('graph propagation between replicas on PostgreSQL', () => {
  it('a change on one replica reaches the other replica\'s graph by notification, in milliseconds', { timeout: 120_000 }, async () => {
    const db = await createTestDatabase('writ_graph_feed');
    cleanups.push(db.drop);
    const dataDir = mkdtempSync(join(tmpdir(), 'writ-feed-'));
    cleanups.push(() => rmSync(dataDir, { recursive: true, force: true }));
    const config = loadConfig({ dataDir, bundleDir: BUNDLE_DIR, policiesDir: join(REPO, 'policies'), databaseUrl: db.url }, {});
    const a: OpenedWrit = await openWrit(config);
    cleanups.push(() => a.close());
    const b: OpenedWrit = await openWrit(config);
    cleanups.push(() => b.close());

    // What B is told, as it is told it (the listener calls the graph's feedHead).
    const told: { head: number; at: number }[] = [];
    const feed = b.ctx.graph.feedHead.bind(b.ctx.graph);
    b.ctx.graph.feedHead = (head: number) => {
      told.push({ head, at: performance.now() });
      feed(head);
    };

    const delays: number[] = [];
    const late: number[] = [];
    for (let i = 0; i < 40; i++) {
      const before = performance.now();
      const committed = await registerPrincipal(a.ctx, GOVERNANCE_ID, { id: `feed-agent-${i}`, kind: 'agent', keys: [] });
      const after = performance.now();
      for (let w = 0; w < 400 && !told.some((t) => t.head >= committed.graph_revision); w++) await new Promise((r) => setTimeout(r, 5));
      const seen = told.find((t) => t.head >= committed.graph_revision);
      expect(seen, `replica B was never told of revision ${committed.graph_revision}`).toBeDefined();
      // From the start of A's change (its commit lies inside) to B being told: an upper bound.
      delays.push(seen!.at - before);
      late.push(Math.max(0, seen!.at - after));
      // B's graph now has it, from the notification: no head was read for this request.
      expect((await b.ctx.graph.current()).principal(`feed-agent-${i}`)).toBeDefined();
    }
    const p = (xs: number[], q: number) => [...xs].sort((x, y) => x - y)[Math.min(xs.length - 1, Math.floor(q * xs.length))]!.toFixed(1);
    console.log(`graph propagation A → B by NOTIFY (${delays.length} changes): from the start of A's change p50 ${p(delays, 0.5)} ms, p99 ${p(delays, 0.99)} ms; ` +
      `after A's call returned p50 ${p(late, 0.5)} ms, p99 ${p(late, 0.99)} ms`);
  });
});
