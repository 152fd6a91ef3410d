import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runWrit } from '../support/cli.js';
import { takeEpochs as acquire } from '../support/data-dir-epochs.js';
import { requireDist } from '../support/server-process.js';

const dirs: string[] = [];
beforeAll(() => requireDist());
afterAll(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));

describe('writ restore over a store that was itself restored', () => {
  it('restoring the same backup twice never issues an epoch the replaced store issued, and keeps every restore on record', { timeout: 120_000 }, async () => {
    const data = mkdtempSync(join(tmpdir(), 'writ-restore-twice-'));
    dirs.push(data);
    const backup = join(data, 'b.sqlite');
    expect(await acquire(data, 'wp:post:1', 3)).toEqual([1, 2, 3]);
    expect((await runWrit(data, 'backup', backup)).code).toBe(0);

    const r1 = await runWrit(data, 'restore', backup, '--epoch-margin', '100', '--reason', 'r1');
    expect(r1.code, r1.output).toBe(0);
    const afterFirst = { post1: await acquire(data, 'wp:post:1', 5), post2: await acquire(data, 'wp:post:2', 3) };
    expect(afterFirst).toEqual({ post1: [104, 105, 106, 107, 108], post2: [101, 102, 103] });

    const r2 = await runWrit(data, 'restore', backup, '--epoch-margin', '100', '--reason', 'r2');
    expect(r2.code, r2.output).toBe(0);
    // Above what the replaced store issued (108, 103) plus the margin; a key neither knew starts above both floors added up.
    expect(await acquire(data, 'wp:post:1', 1)).toEqual([209]);
    expect(await acquire(data, 'wp:post:2', 1)).toEqual([204]);
    expect(await acquire(data, 'wp:post:3', 1)).toEqual([201]);

    const bumps = JSON.parse((await runWrit(data, 'lease', 'bumps', '--json')).stdout) as { kind: string; reason: string; floor: number }[];
    expect(bumps.map((b) => [b.kind, b.reason, b.floor])).toEqual([['RESTORE', 'r1', 100], ['RESTORE', 'r2', 200]]);
  });
});
