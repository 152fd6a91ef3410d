import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { backupSqliteStore, restoreSqliteStore, summarize } from '../../src/store/sqlite/backup.js';
import { openSqliteStore } from '../../src/store/sqlite/sqlite-store.js';

const dirs: string[] = [];
afterAll(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));

function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'writ-restore-scratch-'));
  dirs.push(d);
  return d;
}

const savedTmp = process.env.TMPDIR;
afterEach(() => {
  if (savedTmp === undefined) delete process.env.TMPDIR;
  else process.env.TMPDIR = savedTmp;
});

const options = { epochMargin: 100, actor: 'operator:test', reason: 'new machine', now: Date.now() };

async function aBackup(dir: string): Promise<string> {
  const store = await openSqliteStore(join(dir, 'source.sqlite'), { checkpointer: false });
  await store.readWrite((tx) => tx.leases.bumpEpochs({ kind: 'BUMP', margin: 7, actor: 'a', reason: 'r', detail: {}, now: 1 }));
  const b = await backupSqliteStore(store.writer, join(dir, 'backup.sqlite'));
  await store.close();
  return b.file;
}

describe('writ restore works beside the data file, and leaves nothing behind when it fails', () => {
  it('does not use the temporary directory (a small tmpfs, or another device than the data)', async () => {
    const backup = await aBackup(tempDir());
    const data = join(tempDir(), 'data');
    process.env.TMPDIR = join(tempDir(), 'no-such-tmp'); // what os.tmpdir() answers: unusable
    const r = await restoreSqliteStore(backup, join(data, 'writ.sqlite'), options);
    expect(summarize(r.data_file).max_epoch).toBe(0);
    expect(readdirSync(data).filter((f) => !f.startsWith('writ.sqlite'))).toEqual([]);
  }, 60_000);

  it('into a data directory that does not exist: a refused backup leaves no directory made for it', async () => {
    const host = tempDir();
    const junk = join(host, 'junk.sqlite');
    writeFileSync(junk, 'not a database at all');
    const dataFile = join(host, 'new-host', 'data', 'writ.sqlite');
    await expect(restoreSqliteStore(junk, dataFile, options)).rejects.toMatchObject({ code: 'UNPROCESSABLE', message: expect.stringContaining(`${junk} is not a SQLite database`) });
    expect(existsSync(join(host, 'new-host'))).toBe(false);
    expect(readdirSync(host)).toEqual(['junk.sqlite']);
  }, 60_000);

  it('into an empty data directory, and over a store: a refused backup leaves the directory as it was (no candidate, no -wal or -shm)', async () => {
    const host = tempDir();
    const backup = await aBackup(host);
    const junk = join(host, 'junk.sqlite');
    writeFileSync(junk, 'not a database at all');
    const empty = join(host, 'empty');
    mkdirSync(empty);
    await expect(restoreSqliteStore(junk, join(empty, 'writ.sqlite'), options)).rejects.toMatchObject({ code: 'UNPROCESSABLE' });
    expect(readdirSync(empty)).toEqual([]);
    const full = join(host, 'full');
    await restoreSqliteStore(backup, join(full, 'writ.sqlite'), options);
    const before = readdirSync(full).sort();
    await expect(restoreSqliteStore(junk, join(full, 'writ.sqlite'), options)).rejects.toMatchObject({ code: 'UNPROCESSABLE' });
    expect(readdirSync(full).sort()).toEqual(before);
  }, 60_000);
});
