// Reads the trace of a `writ serve` built with bench/experiments/gateway-tail-trace.patch (WRIT_TRACE_FILE) and
// says how many of its commits met the checkpoint worker's work, and what the slowest 2% of gateway writes met.
//   node bench/experiments/gateway-tail-analyze.mjs TRACE.jsonl [...]
import { readFileSync } from 'node:fs';

const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] : NaN;
};
const overlap = (a0, a1, b0, b1) => Math.max(0, Math.min(a1, b1) - Math.max(a0, b0));

for (const path of process.argv.slice(2)) {
  const by = {};
  for (const line of readFileSync(path, 'utf8').split('\n')) {
    if (!line.trim()) continue;
    const e = JSON.parse(line);
    (by[e.k] ??= []).push(e);
  }
  const reqs = by.req ?? [], batches = by.batch ?? [], ckpts = by.ckpt ?? [], gcs = by.gc ?? [];
  const busy = (by.busy ?? []).map((b) => b.t).sort((a, b) => a - b);
  // What a span [a0, a1] met: a checkpoint (copy or restart), a BEGIN refused for another connection's lock, a GC pause.
  const met = (a0, a1) => {
    const c = new Set();
    if (ckpts.some((k) => overlap(a0, a1, k.start, k.end ?? k.ck) > 0)) c.add('ckpt');
    if (busy.some((t) => t >= a0 && t <= a1)) c.add('busy');
    if (gcs.some((g) => overlap(a0, a1, g.start, g.start + g.dur) > 0)) c.add('gc');
    return c;
  };
  for (const r of reqs) {
    r.own = (r.total - r.upstream) * 1000;
    r.t0 = r.end - r.total * 1000;
    r.pre = (r.total - r.auth - r.checks - r.intent - r.upstream - r.settle) * 1000;
    r.ti = r.t0 + r.pre + (r.auth + r.checks) * 1000;
    r.ti1 = r.ti + r.intent * 1000;
    r.ts = r.ti1 + r.upstream * 1000;
    r.ts1 = r.ts + r.settle * 1000;
  }
  for (const b of batches) {
    b.all = b.done - b.at;
    b.met = met(b.at, b.done);
  }
  const background = batches.filter((b) => b.met.has('ckpt') || b.met.has('busy'));
  const clear = batches.filter((b) => b.met.size === 0 && !b.inflight);
  const own = reqs.map((r) => r.own);
  const threshold = pct(own, 98);
  const worst = reqs.filter((r) => r.own >= threshold);
  const tally = {};
  for (const r of worst) {
    const c = new Set([...met(r.ti, r.ti1), ...met(r.ts, r.ts1)]);
    const mine = batches.filter((b) => (b.at >= r.ti - 50 && b.done <= r.ti1 + 50) || (b.at >= r.ts - 50 && b.done <= r.ts1 + 50));
    if (mine.some((b) => b.inflight)) c.add('inflight');
    const key = [...c].sort().join('+') || 'none';
    tally[key] = (tally[key] ?? 0) + 1;
    const parts = { pre: r.pre, auth: r.auth * 1000, checks: r.checks * 1000, intent: r.intent * 1000, settle: r.settle * 1000 };
    const largest = 'largest ' + Object.entries(parts).sort((a, b) => b[1] - a[1])[0][0];
    tally[largest] = (tally[largest] ?? 0) + 1;
  }
  const us = (x) => Math.round(x);
  console.log(JSON.stringify({
    trace: path,
    writes: reqs.length,
    commits: batches.length,
    checkpoints: ckpts.length,
    restarts: ckpts.filter((k) => k.end !== undefined).length,
    walSyncs: (by.sync ?? []).length,
    restartSyncs: (by['restart-msg'] ?? []).filter((m) => !m.header).length,
    commitsMeetingCheckpointWork: `${(100 * background.length / batches.length).toFixed(1)}%`,
    commitsBehindASyncInFlight: `${(100 * batches.filter((b) => b.inflight).length / batches.length).toFixed(1)}%`,
    commitP50MeetingIt: us(pct(background.map((b) => b.all), 50)),
    commitP50Clear: us(pct(clear.map((b) => b.all), 50)),
    commitP99MeetingIt: us(pct(background.map((b) => b.all), 99)),
    commitP99Clear: us(pct(clear.map((b) => b.all), 99)),
    ownP50: us(pct(own, 50)),
    ownP99: us(pct(own, 99)),
    slowest2pct: worst.length,
    whatTheyMet: tally,
  }));
}
