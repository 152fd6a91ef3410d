import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runWrit } from '../support/cli.js';
import { CLI, REPO, requireDist } from '../../scripts/server-process.js';

const dirs: string[] = [];
beforeAll(() => requireDist());
afterAll(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));

/** What bump-epochs may change on the file: its bumps and the mark. */
function state(file: string): { bumps: number; standing: number; lifted_by: string | null } {
  const db = new Database(file, { readonly: true });
  try {
    const bumps = (db.prepare('SELECT COUNT(*) AS n FROM lease_epoch_bumps').get() as { n: number }).n;
    const standing = (db.prepare('SELECT COUNT(*) AS n FROM store_moves WHERE lifted_at IS NULL').get() as { n: number }).n;
    const lifted = db.prepare('SELECT lifted_by FROM store_moves ORDER BY seq DESC LIMIT 1').get() as { lifted_by: string | null };
    return { bumps, standing, lifted_by: lifted.lifted_by };
  } finally {
    db.close();
  }
}

describe('writ lease bump-epochs on a file moved to PostgreSQL', () => {
  it('is refused (STORE_MOVED, nothing changed) unless --lift-move-mark says N is above every epoch the database issued; then it bumps and lifts the mark', { timeout: 60_000 }, async () => {
    const data = mkdtempSync(join(tmpdir(), 'writ-bump-moved-'));
    dirs.push(data);
    const applied = await runWrit(data, 'graph', 'apply', 'graph/example.yaml');
    expect(applied.code, applied.output).toBe(0);
    const file = join(data, 'writ.sqlite');
    // Marked as `writ store copy` marks it (the database's replicas have issued epochs since, which the file cannot know).
    const db = new Database(file);
    db.prepare('INSERT INTO store_moves (at, moved_to) VALUES (?, ?)').run(Date.now(), 'postgres://writ@db.internal:5432/writ');
    db.close();
    const marked = state(file);

    const small = await runWrit(data, 'lease', 'bump-epochs', '--by', '10', '--reason', 'going back');
    expect(small.code, small.output).toBe(1);
    expect(small.output).toContain('writ: STORE_MOVED');
    expect(small.output).toContain('--lift-move-mark');
    expect(small.output).toContain('nothing was changed');
    expect(state(file)).toEqual(marked);

    const back = await runWrit(data, 'lease', 'bump-epochs', '--by', '1000000', '--reason', 'going back', '--lift-move-mark');
    expect(back.code, back.output).toBe(0);
    expect(back.output).toContain('had been moved to postgres://writ@db.internal:5432/writ');
    expect(state(file)).toMatchObject({ bumps: marked.bumps + 1, standing: 0, lifted_by: expect.stringMatching(/^operator/) });

    // The help says what the flag risks.
    const help = await runWrit(data, 'lease', 'bump-epochs', '--help');
    expect(help.output).toContain('[--lift-move-mark]');
    expect(help.output).toContain('issued again');
  });
});

describe('writ lease bump-epochs --lift-move-mark against PostgreSQL', () => {
  it('is a usage error (exit 2, nothing opened): the mark lives in the SQLite file, and the database has none', { timeout: 60_000 }, async () => {
    const data = mkdtempSync(join(tmpdir(), 'writ-bump-lift-pg-'));
    dirs.push(data);
    // Never reached: refused before any connection is tried.
    const url = 'postgres://writ@127.0.0.1:1/writ';
    const expectRefused = (r: { code: number; output: string }) => {
      expect(r.code, r.output).toBe(2);
      expect(r.output).toContain('writ: --lift-move-mark lifts the mark writ store copy leaves on the data directory\'s SQLite file');
      expect(r.output).toContain('leave out --lift-move-mark');
      expect(r.output).not.toMatch(/^\s+at /m);
    };
    expectRefused(await runWrit(data, 'lease', 'bump-epochs', '--by', '10', '--reason', 'PITR', '--lift-move-mark', '--database', url));
    const byEnv = await promisify(execFile)(process.execPath, [CLI, 'lease', 'bump-epochs', '--by', '10', '--reason', 'PITR', '--lift-move-mark', '--data-dir', data], { cwd: REPO, env: { ...process.env, WRIT_DATABASE_URL: url } }).then(
      ({ stdout, stderr }) => ({ code: 0, output: stdout + stderr }),
      (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, output: e.stdout + e.stderr }),
    );
    expectRefused(byEnv);
    expect(existsSync(data) ? readdirSync(data) : []).toEqual([]);
  });
});
