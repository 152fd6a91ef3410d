import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SQLITE_SCHEMA_VERSION } from '../../src/store/sqlite/database.js';
import { runWrit } from '../support/cli.js';
import { takeEpochs } from '../support/data-dir-epochs.js';
import { requireDist } from '../support/server-process.js';

const dirs: string[] = [];
beforeAll(() => requireDist());
afterAll(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));

function tempDir(prefix: string): string {
  const d = mkdtempSync(join(tmpdir(), prefix));
  dirs.push(d);
  return d;
}

describe('writ backup of a store a newer Writ migrated', () => {
  it('is refused SCHEMA_TOO_NEW naming the store, before anything is written (no backup file left behind with the error)', { timeout: 60_000 }, async () => {
    const data = tempDir('writ-backup-newer-');
    const out = tempDir('writ-backup-newer-out-');
    expect(await takeEpochs(data, 'wp:post:1', 2)).toEqual([1, 2]);
    const file = join(data, 'writ.sqlite');
    const db = new Database(file);
    db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(SQLITE_SCHEMA_VERSION + 1, 'a later Writ', Date.now());
    db.pragma('journal_mode = DELETE');
    db.close();
    const bytes = readFileSync(file);
    const files = readdirSync(data).sort();

    const r = await runWrit(data, 'backup', join(out, 'b.sqlite'));
    expect(r.code, r.output).toBe(1);
    expect(r.output).toContain(`writ: SCHEMA_TOO_NEW (Store schema too new): ${file} has schema version ${SQLITE_SCHEMA_VERSION + 1}`);
    expect(r.output).not.toMatch(/\n\s+at /);
    expect(readdirSync(out)).toEqual([]);
    expect(readFileSync(file).equals(bytes)).toBe(true);
    expect(readdirSync(data).sort()).toEqual(files);
  });
});
