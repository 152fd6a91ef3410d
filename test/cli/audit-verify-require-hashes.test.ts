import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runWrit } from '../support/cli.js';
import { requireDist } from '../support/server-process.js';

/** The built `writ` reads WRIT_GRAPH_REQUIRE_HASHES: an old writer's event is BROKEN (exit 1) with it, unhashed (exit 0) without, and `writ revoke` over it is refused. */

const dirs: string[] = [];
beforeAll(() => requireDist());
afterAll(() => {
  delete process.env.WRIT_GRAPH_REQUIRE_HASHES;
  dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true }));
});

describe('writ audit verify and graph changes with WRIT_GRAPH_REQUIRE_HASHES', () => {
  it('BROKEN (exit 1) and GRAPH_LOG_UNHASHED with it, unhashed and exit 0 without', { timeout: 120_000 }, async () => {
    const data = mkdtempSync(join(tmpdir(), 'writ-require-hashes-'));
    dirs.push(data);
    expect((await runWrit(data, 'graph', 'apply', 'graph/example.yaml')).code).toBe(0);
    const db = new Database(join(data, 'writ.sqlite'));
    const revision = (db.prepare('SELECT MAX(revision) FROM graph_events').pluck().get() as number) + 1;
    db.prepare('INSERT INTO graph_events (revision, at, actor, type, payload) VALUES (?, ?, ?, ?, ?)')
      .run(revision, Date.now(), 'old-replica', 'principal.revoked', JSON.stringify({ type: 'principal.revoked', id: 'seo-agent-7', reason: 'old writer' }));
    db.close();

    const lenient = await runWrit(data, 'audit', 'verify');
    expect(lenient.code, lenient.output).toBe(0);
    expect(lenient.stdout).toContain('1 newer event(s) appended by a Writ from before the graph chain are not hashed yet');

    process.env.WRIT_GRAPH_REQUIRE_HASHES = '1'; // the child processes inherit it
    const strict = await runWrit(data, 'audit', 'verify');
    expect(strict.code, strict.output).toBe(1);
    expect(strict.stdout).toContain(`BROKEN in the graph log at revision ${revision}: graph event ${revision} has no hash, and every event must have one (WRIT_GRAPH_REQUIRE_HASHES)`);
    const revoke = await runWrit(data, 'revoke', 'd-orch-seo', '--reason', 'x');
    expect(revoke.code).toBe(1);
    expect(revoke.output).toContain('GRAPH_LOG_UNHASHED');
    delete process.env.WRIT_GRAPH_REQUIRE_HASHES;
    expect((await runWrit(data, 'audit', 'verify')).code).toBe(0);
  });
});
