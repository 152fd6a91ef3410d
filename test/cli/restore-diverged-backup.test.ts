import Database from 'better-sqlite3';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SQLITE_SCHEMA_VERSION } from '../../src/store/sqlite/database.js';
import { runWrit } from '../support/cli.js';
import { requireDist } from '../support/server-process.js';

/**
 * `writ restore` of a backup migrated by a Writ numbered otherwise (a gap in its migrations) is refused
 * naming the backup file, not "the SQLite store" (which reads as the data directory's), and nothing of
 * the data directory changes.
 */

const dirs: string[] = [];
beforeAll(() => requireDist());
afterAll(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));

describe('writ restore of a backup whose migrations have a gap', () => {
  it('is refused SCHEMA_DIVERGED naming the backup file, and the data directory is left as it was', { timeout: 120_000 }, async () => {
    const data = mkdtempSync(join(tmpdir(), 'writ-restore-diverged-'));
    dirs.push(data);
    expect((await runWrit(data, 'graph', 'apply', 'graph/example.yaml')).code).toBe(0);
    const backup = join(data, 'from-a-branch.sqlite');
    expect((await runWrit(data, 'backup', backup)).code).toBe(0);
    const db = new Database(backup);
    db.prepare('DELETE FROM schema_migrations WHERE version = ?').run(SQLITE_SCHEMA_VERSION - 1);
    db.close();
    const listing = readdirSync(data).sort();
    const store = readFileSync(join(data, 'writ.sqlite'));

    for (const json of [false, true]) {
      const r = await runWrit(data, 'restore', backup, '--epoch-margin', '100', ...(json ? ['--json'] : []));
      expect(r.code, r.output).toBe(1);
      expect(r.output).toContain('SCHEMA_DIVERGED');
      expect(r.output).toContain(`the backup ${backup}'s applied migrations are not this Writ's: it lacks this Writ's migration ${SQLITE_SCHEMA_VERSION - 1}`);
      expect(r.output).toContain('restore it with the Writ that migrated it');
      expect(r.output).not.toContain('SQLite store\'s');
    }
    expect(readdirSync(data).sort()).toEqual(listing);
    expect(readFileSync(join(data, 'writ.sqlite')).equals(store)).toBe(true);
  });
});
