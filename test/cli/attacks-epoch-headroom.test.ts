/**
 * `writ lease bump-epochs` and `writ restore --epoch-margin` near the largest epoch JavaScript counts exactly
 * (the store refuses a bump that would leave an epoch or the floor past 2^52: MAX_BUMPED_EPOCH).
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_BUMPED_EPOCH } from '../../src/lease/index.js';
import { openSqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { REPO } from '../support/harness.js';
import { CLI, requireDist } from '../support/server-process.js';
import { epochsOf, take } from '../store/conformance/helpers.js';

const run = promisify(execFile);
const dirs: string[] = [];
beforeAll(() => requireDist());
afterAll(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));

async function writ(args: string[]): Promise<{ out: string; code: number }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [CLI, ...args], { cwd: REPO });
    return { out: stdout + stderr, code: 0 };
  } catch (e) {
    const err = e as { stdout: string; stderr: string; code: number };
    return { out: err.stdout + err.stderr, code: err.code };
  }
}

describe('epoch bumps from the command line, near 2^52', () => {
  it('bump-epochs and restore refuse a margin that would carry an epoch past 2^52, and leave the store as it was', { timeout: 60_000 }, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'writ-headroom-'));
    dirs.push(dir);
    const file = join(dir, 'writ.sqlite');
    const args = ['--data-dir', dir];
    let store = await openSqliteStore(file);
    await take(store, ['k:1'], 'agent-a');
    // Where some 4 500 bumps of the largest margin would leave a store (one bump here, below the CLI's bound).
    await store.readWrite((tx) => tx.leases.bumpEpochs({ kind: 'BUMP', margin: MAX_BUMPED_EPOCH - 100, actor: 'op', reason: 'many bumps', detail: {}, now: Date.now() }));
    await store.close();
    const backupFile = join(dir, 'b.sqlite');
    expect((await writ(['backup', backupFile, ...args])).code).toBe(0);
    const bumpsBefore = (await writ(['lease', 'bumps', '--json', ...args])).out;
    const keysOf = async () => {
      const s = await openSqliteStore(file);
      try {
        return await s.read((tx) => tx.leases.listKeys({}).then((p) => p.keys));
      } finally {
        await s.close();
      }
    };
    const keysBefore = await keysOf();

    const bump = await writ(['lease', 'bump-epochs', '--by', '1000', '--reason', 'again', ...args]);
    expect(bump.code, bump.out).toBe(1);
    expect(bump.out).toContain('writ: UNPROCESSABLE');
    const restore = await writ(['restore', backupFile, '--epoch-margin', '1000', '--reason', 'again', ...args]);
    expect(restore.code, restore.out).toBe(1);
    expect(restore.out).toContain('writ: UNPROCESSABLE');
    expect((await writ(['lease', 'bumps', '--json', ...args])).out).toBe(bumpsBefore);
    expect(await keysOf()).toEqual(keysBefore);
    // No copy of the restore left behind, and the store not set aside.
    expect(readdirSync(dir).sort()).toEqual(['admin.jwk', 'b.sqlite', 'writ.sqlite']);

    // What fits is done.
    const fits = await writ(['lease', 'bump-epochs', '--by', '50', '--reason', 'fits', ...args]);
    expect(fits.code, fits.out).toBe(0);
    store = await openSqliteStore(file);
    try {
      expect(epochsOf(await take(store, ['k:1'], 'agent-b'))).toEqual({ 'k:1': MAX_BUMPED_EPOCH - 100 + 1 + 50 + 1 });
    } finally {
      await store.close();
    }
  });
});
