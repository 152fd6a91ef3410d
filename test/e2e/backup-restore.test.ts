import Database from 'better-sqlite3';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { WritApiError, WritClient, type Lease } from '../../src/sdk/index.js';
import { readAdminCredential } from '../../src/service/index.js';
import { fixtureKey } from '../support/harness.js';
import { startServerProcess, type ServerProcess } from '../support/server-process.js';
import { runWrit } from '../support/cli.js';

const writ = async (dataDir: string, ...args: string[]) => {
  const r = await runWrit(dataDir, ...args);
  return { out: r.output, code: r.code };
};

let server: ServerProcess | undefined;
afterAll(async () => server?.stop());


const alice = (url: string) => new WritClient({ baseUrl: url, principal: 'editor-alice', privateJwk: fixtureKey('editor-alice') });

async function revisionOf(upstreamUrl: string, resource: string): Promise<number> {
  const r = await fetch(`${upstreamUrl}/posts/${resource.split(':').pop()}`);
  return r.ok ? ((await r.json()) as { revision: number }).revision : 0;
}

function titleDecision(c: WritClient, resource: string) {
  return c.decide({ action: 'update_post', resource, environment: 'production', fields: ['title'] });
}

/** One acknowledged, leased title write; returns the fencing epoch it carried. */
async function leasedWrite(c: WritClient, upstreamUrl: string, resource: string, title: string): Promise<number> {
  const d = await titleDecision(c, resource);
  const receipt = await c.withLease([d], async ({ act }) =>
    act({ decision: d, action: 'update_post', resource, fields: ['title'], payload: { title }, expected_version: await revisionOf(upstreamUrl, resource) }), { ttlMs: 5000 });
  expect(receipt.status).toBe('COMPLETED');
  return receipt.lease_epoch as number;
}

/** A lease taken and kept (its holder still has token and epoch when the store goes back in time). */
async function heldLease(c: WritClient, resource: string): Promise<Lease> {
  return c.acquireLease([await titleDecision(c, resource)], { ttlMs: 120_000 });
}

describe('backup under load, restore, and fencing after it (real processes)', () => {
  it('the backup is taken while writes go on; after the restore the chain verifies, old epochs are refused and new ones are above every epoch issued before', { timeout: 180_000 }, async () => {
    server = await startServerProcess({ separateUpstream: true });
    const { dataDir } = server;
    const port = Number(new URL(server.url).port);
    const upstreamPort = Number(new URL(server.upstreamUrl).port);
    const upstreamUrl = server.upstreamUrl;
    const c = alice(server.url);
    const governance = () => new WritClient({ baseUrl: server!.url, principal: 'governance', privateJwk: readAdminCredential(dataDir).privateJwk as never });

    // Load: three writers, each on its own post, acknowledged write after acknowledged write.
    const posts = ['wp:post:700', 'wp:post:701', 'wp:post:702'];
    const acknowledgedAt: number[] = [];
    let stop = false;
    const load = posts.map(async (resource, w) => {
      for (let i = 0; !stop; i++) {
        await leasedWrite(c, upstreamUrl, resource, `w${w}-${i}`);
        acknowledgedAt.push(Date.now());
      }
    });
    const heldAtBackup = await heldLease(c, 'wp:post:710');
    await new Promise((r) => setTimeout(r, 1500));

    const backupFile = join(dataDir, 'backup.sqlite');
    const started = Date.now();
    const backup = await writ(dataDir, 'backup', backupFile, '--json');
    const ended = Date.now();
    expect(backup.code, backup.out).toBe(0);
    const summary = JSON.parse(backup.out) as { receipt_head: { seq: number; hash: string }; max_epoch: number };
    const duringBackup = acknowledgedAt.filter((t) => t >= started && t <= ended).length;

    // After the backup: more epochs on the same keys, a key the backup never saw, a lease taken and kept. All lost by the restore.
    await new Promise((r) => setTimeout(r, 1500));
    for (let i = 0; i < 3; i++) await leasedWrite(c, upstreamUrl, 'wp:post:720', `new ${i}`);
    const heldAfterBackup = await heldLease(c, 'wp:post:711');
    stop = true;
    await Promise.all(load);
    const { leases: lost } = await governance().request<{ leases: { key: string; epoch: number }[] }>('GET', '/v1/leases');
    const issuedBefore = new Map(lost.map((l) => [l.key, l.epoch]));
    const lostHead = await governance().request<{ entries: number }>('GET', '/v1/audit/verify');
    expect(lostHead.entries).toBeGreaterThan(summary.receipt_head.seq);

    // A running Writ has the file open: restore refuses and changes nothing.
    const refused = await writ(dataDir, 'restore', backupFile, '--epoch-margin', '100000');
    expect(refused.code).toBe(1);
    expect(refused.out).toContain('STORE_IN_USE');
    expect((await governance().request<{ entries: number }>('GET', '/v1/audit/verify')).entries).toBe(lostHead.entries);
    await server.stop();

    // Without saying how to keep epochs from repeating: refused.
    const unsaid = await writ(dataDir, 'restore', backupFile);
    expect(unsaid.code).toBe(1);
    expect(unsaid.out).toContain('UNPROCESSABLE');
    const restored = await writ(dataDir, 'restore', backupFile, '--epoch-margin', '100000', '--reason', 'disk replaced', '--json');
    expect(restored.code, restored.out).toBe(0);

    server = await startServerProcess({ dataDir, port, upstreamPort, separateUpstream: true });
    // The chain verifies: it is the backup's chain; the restore is named by audit verify.
    const verify = await writ(dataDir, 'audit', 'verify', '--json');
    expect(verify.code, verify.out).toBe(0);
    const verdict = JSON.parse(verify.out) as { ok: boolean; entries: number; head: string; restores: { kind: string; margin: number; reason: string; detail: { backup_receipt_head: unknown } }[] };
    expect(verdict.ok).toBe(true);
    // The backup's chain is a prefix of it: a write that was in flight when the backup was taken is PENDING
    // in it, and the restarted server reconciles it against the upstream (one more entry each).
    expect(verdict.entries).toBeGreaterThanOrEqual(summary.receipt_head.seq);
    const file = new Database(join(dataDir, 'writ.sqlite'), { readonly: true });
    expect(file.prepare('SELECT hash FROM receipt_entries WHERE seq = ?').pluck().get(summary.receipt_head.seq)).toBe(summary.receipt_head.hash);
    expect(file.prepare("SELECT COUNT(*) FROM receipt_entries WHERE seq > ? AND kind <> 'reconciled'").pluck().get(summary.receipt_head.seq)).toBe(0);
    file.close();
    expect(verdict.restores).toMatchObject([{ kind: 'RESTORE', margin: 100000, reason: 'disk replaced', detail: { backup_receipt_head: summary.receipt_head } }]);

    // Leases from before the restore — one in the backup, one taken after it — cannot write.
    for (const [resource, lease] of [['wp:post:710', heldAtBackup], ['wp:post:711', heldAfterBackup]] as const) {
      const d = await titleDecision(c, resource);
      const refusedWrite = await c
        .act({ decision: d, action: 'update_post', resource, fields: ['title'], payload: { title: 'stale' }, expected_version: await revisionOf(upstreamUrl, resource), lease })
        .then(() => 'written', (e: WritApiError) => e.code);
      expect(refusedWrite, resource).toBe('STALE_FENCING_EPOCH');
    }
    // Every new lease is above every epoch issued before the restore, and the upstream (which saw those) accepts its writes.
    for (const resource of [...posts, 'wp:post:710', 'wp:post:711', 'wp:post:720']) {
      const epoch = await leasedWrite(c, upstreamUrl, resource, 'after the restore');
      const before = issuedBefore.get(`${resource}#title`) ?? 0;
      expect(before, resource).toBeGreaterThan(0);
      expect(epoch, resource).toBeGreaterThan(before);
    }
    const after = await governance().request<{ ok: boolean; entries: number }>('GET', '/v1/audit/verify');
    expect(after.ok).toBe(true);
    console.log(`backup under load: ${duringBackup} writes acknowledged during the ${ended - started} ms backup (CLI process); ` +
      `backup receipt head ${summary.receipt_head.seq}, lost timeline head ${lostHead.entries}, highest epoch before restore ${Math.max(...issuedBefore.values())}`);
    expect(duringBackup).toBeGreaterThan(0);
  });
});
