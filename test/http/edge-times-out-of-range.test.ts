import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { GOVERNANCE_ID } from '../../src/graph/model.js';
import { commitGraphChange } from '../../src/service/graph-changes.js';
import { runWrit } from '../support/cli.js';
import { startHarness, type Harness } from '../support/harness.js';
import { requireDist } from '../support/server-process.js';
import { misplacedTimes } from '../support/wire-times.js';

/**
 * An edge time out of JavaScript's Date range (±8.64e15 ms), as an older Writ stored it from a manifest
 * (`expires_at: 1e20`, "never"): on the wire it is the last instant RFC 3339 can name, and it is the
 * same edge when an export of it is applied again.
 */
const LAST = '9999-12-31T23:59:59.999Z';
let h: Harness;
const writ = (...args: string[]) => runWrit(h.dataDir, ...args);

beforeAll(async () => {
  requireDist();
  h = await startHarness({ clock: new ManualClock(Date.now()) });
  await commitGraphChange(h.ctx, GOVERNANCE_ID, (_graph, now) => [{
    type: 'edge.created',
    edge: { id: 'g-far', kind: 'grant', from: GOVERNANCE_ID, to: 'publisher', scope: { actions: ['read_post'], resources: ['wp:post:*'], environments: ['production'], fields: ['*'], constraints: { risk_max: 1 } }, max_depth: 0, reason: 'written by an older Writ with expires_at 1e20', creator: GOVERNANCE_ID, created_at: now, not_before: null, expires_at: 1e20 },
  }]);
}, 60_000);
afterAll(async () => h?.close());

describe('edge times out of the Date range are answered clamped, not INTERNAL', () => {
  it('GET /v1/edges/:id, GET /v1/graph (json and dot), an explanation through it and the graph diff answer with expires_at 9999-12-31T23:59:59.999Z', async () => {
    const edge = await h.call('governance', { method: 'GET', url: '/v1/edges/g-far' });
    expect(edge.status, edge.raw).toBe(200);
    expect(edge.body.edge.expires_at).toBe(LAST);

    const graph = await h.call('governance', { method: 'GET', url: '/v1/graph' });
    expect(graph.status, graph.raw).toBe(200);
    expect(graph.body.edges.find((e: { id: string }) => e.id === 'g-far').expires_at).toBe(LAST);
    expect(misplacedTimes(graph.body)).toEqual([]);
    expect((await h.call('governance', { method: 'GET', url: '/v1/graph?format=dot' })).status).toBe(200);

    const x = await h.call('governance', { method: 'POST', url: '/v1/explain', payload: { action: 'read_post', resource: 'wp:post:1', environment: 'production', fields: ['title'], principal: 'publisher' } });
    expect(x.status, x.raw).toBe(200);
    expect(x.body.allow).toBe(true);
    expect(x.body.chains.flatMap((c: { edges: { id: string; expires_at: string }[] }) => c.edges).find((e: { id: string }) => e.id === 'g-far').expires_at).toBe(LAST);

    const diff = await h.call('governance', { method: 'GET', url: '/v1/graph/diff?from=0' });
    expect(diff.status, diff.raw).toBe(200);
    expect(diff.body.added.find((e: { id: string }) => e.id === 'g-far').expires_at).toBe(LAST);
  });

  it('the CLI shows it too, and its exported manifest applies to the same store as no change', { timeout: 60_000 }, async () => {
    const json = await writ('graph', 'export');
    expect(json.code, json.stdout).toBe(0);
    expect(JSON.parse(json.stdout).edges.find((e: { id: string }) => e.id === 'g-far').expires_at).toBe(LAST);
    const trace = await writ('trace', 'publisher', 'read_post', 'wp:post:1', '--fields', 'title', '--json');
    expect(trace.code, trace.stdout).toBe(0);
    expect(JSON.parse(trace.stdout).chains.flatMap((c: { edges: { id: string }[] }) => c.edges).find((e: { id: string }) => e.id === 'g-far').expires_at).toBe(LAST);
    const text = await writ('trace', 'publisher', 'read_post', 'wp:post:1', '--fields', 'title');
    expect(text.code, text.stdout).toBe(0);
    const can = await writ('can', 'publisher');
    expect(can.code, can.stdout).toBe(0);
    expect(can.stdout).toContain('g-far');

    const exported = await writ('graph', 'export', '--format', 'manifest');
    expect(exported.code, exported.stdout).toBe(0);
    expect(exported.stdout).toContain(`expires_at: ${LAST}`);
    const file = join(h.dataDir, 'export.yaml');
    writeFileSync(file, exported.stdout);
    const applied = await writ('graph', 'apply', file);
    expect(applied.code, applied.stdout).toBe(0);
    expect(applied.stdout).toMatch(/: 0 created, \d+ unchanged;/);
  });
});
