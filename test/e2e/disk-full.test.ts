import Database from 'better-sqlite3';
import { execFileSync } from 'node:child_process';
import { closeSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { WritApiError, WritClient, type Decision } from '../../src/sdk/index.js';
import { startSampleUpstream } from '../../src/upstream/index.js';
import { startFlakyUpstream, type FlakyUpstream } from '../support/flaky-upstream.js';
import { fixtureKey } from '../support/harness.js';
import { startServerProcess, type ServerProcess } from '../support/server-process.js';

const tmp = mkdtempSync(join(tmpdir(), 'writ-enospc-'));
const mnt = join(tmp, 'data');
let mounted = false;
let server: ServerProcess | undefined;
let upstream: Awaited<ReturnType<typeof startSampleUpstream>> | undefined;
let flaky: FlakyUpstream | undefined;
afterAll(async () => {
  await server?.stop();
  await flaky?.close();
  await upstream?.app.close();
  if (mounted) execFileSync('umount', [mnt]);
  rmSync(tmp, { recursive: true, force: true });
});

/** Writes zeros to `file` until the filesystem has not one page left (ENOSPC); returns the bytes written. */
function fillDisk(file: string): number {
  const fd = openSync(file, 'w');
  let written = 0;
  try {
    for (const chunk of [1 << 20, 4096, 512, 1]) {
      const zeros = Buffer.alloc(chunk);
      for (;;) {
        try {
          written += writeSync(fd, zeros);
        } catch (e) {
          if ((e as NodeJS.ErrnoException).code !== 'ENOSPC') throw e;
          break;
        }
      }
    }
  } finally {
    closeSync(fd);
  }
  return written;
}

describe('disk full (ENOSPC) on the data directory: a 16 MB tmpfs', () => {
  it('writes are refused with 503 OVERLOADED and change nothing; the probes answer; when space returns the same writes succeed without a restart', async () => {
    mkdirSync(mnt);
    // Needs root (CAP_SYS_ADMIN): this test fails, never skips, where it cannot mount.
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=16m', 'tmpfs', mnt]);
    mounted = true;
    upstream = await startSampleUpstream({ port: 0, host: '127.0.0.1', dbFile: join(tmp, 'upstream.sqlite') });
    flaky = await startFlakyUpstream(upstream.url);
    server = await startServerProcess({ dataDir: mnt, upstreamUrl: flaky.url, env: { WRIT_UPSTREAM_TIMEOUT_MS: '1000' } });
    const agent = new WritClient({ baseUrl: server.url, principal: 'seo-agent-7', privateJwk: fixtureKey('seo-agent-7') });
    const gov = new WritClient({ baseUrl: server.url, principal: 'governance', privateJwk: JSON.parse(readFileSync(join(mnt, 'admin.jwk'), 'utf8')) });
    const decide = (post: number) => agent.decide({ action: 'update_post', resource: `wp:post:${post}`, environment: 'production', fields: ['meta_description'] });
    const act = (post: number, decision: Decision) =>
      agent.act({ decision, action: 'update_post', resource: `wp:post:${post}`, fields: ['meta_description'], payload: { meta_description: `x${post}` }, expected_version: 0 });
    const upstreamWrites = async () => ((await (await fetch(`${upstream!.url}/writes`)).json()) as { total: number }).total;
    const receiptsCount = async () => (await gov.request<{ receipts: unknown[] }>('GET', '/v1/receipts?limit=1000')).receipts.length;

    expect((await act(5000, await decide(5000))).status).toBe('COMPLETED');
    const decisions = new Map<number, Decision>();
    for (const post of [5001, 5002]) decisions.set(post, await decide(post));
    const receiptsBefore = await receiptsCount();

    // Empty the WAL into the database file (as `sqlite3 writ.sqlite 'PRAGMA wal_checkpoint(TRUNCATE)'` would),
    // so that the next commit needs new blocks of the disk, then fill the disk.
    const fillUp = async () => {
      const db = new Database(join(mnt, 'writ.sqlite'));
      // The server may be reading, or its checkpointer copying, at this moment (busy: 1): ask again shortly.
      let result: unknown;
      for (let i = 0; i < 100; i++) {
        result = db.pragma('wal_checkpoint(TRUNCATE)');
        if ((result as { busy: number }[])[0]?.busy === 0) break;
        await new Promise((r) => setTimeout(r, 20));
      }
      expect(result).toEqual([{ busy: 0, log: 0, checkpointed: 0 }]);
      db.close();
      expect(fillDisk(join(mnt, 'filler'))).toBeGreaterThan(0);
    };
    await fillUp();

    // Disk full: each write is refused 503 OVERLOADED with Retry-After, before anything reaches the upstream.
    for (const post of [5001, 5002]) {
      const refused = await act(post, decisions.get(post)!).catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(WritApiError);
      expect(refused).toMatchObject({ status: 503, code: 'OVERLOADED' });
      expect((refused as WritApiError).detail).toMatch(/SQLITE_FULL|SQLITE_IOERR/);
      expect((refused as WritApiError).retryAfterMs).toBeGreaterThan(0);
    }
    // A decision spends a caller assertion, a write too: refused the same way.
    expect(await decide(5003).catch((e: WritApiError) => `${e.status} ${e.code}`)).toBe('503 OVERLOADED');
    // Every authenticated call records its caller assertion's single use, so reads through the API are
    // refused too; the probes answer, and nothing was forwarded.
    expect(await receiptsCount().catch((e: WritApiError) => `${e.status} ${e.code}`)).toBe('503 OVERLOADED');
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
    expect((await fetch(`${server.url}/readyz`)).status).toBe(200);
    expect(await upstreamWrites()).toBe(1);
    expect(server.proc.exitCode).toBeNull();

    // Space returns: the same decisions (unspent: the refused writes rolled back) now write, no restart.
    rmSync(join(mnt, 'filler'));
    for (const post of [5001, 5002]) expect((await act(post, decisions.get(post)!)).status).toBe('COMPLETED');
    expect((await act(5003, await decide(5003))).status).toBe('COMPLETED');
    expect(await upstreamWrites()).toBe(4);
    // Only the three writes that succeeded left receipts: the refusals recorded nothing, half or whole.
    expect(await receiptsCount()).toBe(receiptsBefore + 3);
    expect((await gov.request<{ receipts: unknown[] }>('GET', '/v1/receipts?status=PENDING')).receipts).toEqual([]);
    expect((await gov.request<{ ok: boolean }>('GET', '/v1/audit/verify')).ok).toBe(true);
  });

  it('the disk fills while a write is at the upstream: the writer gets 503 saying its receipt is PENDING, and once space returns the receipt is reconciled COMPLETED from the upstream\'s record', async () => {
    const s = server!;
    const agent = new WritClient({ baseUrl: s.url, principal: 'seo-agent-7', privateJwk: fixtureKey('seo-agent-7') });
    const gov = new WritClient({ baseUrl: s.url, principal: 'governance', privateJwk: JSON.parse(readFileSync(join(mnt, 'admin.jwk'), 'utf8')) });
    const resource = 'wp:post:5100';
    const decision = await agent.decide({ action: 'update_post', resource, environment: 'production', fields: ['meta_description'] });
    flaky!.mode = 'hold';
    const answer = agent.act({ decision, action: 'update_post', resource, fields: ['meta_description'], payload: { meta_description: 'held' }, expected_version: 0 }).catch((e: unknown) => e);
    for (let i = 0; i < 500 && flaky!.held === 0; i++) await new Promise((r) => setTimeout(r, 10));
    expect(flaky!.held).toBe(1);
    // The intent is on record; now the disk fills, and the upstream applies the write.
    const db = new Database(join(mnt, 'writ.sqlite'));
    expect(db.pragma('wal_checkpoint(TRUNCATE)')).toEqual([{ busy: 0, log: 0, checkpointed: 0 }]);
    db.close();
    fillDisk(join(mnt, 'filler'));
    flaky!.mode = 'pass';
    flaky!.release();
    const refused = (await answer) as WritApiError;
    expect(refused).toBeInstanceOf(WritApiError);
    expect(refused).toMatchObject({ status: 503, code: 'OVERLOADED', problem: { receipt_status: 'PENDING' } });
    expect(refused.detail).toMatch(/applied the write at version 1.*stays PENDING/);
    const receiptId = refused.problem.receipt_id as string;
    const found = (await (await fetch(`${upstream!.url}/posts/5100/writes/${receiptId}`)).json()) as { applied: boolean; revision?: number };
    expect(found).toEqual({ applied: true, revision: 1 });

    rmSync(join(mnt, 'filler'));
    const receiptOf = async () => (await gov.request<{ receipt: { status: string; final_version: number | null } }>('GET', `/v1/receipts/${receiptId}`)).receipt;
    let receipt = await receiptOf();
    for (let i = 0; i < 60 && receipt.status === 'PENDING'; i++) {
      await new Promise((r) => setTimeout(r, 250));
      receipt = await receiptOf();
    }
    expect(receipt).toMatchObject({ status: 'COMPLETED', final_version: 1 });
    expect((await gov.request<{ ok: boolean }>('GET', '/v1/audit/verify')).ok).toBe(true);
  });
});
