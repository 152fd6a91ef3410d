/** The two destinations: a JSON-lines file, and an HTTP collector speaking OPA's decision log service API. */
import { appendFile, mkdir } from 'node:fs/promises';
import { dirname } from 'node:path';
import { promisify } from 'node:util';
import { gzip } from 'node:zlib';
import type { DecisionLogEvent } from './event.js';
import type { SendBatch } from './batching-sink.js';

const gzipAsync = promisify(gzip);

/** Appends one JSON object per line (the parent folder is created on first use). */
export function jsonLinesFile(path: string): SendBatch {
  let ready: Promise<unknown> | null = null;
  return async (batch: DecisionLogEvent[]) => {
    ready ??= mkdir(dirname(path), { recursive: true });
    await ready;
    await appendFile(path, batch.map((e) => `${JSON.stringify(e)}\n`).join(''));
  };
}

/**
 * OPA's decision log service API: `POST <url>` with `Content-Type: application/json`,
 * `Content-Encoding: gzip` and a gzipped JSON array of events. Any 2xx accepts the batch; anything
 * else (or no answer within `timeoutMs`) fails it, to be retried.
 */
export function decisionLogService(url: string, timeoutMs: number, userAgent: string): SendBatch {
  return async (batch: DecisionLogEvent[]) => {
    const body = await gzipAsync(Buffer.from(JSON.stringify(batch)));
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'content-encoding': 'gzip', 'user-agent': userAgent },
      body,
      signal: AbortSignal.timeout(timeoutMs),
    });
    await res.arrayBuffer().catch(() => undefined);
    if (res.status < 200 || res.status > 299) throw new Error(`decision log service ${url} answered ${res.status}`);
  };
}
