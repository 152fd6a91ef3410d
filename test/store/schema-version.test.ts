import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openDatabase, SQLITE_SCHEMA_VERSION } from '../../src/store/sqlite/database.js';
import { openSqliteStore } from '../../src/store/sqlite/sqlite-store.js';

const dirs: string[] = [];
afterAll(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));

describe('the SQLite schema version', () => {
  it('a store migrated by a newer Writ is refused with SCHEMA_TOO_NEW, and nothing in it changes', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'writ-schema-'));
    dirs.push(dir);
    const file = join(dir, 'writ.sqlite');
    const db = openDatabase(file);
    db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(SQLITE_SCHEMA_VERSION + 1, 'from-the-future', 0);
    const before = db.prepare('SELECT * FROM schema_migrations ORDER BY version').all();
    db.close();

    await expect(openSqliteStore(file)).rejects.toMatchObject({ code: 'SCHEMA_TOO_NEW', details: { schema_version: SQLITE_SCHEMA_VERSION + 1, known_version: SQLITE_SCHEMA_VERSION } });
    const check = new (await import('better-sqlite3')).default(file, { readonly: true });
    expect(check.prepare('SELECT * FROM schema_migrations ORDER BY version').all()).toEqual(before);
    check.close();
  });
});
