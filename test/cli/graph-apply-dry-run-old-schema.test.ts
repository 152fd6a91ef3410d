import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MIGRATIONS } from '../../src/store/sqlite/migrations/index.js';
import { SQLITE_SCHEMA_VERSION } from '../../src/store/sqlite/database.js';
import { runWrit } from '../support/cli.js';
import { REPO } from '../support/harness.js';
import { requireDist } from '../support/server-process.js';

const dirs: string[] = [];
beforeAll(() => requireDist());
afterAll(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));

/** A data directory whose store an older Writ (migrations 1-10) left. */
function dataDirAtVersion10(): string {
  const dir = mkdtempSync(join(tmpdir(), 'writ-dry-old-'));
  dirs.push(dir);
  const db = new Database(join(dir, 'writ.sqlite'));
  db.pragma('journal_mode = WAL');
  db.exec('CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)');
  for (const m of MIGRATIONS.filter((x) => x.version <= 10)) {
    db.exec(m.sql);
    db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(m.version, m.name, 0);
  }
  db.close();
  return dir;
}

function versionOf(dir: string): number {
  const db = new Database(join(dir, 'writ.sqlite'), { readonly: true });
  try {
    return (db.prepare('SELECT MAX(version) AS v FROM schema_migrations').get() as { v: number }).v;
  } finally {
    db.close();
  }
}

describe('writ graph apply --dry-run on a SQLite store of an older schema', () => {
  it('says the schema is older and to run writ migrate, and migrates nothing (as on PostgreSQL)', { timeout: 60_000 }, async () => {
    const dir = dataDirAtVersion10();
    const r = await runWrit(dir, 'graph', 'apply', join(REPO, 'graph/example.yaml'), '--dry-run');
    expect(r.code, r.output).toBe(1);
    expect(r.output).toContain('writ: UNPROCESSABLE');
    expect(r.output).toContain(`the SQLite store's schema is at version 10, this Writ needs ${SQLITE_SCHEMA_VERSION}: run \`writ migrate\``);
    expect(versionOf(dir)).toBe(10);
    // Without --dry-run the same command migrates, as a server starting on it would.
    const applied = await runWrit(dir, 'graph', 'apply', join(REPO, 'graph/example.yaml'));
    expect(applied.code, applied.output).toBe(0);
    expect(versionOf(dir)).toBe(SQLITE_SCHEMA_VERSION);
  });
});
