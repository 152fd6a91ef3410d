/**
 * The decision log: every decision becomes one event (event.ts), masked as configured and handed to
 * each configured sink's bounded buffer (batching-sink.ts). Recording never waits and never throws.
 */
import { randomUUID } from 'node:crypto';
import type { DecisionLogConfig } from '../config/index.js';
import { BatchingSink, type SinkStats } from './batching-sink.js';
import { maskEvent, type DecisionLogEvent, type DecisionRecord } from './event.js';
import { decisionLogService, jsonLinesFile } from './sinks.js';

export interface DecisionLog {
  record(event: DecisionRecord): void;
  stats(): SinkStats[];
  /** Sends what is buffered (tests, shutdown). */
  flush(): Promise<void>;
  /** A last flush; unsent events are counted as dropped. */
  close(): Promise<void>;
}

export const noDecisionLog: DecisionLog = {
  record: () => {},
  stats: () => [],
  flush: async () => {},
  close: async () => {},
};

export interface DecisionLogOptions {
  /** Writ's version, for the `version` label. */
  version: string;
  onError?: (sink: string, error: unknown) => void;
}

export function openDecisionLog(config: DecisionLogConfig, options: DecisionLogOptions): DecisionLog {
  const sinks: BatchingSink[] = [];
  const onError = options.onError ?? rateLimitedWarning();
  if (config.file) sinks.push(new BatchingSink('file', jsonLinesFile(config.file), config, onError));
  if (config.url) sinks.push(new BatchingSink('http', decisionLogService(config.url, config.timeoutMs, `writ/${options.version}`), config, onError));
  if (sinks.length === 0) return noDecisionLog;
  // spread-then-add: once, when the log opens
  const labels = { ...config.labels, id: randomUUID(), app: 'writ', version: options.version };
  return {
    record(record) {
      let event: DecisionLogEvent;
      try {
        // OPA's order (event.ts), and not a spread first: see test/architecture/spread-then-add.test.ts.
        const { decision_id, ...rest } = record;
        event = maskEvent({ decision_id, labels, ...rest }, config.mask);
      } catch (e) {
        onError('mask', e); // a decision never fails for its log
        return;
      }
      for (const sink of sinks) sink.push(event);
    },
    stats: () => sinks.map((s) => s.stats()),
    flush: async () => {
      await Promise.all(sinks.map((s) => s.flush()));
    },
    close: async () => {
      await Promise.all(sinks.map((s) => s.close()));
    },
  };
}

/** One line per sink and minute at most: a dead collector must not flood the log. */
function rateLimitedWarning(): (sink: string, error: unknown) => void {
  const last = new Map<string, number>();
  return (sink, error) => {
    const now = Date.now();
    if (now - (last.get(sink) ?? 0) < 60_000) return;
    last.set(sink, now);
    console.error(`[decision-log] ${sink} sink failed, retrying with backoff: ${(error as Error).message ?? String(error)}`);
  };
}
