import { Counter, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { ServiceObserver } from '../service/index.js';

export interface WritMetrics {
  registry: Registry;
  observer: ServiceObserver;
  httpRequests: Counter<'route' | 'status'>;
}

export function createMetrics(): WritMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'writ_' });
  const decisions = new Counter({ name: 'writ_decisions_total', help: 'Decisions by result', labelNames: ['result'] as const, registers: [registry] });
  const latency = new Histogram({
    name: 'writ_decision_duration_seconds',
    help: 'Decision latency (resolve + evaluate + sign), seconds',
    buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1],
    registers: [registry],
  });
  const httpRequests = new Counter({ name: 'writ_http_requests_total', help: 'HTTP requests by route and status', labelNames: ['route', 'status'] as const, registers: [registry] });
  return {
    registry,
    httpRequests,
    observer: {
      decision(result, seconds) {
        decisions.inc({ result });
        latency.observe(seconds);
      },
    },
  };
}
