import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { act, decideAndLease, decideOk, leaseOk, snapshot } from '../support/agent.js';
import { startHarness, type Harness } from '../support/harness.js';

let h: Harness;
let clock: ManualClock;
beforeEach(async () => {
  clock = new ManualClock(Date.UTC(2026, 5, 1, 12, 0, 0));
  h = await startHarness({ upstream: true, clock });
});
afterEach(async () => h?.close());

const titleWrite: { resource: string; fields: string[]; payload: Record<string, unknown>; expected_version: number; action?: string } = { resource: 'wp:post:1024', fields: ['title'], payload: { title: 'x' }, expected_version: 0 };

async function refusedWith(principal: string, body: typeof titleWrite, creds: Parameters<typeof act>[3], status: number, code: string) {
  const before = await snapshot(h);
  const r = await act(h, principal, body, creds);
  expect(r.status, JSON.stringify(r.body)).toBe(status);
  expect(r.body.code).toBe(code);
  expect(await snapshot(h)).toEqual(before);
  // The refusal itself is on the record.
  const rec = await h.call('governance', { method: 'GET', url: `/v1/receipts/${r.body.receipt_id}` });
  expect(rec.body.receipt.status).toBe('REJECTED');
  expect(rec.body.receipt.error.code).toBe(code);
}

describe('a decision authorizes one write, and only the one it was made for', () => {
  it('used for another resource → DECISION_MISMATCH', async () => {
    const d = await decideOk(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['title'] });
    await refusedWith('seo-agent-7', { ...titleWrite, resource: 'wp:post:2048' }, { decision: d.token }, 403, 'DECISION_MISMATCH');
  });
  it('used by another principal → DECISION_MISMATCH', async () => {
    const d = await decideOk(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['title'] });
    await refusedWith('content-agent-3', titleWrite, { decision: d.token }, 403, 'DECISION_MISMATCH');
  });
  it('used for another action → DECISION_MISMATCH', async () => {
    const d = await decideOk(h, 'editor-alice', { resource: 'wp:post:1024', fields: ['title'] });
    await refusedWith('editor-alice', { ...titleWrite, action: 'publish_post' }, { decision: d.token }, 403, 'DECISION_MISMATCH');
  });
  it('used for another field set → DECISION_MISMATCH', async () => {
    const d = await decideOk(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['title'] });
    await refusedWith('seo-agent-7', { ...titleWrite, fields: ['title', 'meta_description'], payload: { title: 'x', meta_description: 'y' } }, { decision: d.token }, 403, 'DECISION_MISMATCH');
  });
  it('after expiry → DECISION_EXPIRED', async () => {
    const { decision: d, lease } = await decideAndLease(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['title'] });
    clock.advance(30_000);
    await refusedWith('seo-agent-7', titleWrite, { decision: d.token, lease }, 403, 'DECISION_EXPIRED');
  });
  it('twice → DECISION_REPLAYED (without an idempotency key)', async () => {
    const { decision: d, lease } = await decideAndLease(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['title'] });
    const first = await act(h, 'seo-agent-7', titleWrite, { decision: d.token, lease });
    expect(first.status).toBe(201);
    await refusedWith('seo-agent-7', { ...titleWrite, expected_version: 1 }, { decision: d.token, lease }, 403, 'DECISION_REPLAYED');
  });
  it('a forged or missing decision → DECISION_INVALID', async () => {
    await refusedWith('seo-agent-7', titleWrite, {}, 403, 'DECISION_INVALID');
    const d = await decideOk(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['title'] });
    const [head, payload, sig] = d.token.split('.');
    const forged = JSON.parse(Buffer.from(payload!, 'base64url').toString());
    forged.fields = ['body'];
    const tampered = `${head}.${Buffer.from(JSON.stringify(forged)).toString('base64url')}.${sig}`;
    await refusedWith('seo-agent-7', { ...titleWrite, fields: ['body'], payload: { body: 'x' } }, { decision: tampered }, 403, 'DECISION_INVALID');
  });
});

describe('the authority watermark', () => {
  it('revocation race: an edge revoked between decision and write → AUTHORITY_REVOKED, upstream untouched', async () => {
    const { decision: d, lease } = await decideAndLease(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['title'] });
    await h.call('governance', { method: 'DELETE', url: '/v1/edges/d-orch-seo', payload: { reason: 'revoked mid-flight' } });
    await refusedWith('seo-agent-7', titleWrite, { decision: d.token, lease }, 403, 'AUTHORITY_REVOKED');
  });
  it('an owner change between decision and write → OWNER_CHANGED', async () => {
    const { decision: d, lease } = await decideAndLease(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['title'] });
    await h.call('governance', { method: 'DELETE', url: '/v1/edges/o-seo-metadata' });
    await h.call('governance', { method: 'POST', url: '/v1/ownerships', payload: { id: 'o-new', owner: 'content-control-plane', resource: 'wp:post:*', fields: ['title'], reason: 'reorg' } });
    await refusedWith('seo-agent-7', titleWrite, { decision: d.token, lease }, 409, 'OWNER_CHANGED');
  });
  it('a lease cannot be taken without authority: a revoked chain refuses the lease too', async () => {
    const d = await decideOk(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['title'] });
    await h.call('governance', { method: 'DELETE', url: '/v1/edges/d-orch-seo' });
    const r = await h.call('seo-agent-7', { method: 'POST', url: '/v1/leases', payload: { decisions: [d.token], ttl_ms: 5000 } });
    expect(r.status).toBe(403);
    expect(r.body.code).toBe('AUTHORITY_REVOKED');
  });
  it('no lease squatting: another principal\'s decision does not get you a lease', async () => {
    const d = await decideOk(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['title'] });
    const r = await h.call('content-agent-3', { method: 'POST', url: '/v1/leases', payload: { decisions: [d.token], ttl_ms: 5000 } });
    expect(r.status).toBe(403);
    expect(r.body.code).toBe('DECISION_MISMATCH');
  });
});

describe('fencing at the gateway', () => {
  it('a wrong token → LEASE_TOKEN_MISMATCH; a stale epoch → STALE_FENCING_EPOCH; nothing changes', async () => {
    const { decision: d, lease } = await decideAndLease(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['title'] });
    await refusedWith('seo-agent-7', titleWrite, { decision: d.token, lease, token: 'not-the-token' }, 423, 'LEASE_TOKEN_MISMATCH');
    const epoch = lease.epochs['wp:post:1024#title']!;
    await refusedWith('seo-agent-7', titleWrite, { decision: d.token, lease, fencing: `wp:post:1024#title=${epoch - 1}` }, 409, 'STALE_FENCING_EPOCH');
  });
  it('release then re-acquire: new token, epoch + 1, the old token is refused', async () => {
    const { decision: d, lease: first } = await decideAndLease(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['title'] });
    const rel = await h.call('seo-agent-7', { method: 'DELETE', url: `/v1/leases/${first.lease_id}`, payload: { token: first.token } });
    expect(rel.status).toBe(200);
    const second = await leaseOk(h, 'seo-agent-7', [d.token]);
    expect(second.token).not.toBe(first.token);
    expect(second.epochs['wp:post:1024#title']).toBe(first.epochs['wp:post:1024#title']! + 1);
    await refusedWith('seo-agent-7', titleWrite, { decision: d.token, lease: { ...second, token: first.token } }, 423, 'LEASE_TOKEN_MISMATCH');
    const renewOld = await h.call('seo-agent-7', { method: 'POST', url: `/v1/leases/${first.lease_id}/renew`, payload: { token: first.token } });
    expect(renewOld.status).toBeGreaterThanOrEqual(400);
  });
});
