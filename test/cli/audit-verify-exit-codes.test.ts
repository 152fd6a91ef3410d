import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { dropGuards } from '../audit/helpers.js';
import { decideLeaseWrite } from '../support/agent.js';
import { runWrit } from '../support/cli.js';
import { startHarness, type Harness } from '../support/harness.js';
import { freePort, requireDist } from '../support/server-process.js';

/**
 * `writ audit verify`'s exit codes (README, "What `writ audit verify` checks"), for a cron job that must
 * tell tampering from an outage: 0 verified, 1 BROKEN (the log is not what Writ wrote), 2 wrong
 * arguments, 3 could not check (the database down, no store in the data directory, nothing to check the
 * checkpoint with). Before, an outage exited 1, as BROKEN does.
 */
let h: Harness;
const dirs: string[] = [];
beforeAll(async () => {
  requireDist();
  h = await startHarness({ upstream: true, clock: new ManualClock(Date.now()) });
  const { answer: ok } = await decideLeaseWrite(h, 'seo-agent-7', { resource: 'wp:post:1024', payload: { title: 'Audited' }, expected_version: 0 });
  expect(ok.status, JSON.stringify(ok.body)).toBe(201);
}, 60_000);
afterAll(async () => {
  await h?.close();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe('writ audit verify exit codes', () => {
  it('0 when verified; 3 when it could not check (database unreachable, no store there), never 1; 2 for wrong arguments', { timeout: 60_000 }, async () => {
    const ok = await runWrit(h.dataDir, 'audit', 'verify');
    expect([ok.code, ok.output]).toEqual([0, expect.stringMatching(/^OK: /)]);

    const port = await freePort(); // nothing listens there
    const down = await runWrit(h.dataDir, 'audit', 'verify', '--database', `postgres://postgres@127.0.0.1:${port}/writ`);
    expect([down.code, down.output]).toEqual([3, expect.stringMatching(/^writ: OVERLOADED \(Overloaded\): PostgreSQL at .* cannot be reached/)]);
    expect(down.output).not.toContain('BROKEN');

    const empty = mkdtempSync(join(tmpdir(), 'writ-verify-empty-'));
    dirs.push(empty);
    const none = await runWrit(empty, 'audit', 'verify', '--json');
    expect([none.code, none.output]).toEqual([3, expect.stringContaining(`writ: NOT_FOUND (Not found): no Writ store in ${empty}`)]);

    const usage = await runWrit(h.dataDir, 'audit', 'verify', '--bogus');
    expect([usage.code, usage.output]).toEqual([2, expect.stringContaining("Unknown option '--bogus'")]);
  });

  it('1 when BROKEN (an entry rewritten in the store), as before, text and --json', async () => {
    dropGuards(h.db);
    expect(h.db.prepare("UPDATE receipt_entries SET body = body || ' ' WHERE kind = 'intent'").run().changes).toBe(1);
    const text = await runWrit(h.dataDir, 'audit', 'verify');
    expect([text.code, text.output]).toEqual([1, expect.stringMatching(/^BROKEN/)]);
    const json = await runWrit(h.dataDir, 'audit', 'verify', '--json');
    expect([json.code, JSON.parse(json.stdout).ok]).toEqual([1, false]);
  });
});
