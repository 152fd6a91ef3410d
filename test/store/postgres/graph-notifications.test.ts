import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import type { GraphEvent } from '../../../src/graph/model.js';
import { listenForGraphHeads, openPostgresStore } from '../../../src/store/postgres/index.js';
import { createTestDatabase, sleep } from '../conformance/engines.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

const ev = { type: 'principal.upsert' } as unknown as GraphEvent;

async function setup() {
  const db = await createTestDatabase('writ_pg');
  cleanups.push(db.drop);
  const store = await openPostgresStore(db.url, { poolSize: 2 });
  cleanups.push(() => store.close());
  const heads: { head: number; at: number }[] = [];
  const listener = await listenForGraphHeads(db.url, (head) => heads.push({ head, at: performance.now() }), { reconnectMs: 100 });
  cleanups.push(() => listener.close());
  const until = async (head: number) => {
    for (let i = 0; i < 500 && !heads.some((h) => h.head >= head); i++) await sleep(10);
    return heads.find((h) => h.head >= head);
  };
  return { db, store, heads, until };
}

describe('graph heads over LISTEN/NOTIFY', () => {
  it('reports the head on connect and each committed append, not a rolled-back one; measures the delay', async () => {
    const { store, heads, until } = await setup();
    expect(heads.map((h) => h.head)).toEqual([0]);
    await store.readWrite(async (tx) => {
      await tx.graph.append([ev], 'a', 1);
      throw new Error('rolled back');
    }).catch(() => undefined);
    const delays: number[] = [];
    for (let i = 1; i <= 100; i++) {
      const sent = performance.now();
      const head = await store.readWrite((tx) => tx.graph.append([ev], 'a', 1));
      const seen = await until(head);
      expect(seen?.head).toBe(head);
      delays.push(seen!.at - sent);
    }
    expect(heads.map((h) => h.head)).toEqual(Array.from({ length: 101 }, (_, i) => i));
    delays.sort((a, b) => a - b);
    console.log(`graph head propagation (commit + notify, one machine): p50 ${delays[49]!.toFixed(1)} ms, p99 ${delays[98]!.toFixed(1)} ms`);
  });

  it('reconnects after losing its connection and reports the head it missed', async () => {
    const { db, store, heads, until } = await setup();
    const admin = new pg.Client(db.url);
    await admin.connect();
    cleanups.push(() => admin.end());
    await admin.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'writ graph listener' AND datname = current_database()");
    const head = await store.readWrite((tx) => tx.graph.append([ev, ev], 'a', 1));
    expect((await until(head))?.head).toBe(2);
  });
});
