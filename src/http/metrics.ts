import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { signatureChecks } from '../decision/index.js';
import type { SinkStats } from '../decision-log/index.js';
import type { PolicyReloads } from '../policy/index.js';
import type { ClockOffset, ServiceObserver } from '../service/index.js';

export interface WritMetrics {
  registry: Registry;
  observer: ServiceObserver;
  httpRequests: Counter<'route' | 'status'>;
  /**
   * Counts one HTTP answer that went out in `httpRequests`: tallied by route and status and added to the
   * counter when it is read (its collect), where prom-client's inc would build and look up a label string per answer.
   */
  answered(route: string, status: number): void;
}

/**
 * `decisionLogStats` reports the decision log sinks (sent, dropped, failed attempts, buffered),
 * `policyReloads` what the policy engine did with rebuilt bundles and `databaseClock` the latest
 * measurement of this replica's clock against the database's (PostgreSQL), all read at scrape time.
 */
export function createMetrics(decisionLogStats: () => SinkStats[] = () => [], policyReloads: () => PolicyReloads | undefined = () => undefined, databaseClock: () => ClockOffset | null = () => null): WritMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'writ_' });
  const decisions = new Counter({ name: 'writ_decisions_total', help: 'Decisions by result', labelNames: ['result'] as const, registers: [registry] });
  const latency = new Histogram({
    name: 'writ_decision_duration_seconds',
    help: 'Decision latency (resolve + evaluate + sign), seconds',
    buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1],
    registers: [registry],
  });
  const sinkCounter = (name: string, help: string, value: (s: SinkStats) => number) =>
    new Counter({
      name, help, labelNames: ['sink'] as const, registers: [registry],
      collect() {
        this.reset();
        for (const s of decisionLogStats()) this.inc({ sink: s.sink }, value(s));
      },
    });
  sinkCounter('writ_decision_log_sent_total', 'Decision log events the sink accepted', (s) => s.sent);
  sinkCounter('writ_decision_log_dropped_total', 'Decision log events dropped: the buffer was full (oldest first) or the sink closed with events unsent', (s) => s.dropped);
  sinkCounter('writ_decision_log_failures_total', 'Failed decision log uploads or writes (each is retried with backoff)', (s) => s.failures);
  new Gauge({
    name: 'writ_decision_log_buffered', help: 'Decision log events waiting to be sent', labelNames: ['sink'] as const, registers: [registry],
    collect() {
      this.reset();
      for (const s of decisionLogStats()) this.set({ sink: s.sink }, s.buffered);
    },
  });
  new Counter({
    name: 'writ_signature_checks_total',
    help: 'Signature checks of caller assertions and decisions by this process, by thread: on the event loop, or handed to another (while it is busy and other requests are in flight)',
    labelNames: ['thread'] as const, registers: [registry],
    collect() {
      this.reset();
      const { onLoop, offLoop } = signatureChecks();
      this.inc({ thread: 'event_loop' }, onLoop);
      this.inc({ thread: 'other' }, offLoop);
    },
  });
  new Counter({
    name: 'writ_policy_reloads_total',
    help: 'Attempts to load a rebuilt policy bundle: swapped in (taken), or not (refused: it did not load, its data is unusable, or it failed on recent inputs; the live bundle stays; a bundle tried again counts again, but one that could not be read counts once while it is looked at again)',
    labelNames: ['result'] as const, registers: [registry],
    collect() {
      this.reset();
      const r = policyReloads();
      if (!r) return;
      this.inc({ result: 'taken' }, r.taken);
      this.inc({ result: 'refused' }, r.refused);
    },
  });
  const clockGauge = (name: string, help: string, value: (o: ClockOffset) => number) =>
    new Gauge({
      name, help, labelNames: ['peer'] as const, registers: [registry],
      collect() {
        this.reset();
        const o = databaseClock();
        if (o) this.set({ peer: 'database' }, value(o) / 1000);
      },
    });
  clockGauge('writ_clock_offset_seconds', 'PostgreSQL: this replica\'s clock minus the database\'s (negative: behind), at the latest measurement (every 10 s). Lease time and single-use expiry are the database\'s clock: past a second something is wrong with a clock (NTP)', (o) => o.offsetMs);
  clockGauge('writ_clock_offset_uncertainty_seconds', 'PostgreSQL: half the round trip of that measurement (the true offset is within writ_clock_offset_seconds ± this)', (o) => o.uncertaintyMs);
  const abandoned = new Counter({
    name: 'writ_lease_acquisitions_abandoned_total',
    help: 'Acquisitions whose caller went away (its lease stream or HTTP connection closed) before they were answered, by what became of them: withdrawn (left the queue, took nothing), released (granted with a token Writ made, which no one can learn: given back at once), released_after_preemption (the same for a takeover: the holders it preempted stay fenced out), kept_for_replay (granted with the caller\'s own token: kept until its TTL for the caller to claim by asking again with it)',
    labelNames: ['outcome'] as const, registers: [registry],
  });
  // Answers not yet added to the counter, by route, then status.
  const unread = new Map<string, Map<number, number>>();
  const httpRequests = new Counter({
    name: 'writ_http_requests_total', help: 'HTTP answers that went out, by route and status (a lease stream answer by route "/v1/leases/stream <op>", once handed to its open socket; a grant once written). An answer whose connection or stream closed first is not counted here: an acquisition\'s is counted in writ_lease_acquisitions_abandoned_total', labelNames: ['route', 'status'] as const, registers: [registry],
    collect() {
      for (const [route, byStatus] of unread) for (const [status, n] of byStatus) this.inc({ route, status: String(status) }, n);
      unread.clear();
    },
  });
  return {
    registry,
    httpRequests,
    answered(route, status) {
      let byStatus = unread.get(route);
      if (byStatus === undefined) unread.set(route, (byStatus = new Map()));
      byStatus.set(status, (byStatus.get(status) ?? 0) + 1);
    },
    observer: {
      decision(result, seconds) {
        decisions.inc({ result });
        latency.observe(seconds);
      },
      abandonedAcquisition({ outcome }) {
        abandoned.inc({ outcome });
      },
    },
  };
}
