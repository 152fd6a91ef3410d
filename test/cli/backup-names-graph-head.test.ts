import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { summarize } from '../../src/store/sqlite/backup.js';
import { runWrit } from '../support/cli.js';
import { migrateSqliteTo } from '../support/sqlite-at-version.js';
import { requireDist } from '../support/server-process.js';

/**
 * `writ backup` names the graph log's hash chain head (revision and hash, what `writ audit verify` and a
 * signed checkpoint name) beside the receipt head, and `writ restore` the same for what it restored, so an
 * operator can tell which graph log a backup holds without opening it.
 */

const dirs: string[] = [];
beforeAll(() => requireDist());
afterAll(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));

function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'writ-backup-graph-'));
  dirs.push(d);
  return d;
}

describe('the graph head in the backup and restore summaries', () => {
  it('backup and restore name the graph head audit verify reports; an unhashed tail is said apart', { timeout: 120_000 }, async () => {
    const data = tempDir();
    expect((await runWrit(data, 'graph', 'apply', 'graph/example.yaml')).code).toBe(0);
    const verify = JSON.parse((await runWrit(data, 'audit', 'verify', '--json')).stdout) as { graph: { revision: number; hash: string } };
    const { revision, hash } = verify.graph;
    expect(revision).toBeGreaterThan(0);

    const file = join(data, 'b1.sqlite');
    const json = await runWrit(data, 'backup', file, '--json');
    expect(json.code, json.output).toBe(0);
    expect(JSON.parse(json.stdout)).toMatchObject({ graph_revision: revision, graph_head: { revision, hash } });
    const text = await runWrit(data, 'backup', join(data, 'b2.sqlite'));
    expect(text.stdout).toContain(`graph revision ${revision} (hash ${hash})`);

    // An event a Writ from before the chain appended (a rolling upgrade), not hashed yet.
    const db = new Database(join(data, 'writ.sqlite'));
    db.prepare('INSERT INTO graph_events (revision, at, actor, type, payload) VALUES (?, ?, ?, ?, ?)')
      .run(revision + 1, Date.now(), 'old-replica', 'principal.revoked', JSON.stringify({ type: 'principal.revoked', id: 'seo-agent-7', reason: 'old writer' }));
    db.close();
    const tail = await runWrit(data, 'backup', join(data, 'b3.sqlite'));
    expect(tail.stdout).toContain(`graph revision ${revision + 1}, hashed through ${revision} (hash ${hash}; the 1 after it appended by a Writ from before the chain)`);

    const restored = await runWrit(data, 'restore', file, '--trust-backup', '--json');
    expect(restored.code, restored.output).toBe(0);
    expect(JSON.parse(restored.stdout)).toMatchObject({ restored_from: { graph_revision: revision, graph_head: { revision, hash } }, bump: { detail: { backup_graph_head: { revision, hash } } } });
    const again = await runWrit(data, 'restore', file, '--trust-backup');
    expect(again.code, again.output).toBe(0);
    expect(again.stdout).toMatch(new RegExp(`RESTORE by .* from ${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: the backup held .* and the graph revision ${revision} \\(hash ${hash}\\)`));
  });

  it('a backup from before the graph chain (SQLite migration 19) has no graph head, and says so', () => {
    const file = join(tempDir(), 'old.sqlite');
    const db = new Database(file);
    migrateSqliteTo(db, 19);
    db.pragma('journal_mode = DELETE');
    db.close();
    expect(summarize(file)).toMatchObject({ schema_version: 19, graph_revision: 0, graph_head: null });
  });

  it('restoring a backup from before the graph chain reports the head its migration hashed, and says so', { timeout: 120_000 }, async () => {
    // The events of a real graph, in a store of schema 19 (no hash column, no chain head): an old Writ's backup.
    const source = tempDir();
    expect((await runWrit(source, 'graph', 'apply', 'graph/example.yaml')).code).toBe(0);
    const live = new Database(join(source, 'writ.sqlite'), { readonly: true });
    const events = live.prepare('SELECT revision, at, actor, type, payload FROM graph_events ORDER BY revision').all() as { revision: number }[];
    live.close();
    expect(events.length).toBeGreaterThan(0);
    const file = join(tempDir(), 'pre-chain.sqlite');
    const db = new Database(file);
    migrateSqliteTo(db, 19);
    const insert = db.prepare('INSERT INTO graph_events (revision, at, actor, type, payload) VALUES (@revision, @at, @actor, @type, @payload)');
    for (const e of events) insert.run(e);
    db.pragma('journal_mode = DELETE');
    db.close();
    const last = events.at(-1)!.revision;
    expect(summarize(file)).toMatchObject({ schema_version: 19, graph_revision: last, graph_head: null });

    const data = tempDir();
    const restored = await runWrit(data, 'restore', file, '--trust-backup', '--json');
    expect(restored.code, restored.output).toBe(0);
    const r = JSON.parse(restored.stdout) as { restored_from: { graph_head: unknown }; graph_head: { revision: number; hash: string }; graph_hashed_by_migration: boolean; bump: { detail: Record<string, unknown> } };
    // What the restored store's log verifies to is what the restore reported.
    const verify = await runWrit(data, 'audit', 'verify', '--json');
    expect(verify.code, verify.output).toBe(0);
    const { graph } = JSON.parse(verify.stdout) as { graph: { revision: number; hash: string; events: number } };
    expect(graph).toMatchObject({ revision: last, events: last });
    expect(r.restored_from.graph_head).toBeNull(); // what the backup file holds
    expect(r.graph_head).toEqual({ revision: last, hash: graph.hash });
    expect(r.graph_hashed_by_migration).toBe(true);
    expect(r.bump.detail).toMatchObject({ backup_graph_revision: last, backup_graph_head: { revision: last, hash: graph.hash }, backup_graph_hashed_by_migration: true });
    // In words, on the restore's record as writ lease bumps shows it.
    const bumps = await runWrit(data, 'lease', 'bumps');
    expect(bumps.stdout).toContain(`and the graph revision ${last} (hash ${graph.hash}, hashed by the restore's migration: the backup is from before the graph log's hash chain)`);
    expect(bumps.stdout).not.toContain('not hashed');
  });
});
