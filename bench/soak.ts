/**
 * The HTTP fuzzer of the test suite (test/support/http-fuzz.ts), for much longer: ≥ 100,000 seeded
 * requests over every route and header against one in-process Writ (the example graph, the sample
 * upstream on 127.0.0.1, app.inject), counting 5xx, hangs (no answer within 5 s), errors that are not
 * catalogued problem+json, and refused requests after which the graph revision or the lease table
 * differed; at the end, whether the receipt chain verifies and grew by exactly the REJECTED receipts
 * the refused writes reported.
 *
 *   npx tsc -p tsconfig.json && node dist/bench/soak.js [--requests N] [--seed S] [--write]
 *
 * `--write` replaces this benchmark's section of bench/RESULTS.md. Exits 1 if anything was found.
 */
import { parseArgs } from 'node:util';
import { fuzzPools, runFuzz, type FuzzReport } from '../test/support/http-fuzz.js';
import { startHarness } from '../test/support/harness.js';
import { machineLine, writeResultsSection } from './results-file.js';

const { values } = parseArgs({ options: { requests: { type: 'string', default: '100000' }, seed: { type: 'string', default: '424242' }, write: { type: 'boolean', default: false } } });
const REQUESTS = Number(values.requests);
const SEED = Number(values.seed);
const TIMEOUT_MS = 5_000;

const h = await startHarness({ upstream: true });
let report: FuzzReport;
try {
  const pools = await fuzzPools(h);
  let last = 0;
  report = await runFuzz(h, pools, {
    seed: SEED,
    runs: REQUESTS,
    timeoutMs: TIMEOUT_MS,
    onProgress: (r) => {
      if (r.requests - last < 10_000 && r.requests < REQUESTS) return;
      last = r.requests;
      console.log(`${r.requests} requests, ${r.fiveXX} 5xx, ${r.hangs} hangs, ${r.badErrors} bad errors, ${r.stateChanges} state changes (${Math.round(r.ms || performance.now())} ms)`);
    },
  });
} finally {
  await h.close();
}

const statuses = Object.entries(report.byStatus).sort(([a], [b]) => Number(a) - Number(b)).map(([s, n]) => `${s}: ${n}`).join(', ');
const routes = Object.keys(report.routesHit).length;
const found = report.fiveXX + report.hangs + report.badErrors + report.stateChanges + (report.chain.ok && report.chain.entriesAdded === report.chain.expectedAdded && !report.chain.otherReceiptsChanged ? 0 : 1);
const section = `## Soak: fuzzed HTTP requests (bench/soak.ts)

Command: \`npx tsc -p tsconfig.json && node dist/bench/soak.js --requests ${REQUESTS} --seed ${SEED} --write\`
(the generator of test/fuzz/http-fuzz.test.ts: every route of the OpenAPI document plus /healthz, /readyz, /metrics,
/openapi.json and unmatched paths; bodies from each route's schema or a spoiled example; wrong types, huge and unicode
strings, lone surrogates, nesting to 5,000, path tricks, edge numbers, missing / duplicated / forged headers, wrong
content types and charsets, bodies over the limit; genuine decisions and one held lease mixed in).

| figure | value |
|---|---|
| requests generated | ${report.requests} |
| sent (the rest Node's client would not put on the wire) | ${report.sent} |
| 5xx | ${report.fiveXX} |
| hangs (no answer within ${TIMEOUT_MS / 1000} s) | ${report.hangs} |
| errors not problem+json with a catalogued code and status | ${report.badErrors} |
| refused requests that changed the graph revision or the lease table | ${report.stateChanges} |
| receipt chain at the end | ${report.chain.ok ? 'verifies' : 'BROKEN'}; +${report.chain.entriesAdded} entries = ${report.chain.expectedAdded} REJECTED receipts reported by refused writes; other receipts ${report.chain.otherReceiptsChanged ? 'CHANGED' : 'unchanged'} |
| routes hit | ${routes} |
| answers by status | ${statuses} |
| wall time | ${(report.ms / 1000).toFixed(0)} s (${Math.round(report.sent / (report.ms / 1000))} requests/s, sequential, app.inject) |

${machineLine()}`;
console.log(`\n${section}`);
if (report.failures.length) console.log('first failures:', JSON.stringify(report.failures.slice(0, 5), null, 1).slice(0, 5000));
if (values.write) writeResultsSection('soak', section);
process.exit(found ? 1 : 0);
