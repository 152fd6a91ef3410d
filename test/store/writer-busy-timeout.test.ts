import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { openSqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { WritError } from '../../src/errors.js';

const dirs: string[] = [];
afterAll(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));
const FAR = Date.now() + 3_600_000;

async function open(busyTimeoutMs: number) {
  const dir = mkdtempSync(join(tmpdir(), 'writ-busy-'));
  dirs.push(dir);
  const file = join(dir, 'writ.db');
  return { store: await openSqliteStore(file, { checkpointer: false, busyTimeoutMs }), file };
}

describe('the store\'s write connection and its busy timeout (the group commit is its only user)', () => {
  it('switches the busy timeout off once, not twice a transaction; a tool taking `writer` gets it back, and BEGIN alone runs without it from then on', async () => {
    const { store } = await open(5000);
    const exec = vi.spyOn(Database.prototype, 'exec');
    const pragmas = () => exec.mock.calls.filter(([sql]) => String(sql).includes('busy_timeout')).map(([sql]) => String(sql));
    try {
      for (let i = 0; i < 5; i++) await store.readWrite((tx) => tx.singleUse.spend('assertion', `a-${i}`, FAR, Date.now()));
      expect(pragmas()).toEqual(['PRAGMA busy_timeout = 0']);
      const writer = store.writer;
      expect(writer.pragma('busy_timeout', { simple: true })).toBe(5000);
      exec.mockClear();
      await store.readWrite((tx) => tx.singleUse.spend('assertion', 'b', FAR, Date.now()));
      expect(pragmas()).toEqual(['PRAGMA busy_timeout = 0', 'PRAGMA busy_timeout = 5000']);
      expect(writer.pragma('busy_timeout', { simple: true })).toBe(5000);
    } finally {
      exec.mockRestore();
      await store.close();
    }
  });

  it('still waits for another connection\'s write lock without blocking the event loop, and gives up after the busy timeout (OVERLOADED), changing nothing', async () => {
    const { store, file } = await open(300);
    const other = new Database(file);
    try {
      await store.readWrite((tx) => tx.singleUse.spend('assertion', 'first', FAR, Date.now()));
      // Held briefly: the write waits for it, and the event loop runs meanwhile.
      other.exec('BEGIN IMMEDIATE');
      let ticks = 0;
      const timer = setInterval(() => ticks++, 5);
      const waiting = store.readWrite((tx) => tx.singleUse.spend('assertion', 'waited', FAR, Date.now()));
      await new Promise((r) => setTimeout(r, 100));
      other.exec('COMMIT');
      await waiting;
      clearInterval(timer);
      expect(ticks).toBeGreaterThan(5);
      expect(await store.read((tx) => tx.singleUse.isSpent('assertion', 'waited', Date.now()))).toBe(true);
      // Held past the busy timeout: refused, nothing written.
      other.exec('BEGIN IMMEDIATE');
      const refused = await store.readWrite((tx) => tx.singleUse.spend('assertion', 'refused', FAR, Date.now())).catch((e: unknown) => e);
      other.exec('COMMIT');
      expect(refused).toBeInstanceOf(WritError);
      expect(refused).toMatchObject({ code: 'OVERLOADED' });
      expect(await store.read((tx) => tx.singleUse.isSpent('assertion', 'refused', Date.now()))).toBe(false);
    } finally {
      other.close();
      await store.close();
    }
  });
});
