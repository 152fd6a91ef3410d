import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { openPostgresStore } from '../../src/store/postgres/index.js';
import { openSqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { createTestDatabase, sql } from './conformance/engines.js';

/**
 * The graph's event log is append-only at the database, on both engines, as the receipt entries are:
 * every graph, `writ why` and `writ can --at` are folded from it, so an event rewritten (a revocation's
 * author or reason) or deleted (a revocation taken out) would change what they say and bring revoked
 * authority back.
 */
const cleanups: (() => Promise<void> | void)[] = [];
afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const EVENT = ['governance', 'edge.revoked', JSON.stringify({ type: 'edge.revoked', id: 'd-x', at: 1, reason: 'key leaked' })];

describe('graph events refuse UPDATE and DELETE', () => {
  it('on SQLite', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'writ-graph-append-only-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const file = join(dir, 'writ.sqlite');
    await (await openSqliteStore(file)).close();
    const db = new Database(file);
    cleanups.push(() => void db.close());
    db.prepare('INSERT INTO graph_events (revision, at, actor, type, payload) VALUES (1, 1, ?, ?, ?)').run(...EVENT);
    expect(() => db.prepare("UPDATE graph_events SET actor = 'orchestrator' WHERE revision = 1").run()).toThrow(/graph events are append-only/);
    expect(() => db.prepare('DELETE FROM graph_events WHERE revision = 1').run()).toThrow(/graph events are append-only/);
    expect(db.prepare('SELECT actor FROM graph_events').pluck().all()).toEqual(['governance']);
  });

  it('on PostgreSQL', async () => {
    const database = await createTestDatabase('writ_graph_append_only');
    cleanups.push(database.drop);
    await (await openPostgresStore(database.url, { poolSize: 1 })).close();
    await sql(database.url, 'INSERT INTO graph_events (revision, at, actor, type, payload) VALUES (1, 1, $1, $2, $3)', EVENT);
    await expect(sql(database.url, "UPDATE graph_events SET actor = 'orchestrator' WHERE revision = 1")).rejects.toThrow(/graph events are append-only/);
    await expect(sql(database.url, 'DELETE FROM graph_events WHERE revision = 1')).rejects.toThrow(/graph events are append-only/);
    expect(await sql(database.url, 'SELECT actor FROM graph_events')).toEqual([{ actor: 'governance' }]);
  });
});
