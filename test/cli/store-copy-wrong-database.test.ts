import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../scripts/server-process.js';
import { createTestDatabase } from '../store/conformance/engines.js';
import { runWrit } from '../support/cli.js';
import { takeEpochs } from '../support/data-dir-epochs.js';
import { requireDist } from '../support/server-process.js';

const dirs: string[] = [];
const drops: (() => Promise<void>)[] = [];
beforeAll(() => requireDist());
afterAll(async () => {
  for (const d of drops.splice(0)) await d();
  dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true }));
});

describe('writ store copy --to a database that refuses the connection', () => {
  it('a database that does not exist, or a role that does not: UNPROCESSABLE naming what to fix in --to (not OVERLOADED, which says to retry), nothing changed', { timeout: 60_000 }, async () => {
    const data = mkdtempSync(join(tmpdir(), 'writ-copy-wrong-db-'));
    dirs.push(data);
    expect(await takeEpochs(data, 'wp:post:1', 2)).toEqual([1, 2]);
    const file = join(data, 'writ.sqlite');
    const bytes = readFileSync(file);
    const files = readdirSync(data).sort();
    const db = await createTestDatabase('writ_copy_wrong');
    drops.push(db.drop);
    const missingDatabase = new URL(db.url);
    missingDatabase.pathname = `${missingDatabase.pathname}_missing`;
    const missingRole = new URL(db.url);
    missingRole.username = 'writ_no_such_role';
    for (const [to, said] of [[missingDatabase, 'does not exist'], [missingRole, 'role "writ_no_such_role" does not exist']] as const) {
      const r = await runWrit(data, 'store', 'copy', '--to', to.toString());
      expect(r.code, r.output).toBe(1);
      expect(r.output).toMatch(/^writ: UNPROCESSABLE \(Unprocessable\): /m);
      expect(r.output).toContain(said);
      expect(r.output).toContain('--to');
      expect(r.output).toContain('nothing was changed');
      expect(r.output).not.toMatch(/\n\s+at /);
      expect(readFileSync(file).equals(bytes)).toBe(true);
      expect(readdirSync(data).sort()).toEqual(files);
    }
  });

  it('a server that cannot be reached: OVERLOADED naming the database and what to check in --to, nothing changed', { timeout: 60_000 }, async () => {
    const data = mkdtempSync(join(tmpdir(), 'writ-copy-unreachable-'));
    dirs.push(data);
    expect(await takeEpochs(data, 'wp:post:1', 1)).toEqual([1]);
    const file = join(data, 'writ.sqlite');
    const bytes = readFileSync(file);
    const files = readdirSync(data).sort();
    const port = await freePort(); // nothing listens there
    const r = await runWrit(data, 'store', 'copy', '--to', `postgres://postgres:pw-hidden@127.0.0.1:${port}/writ`);
    expect(r.code, r.output).toBe(1);
    expect(r.output).toMatch(/^writ: OVERLOADED \(Overloaded\): /m);
    expect(r.output).toContain(`postgres://postgres:…@127.0.0.1:${port}/writ`);
    expect(r.output).toContain('host and port in --to; nothing was changed');
    expect(r.output).not.toContain('pw-hidden');
    expect(readFileSync(file).equals(bytes)).toBe(true);
    expect(readdirSync(data).sort()).toEqual(files);
  });
});
