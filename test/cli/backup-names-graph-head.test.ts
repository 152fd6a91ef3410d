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
});
