/**
 * Decision logs in OPA's shape, sent to a real HTTP collector on 127.0.0.1 (OPA's decision log service
 * API: POST, gzipped JSON array) and to a JSON-lines file; a collector that is down or failing neither
 * blocks nor fails a decision.
 */
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig, type DecisionLogConfig } from '../../src/config/index.js';
import { BatchingSink } from '../../src/decision-log/batching-sink.js';
import { maskEvent, type DecisionLogEvent } from '../../src/decision-log/index.js';
import { startHarness, type Harness } from '../support/harness.js';

interface Received {
  headers: IncomingHttpHeaders;
  path: string;
  events: DecisionLogEvent[];
}

/** A decision log collector: answers each POST with the next status in `statuses` (then 200). */
async function startCollector(statuses: number[] = [], port = 0): Promise<{ url: string; received: Received[]; server: Server; close(): Promise<void> }> {
  const received: Received[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const status = statuses.shift() ?? 200;
      if (status === 200) received.push({ headers: req.headers, path: req.url ?? '', events: JSON.parse(gunzipSync(Buffer.concat(chunks)).toString('utf8')) as DecisionLogEvent[] });
      res.writeHead(status).end();
    });
  });
  server.listen(port, '127.0.0.1');
  await once(server, 'listening');
  const { port: bound } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${bound}/logs`, received, server, close: () => new Promise((r) => server.close(() => r())) };
}

/** A port on 127.0.0.1 where nothing listens. */
async function deadPort(): Promise<number> {
  const s = createServer().listen(0, '127.0.0.1');
  await once(s, 'listening');
  const { port } = s.address() as AddressInfo;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

const defaults = loadConfig({}, {}).decisionLog;
const logConfig = (c: Partial<DecisionLogConfig>): DecisionLogConfig => ({ ...defaults, flushMs: 20, retryMinMs: 10, retryMaxMs: 40, timeoutMs: 1000, ...c });

let h: Harness | undefined;
let collector: Awaited<ReturnType<typeof startCollector>> | undefined;
afterEach(async () => {
  await h?.close();
  await collector?.close();
  h = undefined;
  collector = undefined;
});

const titleOf = (id: number) => ({ action: 'update_post', resource: `wp:post:${id}`, environment: 'production', fields: ['title'] });

async function until(check: () => boolean, ms = 3000): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('decision log events', () => {
  it('every decision (allow and deny, /v1 and AuthZEN) reaches the collector gzipped, in OPA’s shape, and the file as JSON lines; masked fields are erased', async () => {
    collector = await startCollector();
    const dir = mkdtempSync(join(tmpdir(), 'writ-decision-log-'));
    const file = join(dir, 'logs', 'decisions.jsonl');
    h = await startHarness({
      config: { decisionLog: logConfig({ url: collector.url, file, labels: { region: 'eu-1' }, mask: ['/input/properties/subject/email', '/input/context/ticket'] }) },
    });
    const allow = await h.call('seo-agent-7', { method: 'POST', url: '/v1/decisions', payload: titleOf(1) });
    const deny = await h.call('seo-agent-7', { method: 'POST', url: '/v1/decisions', payload: { ...titleOf(1), fields: ['body'] } });
    const authzen = await h.call('seo-agent-7', {
      method: 'POST', url: '/access/v1/evaluation',
      payload: {
        subject: { type: 'agent', id: 'seo-agent-7', properties: { email: 'seo@example.com', team: 'growth' } },
        resource: { type: 'wp:post', id: 'wp:post:2', properties: { environment: 'production', fields: ['title'] } },
        action: { name: 'update_post' },
        context: { ticket: 'SEO-42', reason: 'title refresh' },
      },
    });
    expect([allow.body.allow, deny.body.allow, authzen.body.decision]).toEqual([true, false, true]);
    await h.ctx.decisionLog.flush();
    await until(() => collector!.received.flatMap((r) => r.events).length === 3);

    const batch = collector.received[0]!;
    expect(batch.path).toBe('/logs');
    expect(batch.headers['content-encoding']).toBe('gzip');
    expect(batch.headers['content-type']).toBe('application/json');
    const events = collector.received.flatMap((r) => r.events);
    expect(events.map((e) => e.decision_id)).toEqual([allow.body.decision_id, deny.body.decision_id, authzen.body.context.decision_id]);

    const [a, d, z] = events as [DecisionLogEvent, DecisionLogEvent, DecisionLogEvent];
    expect(a).toMatchObject({
      labels: { app: 'writ', region: 'eu-1', id: expect.any(String), version: expect.any(String) },
      bundles: { writ: { revision: h.ctx.policy.revision } },
      path: 'writ/authz/decision',
      input: { request: { principal: 'seo-agent-7', action: 'update_post', resource: 'wp:post:1', environment: 'production', fields: ['title'] } },
      result: { allow: true, reasons: [], obligations: { lease_required: true } },
      timestamp: allow.body.issued_at,
      requested_by: '127.0.0.1',
      writ: { principal: 'seo-agent-7', asked_by: 'seo-agent-7', front_door: 'v1', graph_revision: allow.body.graph_revision, chain: ['g-orchestrator', 'd-orch-seo'], expires_at: allow.body.expires_at },
    });
    expect(a.metrics.timer_writ_decide_ns).toBeGreaterThan(0);
    expect(d.result).toMatchObject({ allow: false, reasons: deny.body.reasons });
    expect(d.writ.chain).toEqual([]);
    expect(z.writ.front_door).toBe('authzen');
    expect(z.requested_by).toBe('127.0.0.1');
    expect(z.input.properties).toEqual({ subject: { team: 'growth' }, resource: { environment: 'production', fields: ['title'] }, action: {} });
    expect(z.input.context).toEqual({ reason: 'title refresh' });
    expect(z.erased).toEqual(['/input/properties/subject/email', '/input/context/ticket']);
    expect(JSON.stringify(events)).not.toContain('seo@example.com');

    await until(() => {
      try {
        return readFileSync(file, 'utf8').trim().split('\n').length === 3;
      } catch {
        return false;
      }
    });
    const lines = readFileSync(file, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as DecisionLogEvent);
    expect(lines.map((e) => e.decision_id)).toEqual(events.map((e) => e.decision_id));
    rmSync(dir, { recursive: true, force: true });
  });

  it('a collector that is down neither blocks nor fails decisions; beyond the buffer the oldest are dropped and /metrics counts them', async () => {
    h = await startHarness({ config: { decisionLog: logConfig({ url: `http://127.0.0.1:${await deadPort()}/logs`, bufferEvents: 3, batchEvents: 1 }) } });
    const started = performance.now();
    for (let i = 0; i < 8; i++) {
      const r = await h.call('seo-agent-7', { method: 'POST', url: '/v1/decisions', payload: titleOf(i) });
      expect(r.status).toBe(200);
    }
    expect(performance.now() - started).toBeLessThan(2000);
    const [stats] = h.ctx.decisionLog.stats();
    expect(stats).toMatchObject({ sink: 'http', sent: 0, buffered: 3 });
    expect(stats!.dropped).toBeGreaterThanOrEqual(5);
    await until(() => h!.ctx.decisionLog.stats()[0]!.failures > 0);
    const m = await h.call(null, { method: 'GET', url: '/metrics' });
    expect(m.raw).toMatch(/writ_decision_log_dropped_total\{sink="http"\} [5-8]/);
    expect(m.raw).toMatch(/writ_decision_log_buffered\{sink="http"\} 3/);
    expect(m.raw).toMatch(/writ_decision_log_failures_total\{sink="http"\} [1-9]/);
  });

  it('a collector that accepts connections but never answers does not slow decisions down', async () => {
    const hanging = createServer(() => {
      /* never answers */
    });
    hanging.listen(0, '127.0.0.1');
    await once(hanging, 'listening');
    const { port } = hanging.address() as AddressInfo;
    try {
      h = await startHarness({ config: { decisionLog: logConfig({ url: `http://127.0.0.1:${port}/logs`, batchEvents: 1, timeoutMs: 300 }) } });
      const times: number[] = [];
      for (let i = 0; i < 5; i++) {
        const t = performance.now();
        const r = await h.call('seo-agent-7', { method: 'POST', url: '/v1/decisions', payload: titleOf(i) });
        times.push(performance.now() - t);
        expect(r.status).toBe(200);
      }
      // Each decision answers well inside the collector's 300 ms timeout: nothing waits for it.
      expect(Math.max(...times)).toBeLessThan(250);
      await until(() => h!.ctx.decisionLog.stats()[0]!.failures > 0);
      expect(h.ctx.decisionLog.stats()[0]).toMatchObject({ sent: 0, dropped: 0 });
    } finally {
      await h?.close();
      h = undefined;
      hanging.closeAllConnections();
      await new Promise<void>((r) => hanging.close(() => r()));
    }
  });

  it('a failing collector gets the batch again with backoff until it takes it', async () => {
    collector = await startCollector([500, 503]);
    h = await startHarness({ config: { decisionLog: logConfig({ url: collector.url }) } });
    const r = await h.call('seo-agent-7', { method: 'POST', url: '/v1/decisions', payload: titleOf(5) });
    await until(() => collector!.received.length === 1);
    expect(collector.received[0]!.events.map((e) => e.decision_id)).toEqual([r.body.decision_id]);
    // The collector has the batch; the sink counts it once the collector's answer is back.
    await until(() => h!.ctx.decisionLog.stats()[0]!.sent === 1);
    expect(h.ctx.decisionLog.stats()[0]).toMatchObject({ sent: 1, failures: 2, dropped: 0, buffered: 0 });
  });
});

describe('the bounded buffer', () => {
  it('keeps the newest events when full, sends them in order once the destination answers, and counts what it dropped', async () => {
    let up = false;
    const sent: string[] = [];
    const sink = new BatchingSink('test', async (batch) => {
      if (!up) throw new Error('down');
      sent.push(...batch.map((e) => e.decision_id));
    }, { bufferEvents: 3, batchEvents: 2, flushMs: 5, retryMinMs: 5, retryMaxMs: 10 });
    for (let i = 1; i <= 5; i++) sink.push({ decision_id: `d${i}` } as DecisionLogEvent);
    await sink.flush();
    expect(sink.stats()).toMatchObject({ dropped: 2, buffered: 3, sent: 0 });
    up = true;
    await until(() => sent.length === 3);
    expect(sent).toEqual(['d3', 'd4', 'd5']);
    await sink.close();
    expect(sink.stats()).toMatchObject({ sent: 3, dropped: 2, buffered: 0 });
  });
});

describe('masks', () => {
  it('remove what their JSON pointer names (~1 is /, ~0 is ~), list only what they removed, and leave the original alone', () => {
    const event = { decision_id: 'd', input: { properties: { resource: { 'a/b': 1, 'c~d': 2, keep: 3 } } }, result: { reasons: ['x'] } } as unknown as DecisionLogEvent;
    const masked = maskEvent(event, ['/input/properties/resource/a~1b', '/input/properties/resource/c~0d', '/input/nothing/here', '/result/reasons']);
    expect(masked.input).toEqual({ properties: { resource: { keep: 3 } } });
    expect(masked.result).toEqual({});
    expect(masked.erased).toEqual(['/input/properties/resource/a~1b', '/input/properties/resource/c~0d', '/result/reasons']);
    expect(event.input).toEqual({ properties: { resource: { 'a/b': 1, 'c~d': 2, keep: 3 } } });
  });
});

describe('configuration', () => {
  it('reads WRIT_DECISION_LOG_* and refuses what cannot work', () => {
    const c = loadConfig({}, { WRIT_DECISION_LOG_URL: 'http://127.0.0.1:9000/logs', WRIT_DECISION_LOG_MASK: '/input/context/ticket, /result/reasons', WRIT_DECISION_LOG_LABELS: 'region=eu-1,team=seo' }).decisionLog;
    expect(c).toMatchObject({ url: 'http://127.0.0.1:9000/logs', file: null, mask: ['/input/context/ticket', '/result/reasons'], labels: { region: 'eu-1', team: 'seo' }, bufferEvents: 10_000 });
    expect(() => loadConfig({}, { WRIT_DECISION_LOG_URL: 'ftp://x/logs' })).toThrow(/must be http\(s\)/);
    expect(() => loadConfig({}, { WRIT_DECISION_LOG_MASK: '/writ/principal' })).toThrow(/below \/input or \/result/);
    expect(() => loadConfig({}, { WRIT_DECISION_LOG_LABELS: 'region' })).toThrow(/key=value/);
    expect(() => loadConfig({}, { WRIT_DECISION_LOG_BUFFER_EVENTS: '0' })).toThrow(/at least 1 event/);
  });
});
