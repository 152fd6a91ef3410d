import { createHash } from 'node:crypto';
import { compactVerify, decodeProtectedHeader, importJWK, type JWK } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { revokeEdge } from '../../src/service/index.js';
import { startHarness, type Harness } from '../support/harness.js';

/**
 * GET /v1/graph/events answers each event's place in the graph log's hash chain, and an auditor can
 * recompute it from the JSON alone, with the README's recipe (written out here, not imported), and
 * check a page against the graph head a signed checkpoint names.
 */

interface WireEvent { revision: number; at: string; actor: string; type: string; payload: string; prev_hash: string | null; hash: string | null }

/** The README's recipe ("Checking graph events without the database"). */
const recompute = (e: WireEvent, prev: string) => createHash('sha256')
  .update(`writ-graph-v1\n${prev}\n${e.revision}\n${Date.parse(e.at)}\n${JSON.stringify(e.actor)}\n${JSON.stringify(e.type)}\n${e.payload}`)
  .digest('hex');

async function allEvents(h: Harness, limit: number): Promise<WireEvent[]> {
  const events: WireEvent[] = [];
  let after = 0;
  for (;;) {
    const page = await h.call('governance', { method: 'GET', url: `/v1/graph/events?after=${after}&limit=${limit}` });
    expect(page.status).toBe(200);
    events.push(...(page.body.events as WireEvent[]));
    if (page.body.next === null) return events;
    after = page.body.next as number;
  }
}

describe.each(['sqlite', 'postgres'] as const)('graph events carry their hash chain links (%s)', (engine) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(engine === 'sqlite' ? { clock: new ManualClock(Date.UTC(2026, 5, 1, 12, 0, 0, 123)) } : { engine });
  });
  afterAll(async () => h?.close());

  it('every event of every page recomputes from the answer alone, links to the one before, and the signed head is among them', async () => {
    // A reason with what a careless recipe would get wrong: a newline, quotes, a backslash, non-ASCII.
    await revokeEdge(h.ctx, 'governance', 'd-orch-seo', 'retired\n"seo" agent \\ für immer ✓');
    const checkpoint = await h.ctx.receipts.checkpoint({ force: true });
    expect(checkpoint?.graph_revision).toBeGreaterThan(3);
    // Events after the checkpoint are linked, not yet signed.
    await h.call('governance', { method: 'POST', url: '/v1/principals', payload: { id: 'late-agent', kind: 'agent', keys: [] } });

    const events = await allEvents(h, 3); // pages of 3: the first event of each page names the hash before it
    expect(events.length).toBeGreaterThan(5);
    let prev = '0'.repeat(64);
    for (const e of events) {
      expect(e.prev_hash, `revision ${e.revision}`).toBe(prev);
      expect(e.hash, `revision ${e.revision}`).toBe(recompute(e, prev));
      expect(JSON.parse(e.payload).type).toBe(e.type);
      prev = e.hash!;
    }
    const verify = (await h.call('governance', { method: 'GET', url: '/v1/audit/verify' })).body;
    expect(verify.checkpoint.graph_revision).toBe(checkpoint!.graph_revision);
    const signed = events.find((e) => e.revision === verify.checkpoint.graph_revision);
    expect(signed?.hash).toBe(verify.checkpoint.graph_hash);
    expect(verify.graph.hash).toBe(events[events.length - 1]!.hash);
    // The checkpoint comes with its compact JWS as stored: checked with /.well-known/jwks.json alone (jose,
    // not Writ's code), its payload signs the graph head the answer names.
    expect(verify.checkpoint.jws).toBe(checkpoint!.jws);
    const jwks = (await h.call(null, { method: 'GET', url: '/.well-known/jwks.json' })).body as { keys: (JWK & { kid: string })[] };
    const { kid, typ } = decodeProtectedHeader(verify.checkpoint.jws);
    expect(typ).toBe('writ-checkpoint+jws');
    const { payload } = await compactVerify(verify.checkpoint.jws, await importJWK(jwks.keys.find((k) => k.kid === kid)!, 'EdDSA'));
    expect(JSON.parse(new TextDecoder().decode(payload))).toMatchObject({ v: 3, seq: verify.checkpoint.seq, graph_revision: signed!.revision, graph_hash: signed!.hash });
  });

  it('a page that starts mid-log names the hash of the event before it', async () => {
    const events = await allEvents(h, 1000);
    const page = (await h.call('governance', { method: 'GET', url: '/v1/graph/events?after=2&limit=2' })).body;
    expect(page.events.map((e: WireEvent) => [e.revision, e.prev_hash, e.hash])).toEqual([[3, events[1]!.hash, events[2]!.hash], [4, events[2]!.hash, events[3]!.hash]]);
  });

  if (engine === 'sqlite') {
    it('an event an older Writ appended (a rolling upgrade) is answered unhashed until the next append hashes it', async () => {
      const before = await allEvents(h, 1000);
      const last = before[before.length - 1]!;
      const payload = JSON.stringify({ type: 'principal.revoked', id: 'late-agent', reason: 'old writer' });
      h.db.prepare('INSERT INTO graph_events (revision, at, actor, type, payload) VALUES (?, ?, ?, ?, ?)').run(last.revision + 1, Date.UTC(2026, 5, 1, 13), 'old-replica', 'principal.revoked', payload);
      const old = (await allEvents(h, 1000)).at(-1)!;
      expect(old).toMatchObject({ revision: last.revision + 1, actor: 'old-replica', payload, prev_hash: last.hash, hash: null });

      await h.call('governance', { method: 'POST', url: '/v1/principals', payload: { id: 'later-agent', kind: 'agent', keys: [] } });
      const after = await allEvents(h, 1000);
      const [filled, mine] = after.slice(-2);
      expect(filled!.hash).toBe(recompute(filled!, last.hash!));
      expect(mine!.prev_hash).toBe(filled!.hash);
      expect(mine!.hash).toBe(recompute(mine!, filled!.hash!));
    });

    it('a page recomputes to the same verdict as writ audit verify: an event whose stored type was altered is found at its revision', async () => {
      const events = await allEvents(h, 1000);
      const victim = events.find((e) => e.type === 'edge.revoked')!;
      h.db.exec('DROP TRIGGER graph_events_no_update');
      h.db.prepare("UPDATE graph_events SET type = 'edge.created' WHERE revision = ?").run(victim.revision);
      const verdict = (await h.call('governance', { method: 'GET', url: '/v1/audit/verify' })).body;
      expect(verdict.graph).toMatchObject({ ok: false, firstBadRevision: victim.revision });
      const answered = (await allEvents(h, 1000)).find((e) => e.revision === victim.revision)!;
      expect(answered.type).toBe('edge.created');
      expect(recompute(answered, answered.prev_hash!)).not.toBe(answered.hash);
    });
  }
});
