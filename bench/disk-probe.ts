import { closeSync, fdatasyncSync, fsyncSync, openSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';

export interface SyncProbe {
  /** Each write + sync, µs, in order. */
  latencies: number[];
  perSecond: number;
  meanUs: number;
}

/**
 * The disk's own limit for a durable commit: overwrite a 4 KiB page of a preallocated file (as a reused
 * WAL is, so the file size never changes) and sync it, in a loop, for `seconds` or `syncs` times.
 * fdatasync is what SQLite's WAL commit at synchronous=FULL waits for on Linux.
 */
export function syncProbe(dir: string, limit: { seconds: number } | { syncs: number }, kind: 'fsync' | 'fdatasync' = 'fdatasync'): SyncProbe {
  const file = join(dir, `${kind}-probe-${process.pid}.bin`);
  const fd = openSync(file, 'w');
  const page = Buffer.alloc(4096, 7);
  const sync = kind === 'fsync' ? fsyncSync : fdatasyncSync;
  for (let p = 0; p < 256; p++) writeSync(fd, page, 0, page.length, p * 4096);
  fsyncSync(fd);
  const latencies: number[] = [];
  const maxSyncs = 'syncs' in limit ? limit.syncs : Infinity;
  const maxMs = 'seconds' in limit ? limit.seconds * 1000 : Infinity;
  const start = performance.now();
  let now = start;
  while (latencies.length < maxSyncs && now - start < maxMs) {
    writeSync(fd, page, 0, page.length, (latencies.length % 256) * 4096);
    sync(fd);
    const t = performance.now();
    latencies.push((t - now) * 1000);
    now = t;
  }
  const ms = now - start;
  closeSync(fd);
  rmSync(file);
  return { latencies, perSecond: latencies.length / (ms / 1000), meanUs: (ms * 1000) / latencies.length };
}

/**
 * The same write + fdatasync, but paced: one every `everyMs` (async pauses between them), `syncs` times.
 * A disk that syncs back to back answers faster than one that was idle in between (this kind of machine:
 * p50 ~170 µs back to back, ~750 µs at one sync per 20 ms), so a latency budget for a workload at a given
 * rate is judged against syncs at that rate.
 */
export async function pacedSyncProbe(dir: string, syncs: number, everyMs: number): Promise<number[]> {
  const file = join(dir, `paced-probe-${process.pid}.bin`);
  const fd = openSync(file, 'w');
  const page = Buffer.alloc(4096, 7);
  for (let p = 0; p < 256; p++) writeSync(fd, page, 0, page.length, p * 4096);
  fsyncSync(fd);
  const latencies: number[] = [];
  try {
    for (let i = 0; i < syncs; i++) {
      await new Promise((r) => setTimeout(r, everyMs));
      writeSync(fd, page, 0, page.length, (i % 256) * 4096);
      const t = performance.now();
      fdatasyncSync(fd);
      latencies.push((performance.now() - t) * 1000);
    }
  } finally {
    closeSync(fd);
    rmSync(file);
  }
  return latencies;
}
