import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openSqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { runWrit } from '../support/cli.js';
import { requireDist } from '../support/server-process.js';

const dirs: string[] = [];
const children: ChildProcess[] = [];
beforeAll(() => requireDist());
afterAll(() => {
  for (const c of children) c.kill();
  dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true }));
});

/** Another process holding `file` locked (as a restore or a store copy does); resolves once it holds it. Closing its stdin lets go. */
async function lockedByAnotherProcess(file: string): Promise<ChildProcess> {
  const child = spawn(process.execPath, [join(dirname(fileURLToPath(import.meta.url)), 'fixtures/store-locker.mjs'), file], { stdio: ['pipe', 'pipe', 'inherit'] });
  children.push(child);
  await new Promise<void>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes('held\n')) resolve();
    });
    child.on('exit', (code) => reject(new Error(`the locking process exited (${code})`)));
  });
  return child;
}

describe('a store another process holds locked past the busy timeout', () => {
  it('is STORE_IN_USE saying another process holds the file, not SQLITE_BUSY; once let go, it opens', { timeout: 60_000 }, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'writ-locked-'));
    dirs.push(dir);
    const file = join(dir, 'writ.sqlite');
    await (await openSqliteStore(file, { checkpointer: false })).close();
    const locker = await lockedByAnotherProcess(file);

    await expect(openSqliteStore(file, { checkpointer: false, busyTimeoutMs: 300 })).rejects.toMatchObject({
      code: 'STORE_IN_USE',
      message: expect.stringContaining(`${file} is held locked by another process`),
    });
    // A command on the store, and the ones that read the file's move mark first (never reaching the database here).
    for (const args of [['lease', 'ls'], ['store', 'copy', '--to', 'postgres://writ@127.0.0.1:1/writ'], ['lease', 'bump-epochs', '--by', '5', '--reason', 'r']]) {
      const cli = await runWrit(dir, ...args);
      expect(cli.code, cli.output).toBe(1);
      expect(cli.output, args.join(' ')).toContain('writ: STORE_IN_USE (Store in use): ');
      expect(cli.output, args.join(' ')).toContain('held locked by another process');
      expect(cli.output, args.join(' ')).not.toMatch(/^\s+at /m);
    }

    const gone = new Promise((r) => locker.once('exit', r));
    locker.stdin!.end();
    await gone;
    await (await openSqliteStore(file, { checkpointer: false, busyTimeoutMs: 300 })).close();
  });
});
