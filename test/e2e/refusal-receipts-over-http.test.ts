import { rmSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { JWK } from 'jose';
import { createCallerAssertion } from '../../src/sdk/assertion.js';
import { readAdminCredential } from '../../src/service/index.js';
import { formatFencingEpochs } from '../../src/wire/fencing-header.js';
import { createTestDatabase } from '../../scripts/test-database.js';
import { runWrit } from '../support/cli.js';
import { fixtureKey } from '../support/harness.js';
import { startServerProcess, type ServerProcess } from '../support/server-process.js';

/**
 * Against a real `writ serve` (SQLite, then PostgreSQL), over HTTP as an agent and an auditor would:
 * a write refused for a stale fencing epoch leaves a receipt that says what lease it presented; the
 * decision used twice is refused naming the write that used it; the receipts of that decision are
 * found by it (GET /v1/receipts?decision_id=, and `writ receipts --decision`, `writ why` on the file);
 * and the log verifies.
 */
describe.each(['sqlite', 'postgres'] as const)('%s: refusals an auditor can follow', (engine) => {
  let server: ServerProcess;
  let drop: (() => Promise<void>) | undefined;
  beforeAll(async () => {
    const db = engine === 'postgres' ? await createTestDatabase('writ_e2e_refusals') : undefined;
    drop = db?.drop;
    server = await startServerProcess(db ? { env: { WRIT_DATABASE_URL: db.url } } : {});
  }, 60_000);
  afterAll(async () => {
    await server?.stop();
    if (server) rmSync(server.dataDir, { recursive: true, force: true });
    await drop?.();
  });

  async function call(method: string, path: string, body?: unknown, headers: Record<string, string> = {}, principal = 'seo-agent-7'): Promise<{ status: number; body: any }> {
    const privateJwk = principal === 'governance' ? (readAdminCredential(server.dataDir).privateJwk as JWK) : fixtureKey(principal);
    const authorization = `Bearer ${await createCallerAssertion({ principal, privateJwk })}`;
    const res = await fetch(`${server.url}${path}`, {
      method,
      headers: { authorization, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: res.status, body: await res.json() };
  }

  it('the lease presented, the write that used the decision, the receipts of a decision', { timeout: 60_000 }, async () => {
    const decided = await call('POST', '/v1/decisions', { action: 'update_post', resource: 'wp:post:77', environment: 'production', fields: ['title'] });
    expect(decided.body.allow, JSON.stringify(decided.body)).toBe(true);
    const { token: decision, decision_id } = decided.body;
    const lease = await call('POST', '/v1/leases', { decisions: [decision], ttl_ms: 10_000 });
    expect(lease.status, JSON.stringify(lease.body)).toBe(201);
    const { lease_id, token, epochs } = lease.body as { lease_id: string; token: string; epochs: Record<string, number> };
    const write = (fence: Record<string, number>, expected_version = 0) =>
      call('POST', '/v1/actions', { action: 'update_post', resource: 'wp:post:77', fields: ['title'], payload: { title: 'new' }, expected_version }, {
        'writ-decision': decision, 'writ-lease-token': token, 'writ-lease-id': lease_id, 'writ-fencing-epoch': formatFencingEpochs(fence),
      });

    const stale = await write(Object.fromEntries(Object.entries(epochs).map(([k, e]) => [k, e - 1])));
    expect(stale.status, JSON.stringify(stale.body)).toBe(409);
    expect(stale.body.code).toBe('STALE_FENCING_EPOCH');
    const receipt = (await call('GET', `/v1/receipts/${stale.body.receipt_id}`)).body.receipt;
    expect(receipt.status).toBe('REJECTED');
    expect(receipt.presented_lease.lease_id).toBe(lease_id);
    expect(receipt.presented_lease.keys.map((k: any) => [k.key, k.presented_epoch, k.current_epoch, k.holder, k.state]).sort())
      .toEqual(Object.entries(epochs).map(([k, e]) => [k, e - 1, e, 'seo-agent-7', 'HELD']).sort());
    expect(JSON.stringify(receipt)).not.toContain(token);
    expect((await call('GET', `/v1/receipts/${stale.body.receipt_id}/why`)).body.receipt.presented_lease).toEqual(receipt.presented_lease);

    const ok = await write(epochs);
    expect(ok.status, JSON.stringify(ok.body)).toBe(201);
    const replayed = await write(epochs, 1);
    expect(replayed.status).toBe(403);
    expect(replayed.body).toMatchObject({ code: 'DECISION_REPLAYED', used_by_receipt_id: ok.body.receipt.receipt_id });

    const byDecision = await call('GET', `/v1/receipts?decision_id=${encodeURIComponent(decision_id)}`);
    expect(byDecision.body.receipts.map((r: any) => [r.receipt_id, r.status])).toEqual([
      [stale.body.receipt_id, 'REJECTED'], [ok.body.receipt.receipt_id, 'COMPLETED'], [replayed.body.receipt_id, 'REJECTED'],
    ]);

    const verified = await call('GET', '/v1/audit/verify', undefined, {}, 'governance');
    expect(verified.body, JSON.stringify(verified.body)).toMatchObject({ ok: true });
    if (engine === 'sqlite') {
      // The same from the command line, on the server's data directory.
      const listed = await runWrit(server.dataDir, 'receipts', '--decision', decision_id, '--json');
      expect(listed.code, listed.output).toBe(0);
      expect(JSON.parse(listed.stdout).receipts.map((r: any) => r.receipt_id)).toEqual(byDecision.body.receipts.map((r: any) => r.receipt_id));
      const why = await runWrit(server.dataDir, 'why', stale.body.receipt_id);
      expect(why.code, why.output).toBe(0);
      expect(why.stdout).toContain(`lease presented: ${lease_id}`);
      const verify = await runWrit(server.dataDir, 'audit', 'verify');
      expect(verify.code, verify.output).toBe(0);
    }
  });
});
