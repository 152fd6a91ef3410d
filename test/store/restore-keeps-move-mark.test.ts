import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { backupSqliteStore, restoreSqliteStore } from '../../src/store/sqlite/backup.js';
import { readStoreMove } from '../../src/store/sqlite/database.js';
import { openSqliteStore } from '../../src/store/sqlite/sqlite-store.js';

const dirs: string[] = [];
afterAll(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));

function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'writ-restore-mark-'));
  dirs.push(d);
  return d;
}

const options = { epochMargin: 1000, actor: 'operator:test', reason: 'disk lost', now: Date.now() };

/** A store with a backup taken before it was marked as moved (as `writ store copy` marks it, `pending` while the database has not committed). */
async function markedAfterBackup(pending: boolean): Promise<{ dir: string; file: string; backup: string }> {
  const dir = tempDir();
  const file = join(dir, 'writ.sqlite');
  const store = await openSqliteStore(file, { checkpointer: false });
  const backup = (await backupSqliteStore(store.writer, join(dir, 'backup.sqlite'))).file;
  await store.close();
  const db = new Database(file);
  db.prepare('INSERT INTO store_moves (at, moved_to, pending) VALUES (?, ?, ?)').run(1_700_000_000_000, 'postgres://writ@db.internal:5432/writ', pending ? 1 : 0);
  db.close();
  return { dir, file, backup };
}

describe('a restore over a file moved to PostgreSQL keeps its mark as it was', () => {
  for (const pending of [true, false]) {
    it(`${pending ? 'a copy that did not finish (pending)' : 'a finished copy'}: the restored file is refused the same way`, async () => {
      const t = await markedAfterBackup(pending);
      await restoreSqliteStore(t.backup, t.file, options);
      expect(readStoreMove(t.file)).toEqual({ at: 1_700_000_000_000, moved_to: 'postgres://writ@db.internal:5432/writ', pending });
    }, 60_000);
  }

  it('a replaced store with a column this Writ does not know (a newer Writ wrote it) is refused, not carried without it', async () => {
    const t = await markedAfterBackup(true);
    const db = new Database(t.file);
    db.exec("ALTER TABLE store_moves ADD COLUMN moved_by TEXT DEFAULT 'a newer writ'");
    db.close();
    await expect(restoreSqliteStore(t.backup, t.file, options)).rejects.toMatchObject({ code: 'SCHEMA_TOO_NEW', message: expect.stringContaining('store_moves (moved_by)') });
    expect(readStoreMove(t.file)).toMatchObject({ pending: true });
  }, 60_000);
});
