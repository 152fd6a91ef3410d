import { afterEach, describe, expect, it } from 'vitest';
import { ReceiptLog } from '../../src/audit/index.js';
import { loadConfig } from '../../src/config/index.js';
import { sql } from '../store/conformance/engines.js';
import { startHarness, type Harness } from '../support/harness.js';

/**
 * WRIT_GRAPH_REQUIRE_HASHES (once the fleet is upgraded): an event a Writ from before the graph log's
 * hash chain appended is BROKEN to `writ audit verify`, not `unhashed`, and a graph change over it is
 * refused (GRAPH_LOG_UNHASHED, nothing changed) rather than hashing it. Off, the rolling upgrade's
 * behaviour is unchanged (test/audit/graph-log-tamper.test.ts).
 */

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** An append as a Writ from before the chain makes it: no hash, the chain's head not moved. */
async function oldWriterAppends(h: Harness): Promise<number> {
  const payload = JSON.stringify({ type: 'principal.revoked', id: 'seo-agent-7', reason: 'by an old replica' });
  if (h.config.databaseUrl === null) {
    const revision = (h.db.prepare('SELECT MAX(revision) FROM graph_events').pluck().get() as number) + 1;
    h.db.prepare('INSERT INTO graph_events (revision, at, actor, type, payload) VALUES (?, ?, ?, ?, ?)').run(revision, h.clock.now(), 'old-replica', 'principal.revoked', payload);
    return revision;
  }
  const [moved] = await sql<{ revision: string }>(h.config.databaseUrl, 'UPDATE graph_head SET revision = revision + 1 RETURNING revision');
  const revision = Number(moved!.revision);
  await sql(h.config.databaseUrl, 'INSERT INTO graph_events (revision, at, actor, type, payload) VALUES ($1, $2, $3, $4, $5)', [revision, Date.now(), 'old-replica', 'principal.revoked', payload]);
  return revision;
}

describe('the setting is read from the environment', () => {
  it('1 or true turns it on, 0, false or nothing leaves it off, anything else is refused', () => {
    const of = (v: string | undefined) => loadConfig({ dataDir: '/tmp/x' }, v === undefined ? {} : { WRIT_GRAPH_REQUIRE_HASHES: v }).graphRequireHashes;
    expect([of(undefined), of(''), of('0'), of('false'), of('1'), of('true')]).toEqual([false, false, false, false, true, true]);
    expect(() => of('yes')).toThrow(expect.objectContaining({ code: 'UNPROCESSABLE', message: expect.stringContaining('WRIT_GRAPH_REQUIRE_HASHES') }));
  });
});

describe.each(['sqlite', 'postgres'] as const)('WRIT_GRAPH_REQUIRE_HASHES on (%s)', (engine) => {
  it('an unhashed event is BROKEN to verify and a graph change over it is refused, nothing changed; turned off for one change, it is hashed and verifies', { timeout: 60_000 }, async () => {
    const h = await startHarness({ ...(engine === 'postgres' ? { engine } : {}), config: { graphRequireHashes: true } });
    cleanups.push(() => h.close());
    const clean = (await h.call('governance', { method: 'GET', url: '/v1/audit/verify' })).body;
    expect(clean.graph).toMatchObject({ ok: true, unhashed: 0 });

    const revision = await oldWriterAppends(h);
    const verdict = (await h.call('governance', { method: 'GET', url: '/v1/audit/verify' })).body;
    expect(verdict.ok).toBe(false);
    expect(verdict.graph).toMatchObject({ ok: false, firstBadRevision: revision, revision: revision - 1, unhashed: 0 });
    expect(verdict.graph.problem).toContain(`graph event ${revision} has no hash, and every event must have one (WRIT_GRAPH_REQUIRE_HASHES)`);
    // Off, the same log is sound, with the event counted unhashed.
    const lenient = await new ReceiptLog({ store: h.ctx.store, clock: h.ctx.clock }).verifyChain(async () => {});
    expect(lenient.graph).toMatchObject({ ok: true, unhashed: 1, revision: revision - 1 });

    const refused = await h.call('governance', { method: 'POST', url: '/v1/principals', payload: { id: 'new-agent', kind: 'agent', keys: [] } });
    expect(refused.status).toBe(409);
    expect(refused.body.code).toBe('GRAPH_LOG_UNHASHED');
    expect(refused.body.detail).toContain(`graph event ${revision} has no hash`);
    const revoke = await h.call('governance', { method: 'DELETE', url: '/v1/edges/d-orch-seo', payload: { reason: 'x' } });
    expect(revoke.body.code).toBe('GRAPH_LOG_UNHASHED');
    const head = await h.ctx.store.read((tx) => tx.graph.chainHead());
    expect(head).toMatchObject({ revision, hashed: revision - 1 });
    expect((await h.call('governance', { method: 'GET', url: '/v1/principals/new-agent' })).status).toBe(404);

    // The way out the README gives: off for one change (it hashes the old event first), then on again.
    (h.config as { graphRequireHashes: boolean }).graphRequireHashes = false;
    const accepted = await h.call('governance', { method: 'POST', url: '/v1/principals', payload: { id: 'new-agent', kind: 'agent', keys: [] } });
    expect(accepted.status, JSON.stringify(accepted.body)).toBe(201);
    (h.config as { graphRequireHashes: boolean }).graphRequireHashes = true;
    const after = (await h.call('governance', { method: 'GET', url: '/v1/audit/verify' })).body;
    expect(after.graph).toMatchObject({ ok: true, revision: revision + 1, unhashed: 0 });
    expect((await h.call('governance', { method: 'DELETE', url: '/v1/edges/d-orch-seo', payload: { reason: 'x' } })).status).toBe(200);
  });
});
