import { closeSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runWrit } from '../support/cli.js';
import { takeEpochs as acquire } from '../support/data-dir-epochs.js';
import { requireDist } from '../support/server-process.js';

const dirs: string[] = [];
beforeAll(() => requireDist());
afterAll(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));

describe('writ restore over a damaged store', () => {
  it('refuses with STORE_DAMAGED and says what to do; --replace-damaged with --epoch-margin replaces it and says so', { timeout: 120_000 }, async () => {
    const data = mkdtempSync(join(tmpdir(), 'writ-restore-damaged-'));
    dirs.push(data);
    const backup = join(data, 'b.sqlite');
    expect(await acquire(data, 'wp:post:1', 2)).toEqual([1, 2]);
    expect((await runWrit(data, 'backup', backup)).code).toBe(0);
    // The disk fails: the store's header is overwritten.
    const fd = openSync(join(data, 'writ.sqlite'), 'r+');
    writeSync(fd, Buffer.alloc(100, 7), 0, 100, 0);
    closeSync(fd);

    const refused = await runWrit(data, 'restore', backup, '--epoch-margin', '100');
    expect(refused.code).toBe(1);
    expect(refused.output).toContain('writ: STORE_DAMAGED (Store damaged): the current store');
    expect(refused.output).toContain('--replace-damaged');
    const trusting = await runWrit(data, 'restore', backup, '--trust-backup', '--replace-damaged');
    expect(trusting.code).toBe(1);
    expect(trusting.output).toContain('UNPROCESSABLE');

    const r = await runWrit(data, 'restore', backup, '--epoch-margin', '100', '--replace-damaged', '--reason', 'disk failing');
    expect(r.code, r.output).toBe(0);
    expect(r.stdout).toMatch(/the replaced store was damaged \(SQLITE_NOTADB: file is not a database\): its epochs were not read/);
    expect(await acquire(data, 'wp:post:1', 1)).toEqual([103]);
  });
});
