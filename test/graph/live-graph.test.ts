import { describe, expect, it } from 'vitest';
import { LiveGraph, exportGraphJson } from '../../src/graph/index.js';
import { openDatabase } from '../../src/store/sqlite/database.js';
import { SqliteGraphEventLog } from '../../src/store/sqlite/graph-event-log.js';
import { WritError } from '../../src/errors.js';
import { EventLogBuilder, T0 } from './graph-events.js';

function setUp() {
  const db = openDatabase(':memory:');
  const log = new SqliteGraphEventLog(db);
  const events = new EventLogBuilder()
    .principal('governance', 'governance')
    .principal('orchestrator', 'service')
    .edge('g1', 'grant', 'governance', 'orchestrator').events;
  log.append(events.map((e) => e.event), 'governance', T0);
  return { db, log };
}

describe('live graph over the SQLite event log', () => {
  it('catches up with events appended after it was built, by this or another writer', () => {
    const { log } = setUp();
    const live = new LiveGraph(log);
    const graph = live.current();
    expect(graph.revision).toBe(3);
    log.append([{ type: 'edge.revoked', id: 'g1', at: T0 + 10_000, reason: 'rotated' }], 'governance', T0 + 10_000);
    expect(live.current()).toBe(graph);
    expect(graph.revision).toBe(4);
    expect(graph.edge('g1')!.revoked_at).toBe(T0 + 10_000);
  });

  it('rebuilds the graph as of an earlier revision or time: the edge before its revocation', () => {
    const { log } = setUp();
    log.append([{ type: 'edge.revoked', id: 'g1', at: T0 + 10_000, reason: 'rotated' }], 'governance', T0 + 10_000);
    const live = new LiveGraph(log);
    expect(live.current().edge('g1')!.revoked_at).toBe(T0 + 10_000);

    const before = live.atRevision(3);
    expect(before).not.toBe(live.current());
    expect(before.revision).toBe(3);
    expect(before.edge('g1')!.revoked_at).toBeNull();
    expect(exportGraphJson(before).edges[0]!.revoked_at).toBeNull();

    expect(live.atTime(T0 + 9_999).edge('g1')!.revoked_at).toBeNull();
    expect(live.atTime(T0 + 10_000).edge('g1')!.revoked_at).toBe(T0 + 10_000);
    expect(live.atTime(T0 - 1).revision).toBe(0);
    expect(live.atRevision(3)).toBe(before);
  });

  it('refuses a revision beyond the head', () => {
    const { log } = setUp();
    const live = new LiveGraph(log);
    expect(() => live.atRevision(4)).toThrow(WritError);
    expect(() => live.atRevision(-1)).toThrow(/non-negative/);
  });
});
