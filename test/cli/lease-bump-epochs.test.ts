import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { WritStore } from '../../src/store/contract.js';
import { openPostgresStore } from '../../src/store/postgres/index.js';
import { openSqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { REPO } from '../support/harness.js';
import { CLI, requireDist } from '../support/server-process.js';
import { createTestDatabase } from '../store/conformance/engines.js';
import { epochsOf, take } from '../store/conformance/helpers.js';

const run = promisify(execFile);
const dirs: string[] = [];
const drops: (() => Promise<void>)[] = [];
beforeAll(() => requireDist());
afterAll(async () => {
  for (const d of drops.splice(0)) await d();
  dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true }));
});

async function writ(args: string[]): Promise<{ out: string; code: number }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [CLI, ...args], { cwd: REPO });
    return { out: stdout + stderr, code: 0 };
  } catch (e) {
    const err = e as { stdout: string; stderr: string; code: number };
    return { out: err.stdout + err.stderr, code: err.code };
  }
}

interface Place {
  args: string[];
  open(): Promise<WritStore>;
}

const places: Record<'sqlite' | 'postgres', () => Promise<Place>> = {
  async sqlite() {
    const dir = mkdtempSync(join(tmpdir(), 'writ-bump-'));
    dirs.push(dir);
    return { args: ['--data-dir', dir], open: () => openSqliteStore(join(dir, 'writ.sqlite')) };
  },
  async postgres() {
    const dir = mkdtempSync(join(tmpdir(), 'writ-bump-'));
    dirs.push(dir);
    const db = await createTestDatabase('writ_bump');
    drops.push(db.drop);
    return { args: ['--data-dir', dir, '--database', db.url], open: () => openPostgresStore(db.url) };
  },
};

describe.each(['sqlite', 'postgres'] as const)('writ lease bump-epochs [%s]', (engine) => {
  it('refuses bad input and changes nothing; then raises every epoch and fences the holder out', { timeout: 60_000 }, async () => {
    const place = await places[engine]();
    let store = await place.open();
    const held = await take(store, ['k:1'], 'agent-a', { ttlMs: 60_000 });
    await store.close();

    for (const bad of [['--by', '0', '--reason', 'r'], ['--by', 'abc', '--reason', 'r'], ['--by=-3', '--reason', 'r'], ['--by', '5'], ['--by', '10000000000000', '--reason', 'r']]) {
      const r = await writ(['lease', 'bump-epochs', ...bad, ...place.args]);
      expect(r.code, bad.join(' ')).toBe(1);
      expect(r.out, bad.join(' ')).toContain('writ: UNPROCESSABLE');
    }
    expect((await writ(['lease', 'bumps', '--json', ...place.args])).out.trim()).toBe('[]');

    const ok = await writ(['lease', 'bump-epochs', '--by', '1000', '--reason', 'recovered to 09:00', '--json', ...place.args]);
    expect(ok.code, ok.out).toBe(0);
    expect(JSON.parse(ok.out)).toMatchObject({ kind: 'BUMP', margin: 1000, floor: 1000, keys: 1, leases_ended: 1, max_epoch: 1001, reason: 'recovered to 09:00' });

    store = await place.open();
    const fence = await store.read((tx) => tx.leases.fenceState('k:1', held.tokenHash, held.leaseId));
    expect(fence.lease?.state).toBe('EXPIRED');
    expect(epochsOf(await take(store, ['k:1'], 'agent-b'))).toEqual({ 'k:1': 1002 });
    expect(epochsOf(await take(store, ['k:2'], 'agent-b'))).toEqual({ 'k:2': 1001 });
    await store.close();
    const listed = await writ(['lease', 'bumps', ...place.args]);
    expect(listed.out).toMatch(/#1 .* BUMP by operator.*epochs \+1000 on 1 keys, floor 1000, 1 leases ended \(recovered to 09:00\)/);
  });
});

describe('writ backup and writ restore refuse what they cannot do safely', () => {
  it('restore needs exactly one of --epoch-margin N and --trust-backup; neither command runs on PostgreSQL; nothing changes', { timeout: 60_000 }, async () => {
    const place = await places.sqlite();
    const store = await place.open();
    await take(store, ['k:1'], 'agent-a');
    await store.close();
    const backupFile = join(place.args[1]!, 'b.sqlite');
    expect((await writ(['backup', backupFile, ...place.args])).code).toBe(0);
    for (const bad of [[], ['--epoch-margin', '0'], ['--epoch-margin', 'many'], ['--epoch-margin', '5', '--trust-backup'], ['--epoch-margin', '10000000000000'], ['--epoch-margin', '5', '--reason', ' ']]) {
      const r = await writ(['restore', backupFile, ...bad, ...place.args]);
      expect(r.code, bad.join(' ')).toBe(1);
      expect(r.out, bad.join(' ')).toContain('writ: UNPROCESSABLE');
    }
    expect((await writ(['backup', backupFile, ...place.args])).out).toContain('writ: UNPROCESSABLE');
    const pgUrl = ['--database', 'postgres://postgres@127.0.0.1:5432/postgres'];
    for (const cmd of [['backup', join(place.args[1]!, 'pg.sqlite')], ['restore', backupFile, '--epoch-margin', '5']]) {
      const r = await writ([...cmd, ...place.args, ...pgUrl]);
      expect(r.code).toBe(1);
      expect(r.out).toContain("backups are the database's");
    }
    expect((await writ(['lease', 'bumps', '--json', ...place.args])).out.trim()).toBe('[]');
  });
});
