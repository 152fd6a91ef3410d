import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { createTestDatabase } from '../../scripts/test-database.js';
import { runWrit } from '../support/cli.js';
import { requireDist, startServerProcess } from '../support/server-process.js';

/**
 * An auditor's check of the graph log with the built `writ`: a running Writ with the example graph, a
 * delegation revoked from the command line, a checkpoint signed; then someone with write access to the
 * database drops the append-only triggers and takes the revocation out (cut from the end, the head rows
 * made consistent), or rewrites who revoked it. `writ audit verify` exits 1 naming the revision; before
 * the tampering it exits 0. On SQLite (a real data directory, the server running) and on PostgreSQL
 * (--database).
 */
const cleanups: (() => Promise<unknown> | void)[] = [];
afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

describe('writ audit verify on the graph log, from the command line', () => {
  it('SQLite: a revocation cut off the end after a checkpoint, then an event rewritten, are BROKEN at their revision', { timeout: 90_000 }, async () => {
    requireDist();
    const server = await startServerProcess();
    cleanups.push(() => server.stop());
    cleanups.push(() => rmSync(server.dataDir, { recursive: true, force: true }));
    const revoke = await runWrit(server.dataDir, 'revoke', 'd-orch-content', '--reason', 'key leaked');
    expect(revoke.code, revoke.output).toBe(0);
    expect((await runWrit(server.dataDir, 'audit', 'checkpoint')).code).toBe(0);
    const ok = await runWrit(server.dataDir, 'audit', 'verify', '--json');
    expect(ok.code, ok.output).toBe(0);
    const before = JSON.parse(ok.stdout) as { graph: { revision: number; events: number }; checkpoint: { graph_revision: number } };
    const revision = before.graph.revision;
    expect(before.graph.events).toBe(revision);
    expect(before.checkpoint.graph_revision).toBe(revision);

    const db = new Database(join(server.dataDir, 'writ.sqlite'));
    db.pragma('busy_timeout = 5000');
    cleanups.push(() => void db.close());
    expect(db.prepare('SELECT type, payload FROM graph_events WHERE revision = ?').get(revision)).toMatchObject({ type: 'edge.revoked', payload: expect.stringContaining('d-orch-content') });
    db.exec('DROP TRIGGER graph_events_no_update; DROP TRIGGER graph_events_no_delete;');
    db.prepare('DELETE FROM graph_events WHERE revision = ?').run(revision);
    db.prepare('UPDATE graph_chain_head SET revision = ?, hash = (SELECT hash FROM graph_events WHERE revision = ?)').run(revision - 1, revision - 1);
    const cut = await runWrit(server.dataDir, 'audit', 'verify');
    expect(cut.code).toBe(1);
    expect(cut.stdout).toContain(`BROKEN in the graph log at revision ${revision}: graph event ${revision} is missing or unhashed (checkpoint`);
    // No new checkpoint launders the cut.
    expect((await runWrit(server.dataDir, 'audit', 'checkpoint')).output).toMatch(/UNPROCESSABLE.*the graph log went back on checkpoint/);

    db.prepare("UPDATE graph_events SET actor = 'mallory' WHERE revision = 3").run();
    const json = await runWrit(server.dataDir, 'audit', 'verify', '--json');
    expect(json.code).toBe(1);
    expect(JSON.parse(json.stdout)).toMatchObject({ ok: false, graph: { ok: false, firstBadRevision: 3, events: 2, problem: expect.stringMatching(/graph event 3 does not match its hash/) } });
  });

  it('PostgreSQL (--database): an event rewritten and a revocation deleted with the later revisions renumbered are BROKEN', { timeout: 90_000 }, async () => {
    requireDist();
    const database = await createTestDatabase('writ_graph_tamper_cli');
    cleanups.push(database.drop);
    const dataDir = mkdtempSync(join(tmpdir(), 'writ-graph-tamper-cli-'));
    cleanups.push(() => rmSync(dataDir, { recursive: true, force: true }));
    const cli = (...args: string[]) => runWrit(dataDir, ...args, '--database', database.url);
    expect((await cli('graph', 'apply', 'graph/example.yaml')).code).toBe(0);
    expect((await cli('revoke', 'd-orch-content', '--reason', 'key leaked')).code).toBe(0);
    expect((await cli('revoke', 'd-orch-seo', '--reason', 'rotation')).code).toBe(0);
    const ok = await cli('audit', 'verify');
    expect(ok.code, ok.output).toBe(0);
    expect(ok.stdout).toMatch(/^OK: graph log, (\d+) events hashed through revision \1/m);

    const sql = new pg.Client(database.url);
    await sql.connect();
    cleanups.push(() => sql.end());
    const { rows: [head] } = await sql.query<{ revision: string }>('SELECT revision FROM graph_head');
    const last = Number(head!.revision);
    await sql.query('DROP TRIGGER graph_events_append_only ON graph_events');
    // The first revocation taken out, the second moved into its place.
    await sql.query('DELETE FROM graph_events WHERE revision = $1', [last - 1]);
    await sql.query('UPDATE graph_events SET revision = $1 WHERE revision = $2', [last - 1, last]);
    await sql.query('UPDATE graph_head SET revision = $1, hashed = $1, hash = (SELECT hash FROM graph_events WHERE revision = $1)', [last - 1]);
    const renumbered = await cli('audit', 'verify', '--json');
    expect(renumbered.code).toBe(1);
    expect(JSON.parse(renumbered.stdout)).toMatchObject({ ok: false, graph: { ok: false, firstBadRevision: last - 1 } });
  });
});
