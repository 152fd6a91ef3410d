import { createHash, randomBytes } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { formatWhy } from '../../src/cli/format.js';
import { leaseIdOfToken } from '../../src/lease/token.js';
import { whyReceipt } from '../../src/service/index.js';
import { act, decideAndLease, decideOk, fencing, leaseOk } from '../support/agent.js';
import { startHarness, type Harness } from '../support/harness.js';

/**
 * A write refused for a lease reason leaves a REJECTED receipt that says what lease the write presented
 * (the lease id, never the token nor its hash), the fencing epoch it gave for each key, and each key's
 * epoch, holder and lease at the refusal: in the receipt, its `why`, and the list of receipts, on
 * both engines, with the log still verifying.
 */
describe.each(['sqlite', 'postgres'] as const)('%s: a REJECTED receipt records the lease presented', (engine) => {
  let h: Harness;
  beforeEach(async () => {
    h = await startHarness({ upstream: true, engine });
  });
  afterEach(async () => h?.close());

  const titleWrite = { resource: 'wp:post:1024', fields: ['title'], payload: { title: 'x' }, expected_version: 0 };
  const sorted = <T extends { key: string }>(keys: T[]) => [...keys].sort((a, b) => a.key.localeCompare(b.key));

  /** The refusal, and its receipt as the writer (`reader`) reads it. */
  async function rejected(r: { status: number; body: any }, status: number, code: string, reader = 'seo-agent-7'): Promise<any> {
    expect(r.status, JSON.stringify(r.body)).toBe(status);
    expect(r.body.code).toBe(code);
    const got = await h.call(reader, { method: 'GET', url: `/v1/receipts/${r.body.receipt_id}` });
    expect(got.status, JSON.stringify(got.body)).toBe(200);
    expect(got.body.receipt).toMatchObject({ status: 'REJECTED', error: { code } });
    // The same in its why.
    const why = await h.call(reader, { method: 'GET', url: `/v1/receipts/${r.body.receipt_id}/why` });
    expect(why.body.receipt.presented_lease).toEqual(got.body.receipt.presented_lease);
    return got;
  }

  it('a stale fencing epoch: the lease presented, the epoch given, and the key\'s current epoch and holder', async () => {
    const { decision: d, lease } = await decideAndLease(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['title'] });
    const stale = Object.fromEntries(Object.entries(lease.epochs).map(([k, e]) => [k, e - 1]));
    const got = await rejected(await act(h, 'seo-agent-7', titleWrite, { decision: d.token, lease, fencing: fencing(stale) }), 409, 'STALE_FENCING_EPOCH');
    const p = got.body.receipt.presented_lease;
    expect(p).toMatchObject({ lease_id: lease.lease_id, token_lease_id: lease.lease_id });
    expect(sorted(p.keys)).toEqual(sorted(lease.keys.map((key) => ({ key, presented_epoch: lease.epochs[key]! - 1, current_epoch: lease.epochs[key], holder: 'seo-agent-7', lease_id: lease.lease_id, state: 'HELD' }))));
    expect(got.raw).not.toContain(lease.token);
    expect(got.raw).not.toContain(createHash('sha256').update(lease.token).digest('hex'));
    // `writ why` says it in words.
    const text = formatWhy(await whyReceipt(h.ctx, got.body.receipt.receipt_id));
    expect(text).toContain(`lease presented: ${lease.lease_id}`);
    const [key] = lease.keys;
    expect(text).toContain(`${key}: fencing epoch presented ${lease.epochs[key!]! - 1}, current ${lease.epochs[key!]}; held by seo-agent-7 (lease ${lease.lease_id}) at the refusal`);

    const listed = await h.call('seo-agent-7', { method: 'GET', url: '/v1/receipts?status=REJECTED' });
    expect(listed.body.receipts.map((x: any) => [x.receipt_id, x.presented_lease])).toEqual([[got.body.receipt.receipt_id, p]]);
  });

  it('a token that is not the holder\'s: the lease named by Writ-Lease-Id and the one the token names, neither the token nor its hash', async () => {
    const { decision: d, lease } = await decideAndLease(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['title'] });
    const other = randomBytes(32).toString('base64url');
    const got = await rejected(await act(h, 'seo-agent-7', titleWrite, { decision: d.token, lease, token: other }), 423, 'LEASE_TOKEN_MISMATCH');
    const p = got.body.receipt.presented_lease;
    expect(p.lease_id).toBe(lease.lease_id);
    expect(p.token_lease_id).toBe(leaseIdOfToken(other));
    expect(p.token_lease_id).not.toBe(lease.lease_id);
    expect(sorted(p.keys)).toEqual(sorted(lease.keys.map((key) => ({ key, presented_epoch: lease.epochs[key], current_epoch: lease.epochs[key], holder: 'seo-agent-7', lease_id: lease.lease_id, state: 'HELD' }))));
    for (const secret of [other, lease.token]) {
      expect(got.raw).not.toContain(secret);
      expect(got.raw).not.toContain(createHash('sha256').update(secret).digest('hex'));
    }
    // A token sent as Writ-Lease-Id is not recorded as a lease id.
    const misplaced = await rejected(
      await h.call('seo-agent-7', { method: 'POST', url: '/v1/actions', headers: { 'writ-decision': d.token, 'writ-lease-token': other, 'writ-lease-id': other, 'writ-fencing-epoch': fencing(lease.epochs) }, payload: { action: 'update_post', ...titleWrite } }),
      423, 'LEASE_TOKEN_MISMATCH');
    expect(misplaced.body.receipt.presented_lease.lease_id).toBe(leaseIdOfToken(other));
    expect(misplaced.raw).not.toContain(other);
  });

  it('a lease token sent as Writ-Fencing-Epoch (headers mixed up) is neither in the refusal nor in its receipt', async () => {
    const { decision: d, lease } = await decideAndLease(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['title'] });
    const r = await act(h, 'seo-agent-7', titleWrite, { decision: d.token, lease, fencing: lease.token });
    expect(r.status, JSON.stringify(r.body)).toBe(400);
    expect(r.body.code).toBe('MALFORMED_REQUEST');
    expect(r.body.detail).toMatch(/Writ-Fencing-Epoch .*not an epoch nor key=epoch pairs/);
    expect(r.raw).not.toContain(lease.token);
    // The receipt is hash-chained: what it records stays for good.
    const got = await h.call('seo-agent-7', { method: 'GET', url: `/v1/receipts/${r.body.receipt_id}` });
    expect(got.body.receipt).toMatchObject({ status: 'REJECTED', error: { code: 'MALFORMED_REQUEST' } });
    expect(got.raw).not.toContain(lease.token);
  });

  it('a lease preempted during an incident: the holder\'s old lease and epoch against the commander\'s hold', async () => {
    const release = { action: 'deploy', resource: 'deploy:site:www', fields: [] as string[] };
    const { decision: rd, lease: held } = await decideAndLease(h, 'release-controller', release);
    const n = held.epochs['deploy:site:www']!;
    const id = await decideOk(h, 'incident-commander', { action: 'declare_incident', resource: 'incident:inc-1', fields: [] });
    expect((await h.call('incident-commander', { method: 'POST', url: '/v1/incidents', payload: { id: 'inc-1', reason: 'checkout is down', decision: id.token } })).status).toBe(201);
    const cd = await decideOk(h, 'incident-commander', release);
    const taken = await leaseOk(h, 'incident-commander', [cd.token], { preempt: true });
    const commander = { holder: 'incident-commander', lease_id: taken.lease_id, state: 'HELD', current_epoch: n + 1 };

    const stale = await rejected(await act(h, 'release-controller', { ...release, payload: {}, expected_version: 0 }, { decision: rd.token, lease: held }), 409, 'STALE_FENCING_EPOCH', 'release-controller');
    expect(stale.body.receipt.presented_lease).toEqual({ lease_id: held.lease_id, token_lease_id: held.lease_id, keys: [{ key: 'deploy:site:www', presented_epoch: n, ...commander }] });
    const preempted = await rejected(
      await act(h, 'release-controller', { ...release, payload: {}, expected_version: 0 }, { decision: rd.token, lease: held, fencing: fencing({ 'deploy:site:www': n + 1 }) }),
      409, 'LEASE_PREEMPTED', 'release-controller');
    expect(preempted.body.receipt.presented_lease).toEqual({ lease_id: held.lease_id, token_lease_id: held.lease_id, keys: [{ key: 'deploy:site:www', presented_epoch: n + 1, ...commander }] });
  });

  it('no lease at all: nothing presented, and the key free at epoch 0', async () => {
    const d = await decideOk(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['title'] });
    const got = await rejected(await act(h, 'seo-agent-7', titleWrite, { decision: d.token }), 423, 'LEASE_REQUIRED');
    const p = got.body.receipt.presented_lease;
    expect(p.lease_id).toBeNull();
    expect(p.token_lease_id).toBeNull();
    expect(p.keys.length).toBeGreaterThan(0);
    for (const k of p.keys) expect(k).toMatchObject({ presented_epoch: null, current_epoch: 0, holder: null, lease_id: null, state: 'FREE' });
  });

  it('a refusal for another reason records none; the log verifies with every kind of receipt in it', async () => {
    const d = await decideOk(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['title'] });
    const mismatch = await act(h, 'seo-agent-7', { ...titleWrite, resource: 'wp:post:2048' }, { decision: d.token });
    expect(mismatch.body.code).toBe('DECISION_MISMATCH');
    const got = await h.call('seo-agent-7', { method: 'GET', url: `/v1/receipts/${mismatch.body.receipt_id}` });
    expect(got.body.receipt.presented_lease).toBeNull();
    const lease = await leaseOk(h, 'seo-agent-7', [d.token]);
    expect((await act(h, 'seo-agent-7', titleWrite, { decision: d.token, lease, fencing: fencing(Object.fromEntries(Object.keys(lease.epochs).map((k) => [k, 0]))) })).body.code).toBe('STALE_FENCING_EPOCH');
    const ok = await act(h, 'seo-agent-7', titleWrite, { decision: d.token, lease });
    expect(ok.status, JSON.stringify(ok.body)).toBe(201);
    expect(ok.body.receipt.presented_lease).toBeNull();
    const verify = await h.call('governance', { method: 'GET', url: '/v1/audit/verify' });
    expect(verify.body, JSON.stringify(verify.body)).toMatchObject({ ok: true });
  });
});
