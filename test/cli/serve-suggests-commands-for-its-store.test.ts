import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { createTestDatabase } from '../store/conformance/engines.js';
import { REPO } from '../support/harness.js';
import { requireDist, startServerProcess, type ServerProcess } from '../support/server-process.js';

/**
 * `writ serve` ends its start-up with commands to try. A `writ` command reads ./data unless told
 * otherwise, so a server on another data directory, or on PostgreSQL, names its store in them: each
 * works as printed, from the checkout, with nothing exported.
 */
const run = promisify(execFile);
const cleanups: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function suggestedTraceWorks(server: ServerProcess): Promise<string> {
  // Printed just after "listening on", which is what starting the process waits for.
  await expect.poll(() => server.log(), { timeout: 10_000 }).toContain('node bin/writ trace ');
  const line = server.log().split('\n').find((l) => l.includes('node bin/writ trace '));
  const command = line!.slice(line!.indexOf('node bin/writ trace '));
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('WRIT_')));
  const { stdout } = await run('sh', ['-c', command], { cwd: REPO, env });
  expect(stdout).toMatch(/ALLOW/);
  return command;
}

describe('the commands `writ serve` suggests at start', () => {
  it('on a data directory other than ./data: they name it', async () => {
    requireDist();
    const server = await startServerProcess();
    cleanups.push(() => server.stop());
    expect(await suggestedTraceWorks(server)).toContain(`--data-dir ${server.dataDir}`);
  }, 60_000);

  it('on PostgreSQL: they name the database', async () => {
    requireDist();
    const db = await createTestDatabase('writ_hints');
    cleanups.push(db.drop);
    const server = await startServerProcess({ env: { WRIT_DATABASE_URL: db.url } });
    cleanups.push(() => server.stop());
    expect(await suggestedTraceWorks(server)).toContain(`--database ${db.url}`);
  }, 60_000);
});
