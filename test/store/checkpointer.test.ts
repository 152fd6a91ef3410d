import { spawn } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { startCheckpointer } from '../../src/store/sqlite/checkpointer.js';
import { openDatabase } from '../../src/store/sqlite/database.js';
import { openSqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { requireDist } from '../support/server-process.js';

/** A file database with `pages` pages written in separate commits (each row fills most of a page). */
function written(pages: number) {
  const file = join(mkdtempSync(join(tmpdir(), 'writ-ckpt-')), 'writ.sqlite');
  const db = openDatabase(file);
  db.exec('CREATE TABLE blobs (id INTEGER PRIMARY KEY, b BLOB NOT NULL)');
  const insert = db.prepare('INSERT INTO blobs (b) VALUES (?)');
  const write = () => {
    for (let i = 0; i < pages; i++) insert.run(Buffer.alloc(3_000, i % 256));
  };
  return { db, file, write };
}

async function until(condition: () => boolean, timeoutMs: number): Promise<boolean> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    if (condition()) return true;
    await new Promise((r) => setTimeout(r, 20));
  }
  return condition();
}

describe('WAL checkpoints run in a worker, not in the committing request', () => {
  it('the worker copies committed pages into the database file while the serving connection never checkpoints', async () => {
    const { db, file, write } = written(600);
    const checkpointer = startCheckpointer(db, { intervalMs: 20 });
    try {
      expect(db.pragma('wal_autocheckpoint', { simple: true })).toBe(10_000);
      write();
      // 600 pages of 4 KiB in the WAL; the database file holds them once a checkpoint ran.
      expect(await until(() => statSync(file).size >= 600 * 3_000, 10_000)).toBe(true);
    } finally {
      checkpointer.stop();
    }
    expect(db.pragma('wal_autocheckpoint', { simple: true })).toBe(1_000);
    db.close();
  });

  it('without it (control): the same writes stay in the WAL, below the serving connection\'s threshold', async () => {
    const { db, file, write } = written(600);
    db.pragma('wal_autocheckpoint = 10000');
    write();
    await new Promise((r) => setTimeout(r, 200));
    expect(statSync(file).size).toBeLessThan(600 * 3_000);
    db.close();
  });

  it('does nothing for an in-memory database (no worker, the connection\'s checkpoint setting untouched)', () => {
    const db = openDatabase(':memory:');
    const before = db.pragma('wal_autocheckpoint', { simple: true });
    const checkpointer = startCheckpointer(db, { fallbackPages: 12_345 });
    expect(db.pragma('wal_autocheckpoint', { simple: true })).toBe(before);
    checkpointer.stop();
    db.close();
  });
});

/** The WAL header's checkpoint sequence number (big-endian at offset 12): it grows by one each time the WAL restarts. */
function walRestartsSoFar(file: string): number {
  const fd = openSync(`${file}-wal`, 'r');
  try {
    const header = Buffer.alloc(16);
    readSync(fd, header, 0, 16, 0);
    return header.readUInt32BE(12);
  } finally {
    closeSync(fd);
  }
}

describe('the WAL restarts on the worker\'s thread', () => {
  it('after a checkpoint copied the whole WAL, the worker restarts it (the header sync is its own); a request\'s next commit appends, and an idle WAL is left alone', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'writ-ckpt-')), 'writ.sqlite');
    const db = openDatabase(file);
    const counted = () => db.prepare('SELECT restarts FROM wal_restarts').pluck().get() as number;
    const spend = db.prepare('INSERT INTO seen_ids (namespace, id, expires_at) VALUES (?, ?, ?)');
    const checkpointer = startCheckpointer(db, { intervalMs: 20 });
    try {
      spend.run('test', 'first', Date.now() + 60_000);
      expect(await until(() => counted() === 1, 5_000)).toBe(true);
      const sequence = walRestartsSoFar(file);
      // The worker restarted the WAL: this connection's commit appends to it and restarts nothing.
      spend.run('test', 'second', Date.now() + 60_000);
      expect(walRestartsSoFar(file)).toBe(sequence);
      // Copied in turn, the WAL is restarted by the worker again.
      expect(await until(() => counted() === 2, 5_000)).toBe(true);
      expect(walRestartsSoFar(file)).toBe(sequence + 1);
      // Nobody writes: the worker neither copies its own update nor restarts again.
      await new Promise((r) => setTimeout(r, 200));
      expect(counted()).toBe(2);
      expect(walRestartsSoFar(file)).toBe(sequence + 1);
    } finally {
      await checkpointer.stop();
      db.close();
    }
  });
});

describe('the store syncs the worker\'s WAL restart itself, at once', () => {
  it('a read after the restart finds it durable already and waits for no sync (21% of reads at 50 writes/s did)', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'writ-ckpt-')), 'writ.sqlite');
    const store = await openSqliteStore(file);
    // Read beside the store, so that looking does not sync anything.
    const restarts = () => store.writer.prepare('SELECT restarts FROM wal_restarts').pluck().get() as number;
    try {
      for (let i = 1; i <= 3; i++) {
        await store.readWrite((tx) => tx.singleUse.spend('test', `id-${i}`, Date.now() + 60_000, Date.now()));
        const synced = store.syncs();
        expect(await until(() => restarts() === i, 5_000)).toBe(true);
        // The worker's restart write changed the WAL-index header: the store syncs it without being asked.
        expect(await until(() => store.syncs() > synced, 2_000)).toBe(true);
        const before = store.syncs();
        expect(await store.read((tx) => tx.singleUse.isSpent('test', `id-${i}`, Date.now()))).toBe(true);
        expect(store.syncs()).toBe(before);
      }
    } finally {
      await store.close();
    }
  });
});

describe('the worker never keeps a process alive', () => {
  it('a process that opened a store, wrote, saw the WAL restarted and has nothing left to do exits without closing it (one started with --input-type=module too)', async () => {
    requireDist();
    const file = join(mkdtempSync(join(tmpdir(), 'writ-ckpt-')), 'writ.sqlite');
    const script = `
      const { openSqliteStore } = await import(${JSON.stringify(new URL('../../dist/src/store/sqlite/sqlite-store.js', import.meta.url).href)});
      const store = await openSqliteStore(${JSON.stringify(file)});
      await store.readWrite((tx) => tx.singleUse.spend('test', 'id', Date.now() + 60000, Date.now()));
      const restarts = () => store.writer.prepare('SELECT restarts FROM wal_restarts').pluck().get();
      const end = Date.now() + 5000;
      while (restarts() === 0 && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
      console.log('restarts', restarts());`;
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
    let output = '';
    child.stdout.on('data', (d) => (output += String(d)));
    const exited = await new Promise<number | null>((resolve) => {
      const timer = setTimeout(() => (child.kill('SIGKILL'), resolve(null)), 15_000);
      child.on('exit', (code) => (clearTimeout(timer), resolve(code)));
    });
    expect(output).toContain('restarts 1');
    expect(exited).toBe(0);
  });
});
