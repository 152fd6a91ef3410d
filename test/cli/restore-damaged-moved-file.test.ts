import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, renameSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { maskDatabaseUrl } from '../../src/config/index.js';
import { createTestDatabase } from '../store/conformance/engines.js';
import { runWrit } from '../support/cli.js';
import { takeEpochs } from '../support/data-dir-epochs.js';
import { requireDist } from '../support/server-process.js';

const dirs: string[] = [];
const drops: (() => Promise<void>)[] = [];
beforeAll(() => requireDist());
afterAll(async () => {
  for (const d of drops.splice(0)) await d();
  dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true }));
});

function overwriteHeader(file: string): void {
  const fd = openSync(file, 'r+');
  writeSync(fd, Buffer.alloc(100, 7), 0, 100, 0);
  closeSync(fd);
}

/**
 * A data directory copied to PostgreSQL (writ store copy) after a backup was taken, whose file is then
 * damaged: the mark it carries cannot be read, and the backup has none.
 */
async function movedThenDamaged(): Promise<{ data: string; file: string; backup: string; url: string }> {
  const data = mkdtempSync(join(tmpdir(), 'writ-restore-moved-'));
  dirs.push(data);
  const backup = join(mkdtempSync(join(tmpdir(), 'writ-restore-moved-backup-')), 'b.sqlite');
  dirs.push(join(backup, '..'));
  expect(await takeEpochs(data, 'wp:post:1', 2)).toEqual([1, 2]);
  expect((await runWrit(data, 'backup', backup)).code).toBe(0);
  const db = await createTestDatabase('writ_restore_moved');
  drops.push(db.drop);
  const copy = await runWrit(data, 'store', 'copy', '--to', db.url);
  expect(copy.code, copy.output).toBe(0);
  const file = join(data, 'writ.sqlite');
  // The mark is kept beside the file as well, where a damaged file's replacement cannot take it away.
  expect(JSON.parse(readFileSync(`${file}.moved`, 'utf8'))).toMatchObject({ moved_to: maskDatabaseUrl(db.url), pending: false });
  overwriteHeader(file);
  return { data, file, backup, url: db.url };
}

async function expectMoved(data: string, url: string): Promise<void> {
  const r = await runWrit(data, 'graph', 'apply', 'graph/example.yaml');
  expect(r.code, r.output).toBe(1);
  expect(r.output).toContain('writ: STORE_MOVED');
  expect(r.output).toContain(new URL(url).pathname);
  expect(r.output).toContain('--lift-move-mark');
}

describe('a moved file that is damaged, replaced by a backup from before the move', () => {
  it('writ restore --replace-damaged: the restored file is still refused (STORE_MOVED) until the mark is lifted deliberately', { timeout: 180_000 }, async () => {
    const t = await movedThenDamaged();
    const r = await runWrit(t.data, 'restore', t.backup, '--epoch-margin', '100', '--replace-damaged', '--reason', 'disk failing');
    expect(r.code, r.output).toBe(0);
    await expectMoved(t.data, t.url);

    const back = await runWrit(t.data, 'lease', 'bump-epochs', '--by', '1000', '--reason', 'back to the file', '--lift-move-mark');
    expect(back.code, back.output).toBe(0);
    expect(back.output).toContain('had been moved to');
    expect(existsSync(`${t.file}.moved`)).toBe(false);
    // Who took it back, and why, is on record in the restored file (which had no row of the move).
    const db = new Database(t.file, { readonly: true });
    expect(db.prepare('SELECT moved_to, lifted_reason FROM store_moves').all()).toEqual([{ moved_to: maskDatabaseUrl(t.url), lifted_reason: 'back to the file' }]);
    db.close();
    const applied = await runWrit(t.data, 'graph', 'apply', 'graph/example.yaml');
    expect(applied.code, applied.output).toBe(0);
  });

  it('moved aside by hand (with its -wal and -shm) and the backup restored into the emptied directory: still refused', { timeout: 180_000 }, async () => {
    const t = await movedThenDamaged();
    renameSync(t.file, join(t.data, 'damaged.sqlite'));
    for (const f of [`${t.file}-wal`, `${t.file}-shm`]) if (existsSync(f)) renameSync(f, join(t.data, `damaged.sqlite${f.slice(t.file.length)}`));
    const r = await runWrit(t.data, 'restore', t.backup, '--epoch-margin', '100', '--reason', 'disk failing');
    expect(r.code, r.output).toBe(0);
    await expectMoved(t.data, t.url);
  });
});
