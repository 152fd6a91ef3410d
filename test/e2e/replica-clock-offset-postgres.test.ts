import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CLI, onFreePort, REPO, requireDist, spawnListening } from '../../scripts/server-process.js';
import { createTestDatabase } from '../../scripts/test-database.js';
import { createCallerAssertion } from '../../src/sdk/assertion.js';

/**
 * Real `writ serve` replicas on one PostgreSQL database, each with its clock shifted (Date.now() moved by
 * test/e2e/fixtures/skew-clock.mjs): two minutes behind the database's (more than an assertion's 60 s),
 * three seconds behind (less than the 5 s of skew tolerated), and ninety seconds ahead. Each refuses what
 * it refused before and no more, says why in words an operator can act on, and shows its offset from the
 * database's clock in GET /readyz and the metric writ_clock_offset_seconds{peer="database"}.
 */
const cleanups: (() => Promise<void> | void)[] = [];
afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const SKEW = join(REPO, 'test/e2e/fixtures/skew-clock.mjs');
const seo = JSON.parse(readFileSync(join(REPO, 'fixtures/keys/seo-agent-7.jwk'), 'utf8'));
const decision = { action: 'update_post', resource: 'wp:post:1024', environment: 'production', fields: ['meta_description'] };

let setup: Promise<{ url: string; dir: string }> | undefined;
/** The database and the data directory the replicas share (its keys, governance), the graph applied by a replica on the right clock. */
function shared(): Promise<{ url: string; dir: string }> {
  setup ??= (async () => {
    requireDist();
    const db = await createTestDatabase('writ_clock');
    cleanups.push(db.drop);
    const dir = mkdtempSync(join(tmpdir(), 'writ-clock-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const first = await replica(db.url, dir, 0, true);
    first.proc.kill('SIGTERM');
    await first.exited;
    return { url: db.url, dir };
  })();
  return setup;
}

async function replica(url: string, dir: string, skewMs: number, graph = false) {
  const env = { ...process.env, WRIT_DATABASE_URL: url, WRIT_UPSTREAM_URL: 'http://127.0.0.1:9', WRIT_TEST_CLOCK_SKEW_MS: String(skewMs) };
  const r = await onFreePort((port) => spawnListening(`writ serve (clock ${skewMs} ms)`, ['--import', SKEW, CLI, 'serve', '--data-dir', dir, '--port', String(port), '--no-upstream', ...(graph ? ['--graph', 'graph/example.yaml'] : [])], env));
  cleanups.push(async () => {
    if (r.proc.exitCode === null) r.proc.kill('SIGKILL');
    await r.exited;
  });
  return { ...r, base: `http://127.0.0.1:${r.port}` };
}

async function startSkewed(skewMs: number) {
  const { url, dir } = await shared();
  return replica(url, dir, skewMs);
}

/** POST /v1/decisions as seo-agent-7 with an assertion made at `madeAt` (a caller's clock). */
async function decide(base: string, madeAt: number): Promise<{ status: number; body: any }> {
  const token = await createCallerAssertion({ principal: 'seo-agent-7', privateJwk: seo, now: madeAt });
  const res = await fetch(`${base}/v1/decisions`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify(decision) });
  return { status: res.status, body: await res.json() };
}

async function offsetMetric(base: string): Promise<number | null> {
  const text = await (await fetch(`${base}/metrics`)).text();
  const m = /^writ_clock_offset_seconds\{peer="database"\} (\S+)$/m.exec(text);
  return m ? Number(m[1]) : null;
}

describe('PostgreSQL: a writ serve replica whose clock is off the database\'s', () => {
  it('two minutes behind: refuses, as before, but says its clock is behind (not "replayed"); not ready (CLOCK_SKEW); the metric and a warning say by how much', { timeout: 120_000 }, async () => {
    const r = await startSkewed(-120_000);
    // A caller whose clock follows the replica's: its assertion is fresh by the replica's clock, expired by the database's.
    const own = await decide(r.base, Date.now() - 120_000);
    expect(own.status).toBe(401);
    expect(own.body.code).toBe('UNAUTHENTICATED');
    expect(own.body.detail).not.toMatch(/replayed/);
    expect(own.body.detail).toMatch(/^assertion expired by the database's clock: .* this replica's clock said .*, 1[12]\d\.\d s behind the database's\. .*set this replica's clock right \(NTP\)/);
    expect(own.body.clock_offset_ms).toBeLessThan(-110_000);
    expect(own.body.clock_offset_ms).toBeGreaterThan(-130_000);
    // A caller whose clock is the database's: refused too, as before (issued in the future by the replica's
    // clock), but told that the replica's clock is the likely culprit.
    const right = await decide(r.base, Date.now());
    expect(right.status).toBe(401);
    expect(right.body.detail).toMatch(/^assertion is issued in the future: .*; but this replica's own clock is 1[12]\d\.\d s behind its database's \(GET \/readyz\), so if the caller's clock is right it is this replica's that is wrong/);

    const ready = await fetch(`${r.base}/readyz`);
    expect(ready.status).toBe(503);
    const body = (await ready.json()) as { code: string; error: string; clock_offset_ms: number };
    expect(body.code).toBe('CLOCK_SKEW');
    expect(body.error).toMatch(/^this replica's clock is 1[12]\d\.\d s (\(± \d+\.\d s\) )?behind the database's, more than WRIT_CLOCK_OFFSET_MAX_MS \(60000 ms\)/);
    expect(body.clock_offset_ms).toBeLessThan(-110_000);
    const metric = await offsetMetric(r.base);
    expect(metric).toBeLessThan(-110);
    expect(metric).toBeGreaterThan(-130);
    expect(r.output()).toMatch(/\[writ\] WARNING: this replica's clock is 1[12]\d\.\d s .*behind the database's, more than WRIT_CLOCK_OFFSET_MAX_MS .*GET \/readyz answers 503 CLOCK_SKEW until then/);
  });

  it('three seconds behind (within the skew tolerated): serves callers on either clock, ready, with a warning', { timeout: 120_000 }, async () => {
    const r = await startSkewed(-3_000);
    expect((await decide(r.base, Date.now() - 3_000)).status).toBe(200);
    expect((await decide(r.base, Date.now())).status).toBe(200);
    const ready = await fetch(`${r.base}/readyz`);
    expect(ready.status).toBe(200);
    const { clock } = (await ready.json()) as { clock: { peer: string; offset_ms: number; uncertainty_ms: number; warning?: string } };
    expect(clock.peer).toBe('database');
    expect(clock.offset_ms).toBeLessThan(-2_000);
    expect(clock.offset_ms).toBeGreaterThan(-4_000);
    expect(clock.warning).toMatch(/^this replica's clock is [234]\.\d s (\(± \d+\.\d s\) )?behind the database's, more than WRIT_CLOCK_OFFSET_WARN_MS \(1000 ms\)/);
    const metric = await offsetMetric(r.base);
    expect(metric).toBeLessThan(-2);
    expect(metric).toBeGreaterThan(-4);
    expect(r.output()).toMatch(/\[writ\] WARNING: this replica's clock is [234]\.\d s .*behind the database's, more than WRIT_CLOCK_OFFSET_WARN_MS/);
  });

  it('ninety seconds ahead: serves a caller whose clock follows it, refuses one on the database\'s clock as expired (as before); not ready (CLOCK_SKEW)', { timeout: 120_000 }, async () => {
    const r = await startSkewed(90_000);
    expect((await decide(r.base, Date.now() + 90_000)).status).toBe(200);
    const right = await decide(r.base, Date.now());
    expect(right.status).toBe(401);
    expect(right.body.detail).toMatch(/^assertion expired: .*; but this replica's own clock is (8\d|9\d|10\d)\.\d s ahead of its database's/);
    const ready = await fetch(`${r.base}/readyz`);
    expect(ready.status).toBe(503);
    const body = (await ready.json()) as { code: string; error: string; clock_offset_ms: number };
    expect(body.code).toBe('CLOCK_SKEW');
    expect(body.error).toMatch(/^this replica's clock is (8\d|9\d|10\d)\.\d s (\(± \d+\.\d s\) )?ahead of the database's/);
    expect(body.clock_offset_ms).toBeGreaterThan(80_000);
    expect(await offsetMetric(r.base)).toBeGreaterThan(80);
  });
});
