import { describe, expect, it } from 'vitest';
import { LiveGraph, OperationGraph, exportGraphJson } from '../../src/graph/index.js';
import { openDatabase } from '../../src/store/sqlite/database.js';
import { SqliteGraphEventStore } from '../../src/store/sqlite/graph-event-log.js';
import { WritError } from '../../src/errors.js';
import { EventLogBuilder, T0 } from './graph-events.js';

async function setUp() {
  const db = openDatabase(':memory:');
  const log = new SqliteGraphEventStore(db);
  const events = new EventLogBuilder()
    .principal('governance', 'governance')
    .principal('orchestrator', 'service')
    .edge('g1', 'grant', 'governance', 'orchestrator').events;
  await log.append(events.map((e) => e.event), 'governance', T0);
  return { db, log };
}

describe('live graph over the SQLite event log', () => {
  it('catches up with events appended after it was built, by this or another writer', async () => {
    const { log } = await setUp();
    const live = new LiveGraph(log);
    const graph = await live.current();
    expect(graph.revision).toBe(3);
    await log.append([{ type: 'edge.revoked', id: 'g1', at: T0 + 10_000, reason: 'rotated' }], 'governance', T0 + 10_000);
    expect(await live.current()).toBe(graph);
    expect(graph.revision).toBe(4);
    expect(graph.edge('g1')!.revoked_at).toBe(T0 + 10_000);
  });

  it('applies each event once when many requests catch up at the same moment', async () => {
    const { log } = await setUp();
    const live = new LiveGraph(log);
    await live.current();
    await log.append([{ type: 'principal.created', principal: { id: 'late', kind: 'agent', priority_class: 'agent', priority: 10, attributes: {}, keys: [], created_at: T0 } }], 'governance', T0 + 1);
    await log.append([{ type: 'edge.revoked', id: 'g1', at: T0 + 2, reason: 'rotated' }], 'governance', T0 + 2);
    // Applying 'principal.created' twice would throw; every caller must see the same, complete graph.
    const graphs = await Promise.all(Array.from({ length: 8 }, () => live.current()));
    expect(new Set(graphs).size).toBe(1);
    expect(graphs[0]!.revision).toBe(5);
    expect(graphs[0]!.principal('late')).toBeDefined();
    expect(graphs[0]!.edge('g1')!.revoked_at).toBe(T0 + 2);
  });

  it('rebuilds the graph as of an earlier revision or time: the edge before its revocation', async () => {
    const { log } = await setUp();
    await log.append([{ type: 'edge.revoked', id: 'g1', at: T0 + 10_000, reason: 'rotated' }], 'governance', T0 + 10_000);
    const live = new LiveGraph(log);
    expect((await live.current()).edge('g1')!.revoked_at).toBe(T0 + 10_000);

    const before = await live.atRevision(3);
    expect(before).not.toBe(await live.current());
    expect(before.revision).toBe(3);
    expect(before.edge('g1')!.revoked_at).toBeNull();
    expect(exportGraphJson(before).edges[0]!.revoked_at).toBeNull();

    expect((await live.atTime(T0 + 9_999)).edge('g1')!.revoked_at).toBeNull();
    expect((await live.atTime(T0 + 10_000)).edge('g1')!.revoked_at).toBe(T0 + 10_000);
    expect((await live.atTime(T0 - 1)).revision).toBe(0);
    expect(await live.atRevision(3)).toBe(before);
  });

  it('refuses a revision beyond the head', async () => {
    const { log } = await setUp();
    const live = new LiveGraph(log);
    await expect((async () => await live.atRevision(4))()).rejects.toThrow(WritError);
    await expect((async () => await live.atRevision(-1))()).rejects.toThrow(/non-negative/);
  });
});

describe('one operation\'s view of the live graph', () => {
  it('asks the log once, at its first use; an operation that begins after a change sees it', async () => {
    const { log } = await setUp();
    let heads = 0;
    const live = new LiveGraph({ head: () => ((heads += 1), log.head()), read: (after, upTo) => log.read(after, upTo), revisionAt: (t) => log.revisionAt(t) });
    const first = OperationGraph.over(live);
    const graph = await first.current();
    expect(await first.current()).toBe(graph);
    expect(heads).toBe(1);
    expect(graph.edge('g1')!.revoked_at).toBeNull();

    await log.append([{ type: 'edge.revoked', id: 'g1', at: T0 + 10_000, reason: 'rotated' }], 'governance', T0 + 10_000);
    // The next operation asks again and catches up; the earlier one is handed the live graph, never an older state.
    const next = OperationGraph.over(live);
    expect((await next.current()).edge('g1')!.revoked_at).toBe(T0 + 10_000);
    expect(heads).toBe(2);
    expect(await first.current()).toBe(graph);
    expect(graph.revision).toBe(4);
    // Past graphs go to the live graph's cache as before.
    expect((await first.atRevision(3)).edge('g1')!.revoked_at).toBeNull();
  });
});
