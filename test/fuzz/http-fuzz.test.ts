import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { answerProblems, fuzzPools, routesOf, runFuzz, type FuzzOutcome, type FuzzPools, type FuzzRequest } from '../support/http-fuzz.js';
import { startHarness, type Harness } from '../support/harness.js';

/** Seeded: a failure here reproduces with the same seed (bench/soak.ts runs ≥ 100,000 from others). */
const SEED = 20261130;
const RUNS = Number(process.env['WRIT_FUZZ_RUNS'] ?? 3000);

let h: Harness;
let pools: FuzzPools;
beforeAll(async () => {
  h = await startHarness({ upstream: true });
  pools = await fuzzPools(h);
});
afterAll(async () => h?.close());

describe(`fuzzing every route and header (${RUNS} requests, seed ${SEED})`, () => {
  it('never a 5xx, never a hang, every error problem+json with a catalogued code, and refusals change nothing', async () => {
    expect(pools.decisions.length).toBeGreaterThanOrEqual(3);
    expect(pools.leases).toHaveLength(1);
    const report = await runFuzz(h, pools, { seed: SEED, runs: RUNS, timeoutMs: 5_000 });
    console.log(`fuzz: ${report.sent} sent (${report.unsendable} unsendable) in ${Math.round(report.ms)} ms; by status ${JSON.stringify(report.byStatus)}; ${report.rejectedReceipts} REJECTED receipts`);
    const summary = { sent: report.sent, byStatus: report.byStatus, failures: report.failures.slice(0, 5) };
    expect(report.failures, JSON.stringify(summary, null, 1).slice(0, 6000)).toEqual([]);
    expect(report.fiveXX).toBe(0);
    expect(report.hangs).toBe(0);
    expect(report.badErrors).toBe(0);
    expect(report.stateChanges).toBe(0);
    // The receipt chain still verifies and grew by exactly the REJECTED receipts refused writes reported.
    expect(report.chain).toEqual({ ok: true, entriesAdded: report.rejectedReceipts, expectedAdded: report.rejectedReceipts, otherReceiptsChanged: false });
    // Not a vacuous run: most requests reached a server, every route was tried, and both refusals and successes happened.
    expect(report.sent).toBeGreaterThan(RUNS * 0.9);
    for (const r of routesOf(h)) expect(report.routesHit[`${r.method} ${r.path}`] ?? 0, `${r.method} ${r.path}`).toBeGreaterThan(5);
    const count = (pred: (s: number) => boolean) => Object.entries(report.byStatus).filter(([s]) => pred(Number(s))).reduce((a, [, n]) => a + n, 0);
    expect(count((s) => s >= 200 && s < 300)).toBeGreaterThan(RUNS * 0.02);
    expect(count((s) => s === 400)).toBeGreaterThan(RUNS * 0.1);
    expect(report.rejectedReceipts).toBeGreaterThan(0);
  }, 120_000);
});

describe('the fuzzer\'s verdict on one answer', () => {
  const req: FuzzRequest = { route: 'POST /v1/decisions', method: 'POST', url: '/v1/decisions', auth: null, headers: {} };
  const out = (o: Partial<FuzzOutcome>): FuzzOutcome => ({ status: 400, contentType: 'application/problem+json; charset=utf-8', body: { code: 'MALFORMED_REQUEST' }, hung: false, unsendable: false, ...o });
  it('passes a catalogued problem+json refusal and a success', () => {
    expect(answerProblems(req, out({}))).toEqual([]);
    expect(answerProblems(req, out({ status: 200, contentType: 'application/json', body: {} }))).toEqual([]);
  });
  it('flags a 5xx, a hang, a plain JSON error, an uncatalogued code and a code answered with the wrong status', () => {
    expect(answerProblems(req, out({ status: 500, body: { code: 'INTERNAL' } }))).toContain('5xx (500)');
    expect(answerProblems(req, out({ hung: true }))).toEqual(['hang']);
    expect(answerProblems(req, out({ contentType: 'application/json' })).join()).toMatch(/not problem\+json/);
    expect(answerProblems(req, out({ body: { code: 'FST_ERR_BAD_URL' } })).join()).toMatch(/not catalogued/);
    expect(answerProblems(req, out({ status: 422 })).join()).toMatch(/MALFORMED_REQUEST answered 422, catalogued 400/);
  });
});
