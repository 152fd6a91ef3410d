import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runWrit } from '../support/cli.js';
import { requireDist } from '../support/server-process.js';

const dirs: string[] = [];
beforeAll(() => requireDist());
afterAll(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));

function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'writ-not-a-dir-'));
  dirs.push(d);
  return d;
}

describe('a data directory that is a file, and a backup that is a directory', () => {
  it('writ serve and writ restore say what is wrong with a code, print no stack trace and create nothing', { timeout: 60_000 }, async () => {
    const dir = tempDir();
    const file = join(dir, 'F');
    writeFileSync(file, '');
    const serve = await runWrit(file, 'serve', '--port', '4841', '--no-upstream');
    expect(serve.code, serve.output).toBe(1);
    expect(serve.output).toContain(`writ: UNPROCESSABLE (Unprocessable): the data directory ${file} is not a directory`);
    expect(serve.output).not.toMatch(/\n\s+at /);

    const backupDir = join(dir, 'backups');
    mkdirSync(backupDir);
    const data = join(dir, 'D2');
    const restore = await runWrit(data, 'restore', backupDir, '--epoch-margin', '10', '--reason', 't');
    expect(restore.code, restore.output).toBe(1);
    expect(restore.output).toContain(`writ: UNPROCESSABLE (Unprocessable): ${backupDir} is a directory, not a backup`);
    expect(restore.output).not.toMatch(/\n\s+at /);
    const restoreInto = await runWrit(file, 'restore', backupDir, '--epoch-margin', '10', '--reason', 't');
    expect(restoreInto.output).not.toMatch(/\n\s+at /);
    expect(readdirSync(dir).sort()).toEqual(['F', 'backups']);
    expect(readdirSync(backupDir)).toEqual([]);
  });

  it('a data directory below a file (F/sub) is refused the same way by serve, graph apply, migrate and restore: no stack trace, nothing created', { timeout: 60_000 }, async () => {
    const dir = tempDir();
    const file = join(dir, 'F');
    writeFileSync(file, '');
    const below = join(file, 'sub');
    const backupDir = join(dir, 'backups');
    mkdirSync(backupDir);
    const backup = join(backupDir, 'b.sqlite');
    writeFileSync(backup, '');
    for (const args of [['serve', '--port', '4842', '--no-upstream'], ['graph', 'apply', 'graph/example.yaml'], ['migrate'], ['restore', backup, '--epoch-margin', '10', '--reason', 't']]) {
      const r = await runWrit(below, ...args);
      expect(r.code, `${args[0]}: ${r.output}`).toBe(1);
      expect(r.output).toContain(`writ: UNPROCESSABLE (Unprocessable): the data directory ${below} is not a directory (${file} is a file)`);
      expect(r.output).not.toMatch(/\n\s+at /);
    }
    expect(readdirSync(dir).sort()).toEqual(['F', 'backups']);
    expect(readdirSync(backupDir)).toEqual(['b.sqlite']);
  });
});
