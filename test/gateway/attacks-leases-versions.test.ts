import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { act, decideAndLease, decideOk, snapshot } from '../support/agent.js';
import { startHarness, type Harness } from '../support/harness.js';

let h: Harness;
beforeEach(async () => {
  h = await startHarness({ upstream: true });
});
afterEach(async () => h?.close());

const title = (resource = 'wp:post:1024', expected_version: unknown = 0) => ({ resource, fields: ['title'], payload: { title: 'x' }, expected_version: expected_version as number });

/** Refused with `code`, and nothing changed: no upstream request, no lease row. */
async function refused(principal: string, body: Parameters<typeof act>[2], creds: Parameters<typeof act>[3], code: string) {
  const before = await snapshot(h);
  const r = await act(h, principal, body, creds);
  expect(r.body.code, r.raw).toBe(code);
  expect(await snapshot(h)).toEqual(before);
  return r;
}

describe('a lease is its holder\'s, for its keys, at its epoch', () => {
  it('another principal\'s lease (token, id and epochs as granted) with one\'s own decision → LEASE_TOKEN_MISMATCH', async () => {
    await h.call('governance', {
      method: 'POST', url: '/v1/delegations',
      payload: { id: 'd-content-title', from: 'orchestrator', to: 'content-agent-3', reason: 'also titles', max_depth: 0, scope: { actions: ['update_post'], resources: ['wp:post:*'], environments: ['production'], fields: ['title'], risk_max: 1 } },
    });
    const { lease: theirs } = await decideAndLease(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['title'] });
    const mine = await decideOk(h, 'content-agent-3', { resource: 'wp:post:1024', fields: ['title'] });
    await refused('content-agent-3', title(), { decision: mine.token, lease: theirs }, 'LEASE_TOKEN_MISMATCH');
  });

  it('the token of one of one\'s leases with the id of another (or an id of no lease) → LEASE_TOKEN_MISMATCH', async () => {
    const a = await decideAndLease(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['title'] });
    const b = await decideAndLease(h, 'seo-agent-7', { resource: 'wp:post:2048', fields: ['title'] });
    // A's token and epochs, B's id, writing A's key.
    await refused('seo-agent-7', title(), { decision: a.decision.token, lease: { ...a.lease, lease_id: b.lease.lease_id } }, 'LEASE_TOKEN_MISMATCH');
    await refused('seo-agent-7', title(), { decision: a.decision.token, lease: { ...a.lease, lease_id: 'lease_nonexistent' } }, 'LEASE_TOKEN_MISMATCH');
    // B's token (and id), writing A's key with A's epoch.
    await refused('seo-agent-7', title(), { decision: a.decision.token, lease: { ...b.lease, epochs: a.lease.epochs } }, 'LEASE_TOKEN_MISMATCH');
    // The genuine pair still writes.
    const ok = await act(h, 'seo-agent-7', title(), { decision: a.decision.token, lease: a.lease });
    expect(ok.status, ok.raw).toBe(201);
  });

  it('an epoch above the current one, or one written oddly (sign, exponent, hex, past 2^53, repeated key), is refused and nothing is forwarded', async () => {
    const { decision, lease } = await decideAndLease(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['title'] });
    const epoch = lease.epochs['wp:post:1024#title']!;
    await refused('seo-agent-7', title(), { decision: decision.token, lease, fencing: `wp:post:1024#title=${epoch + 1}` }, 'STALE_FENCING_EPOCH');
    for (const bad of [`-${epoch}`, `+${epoch}`, `${epoch}e0`, `0x${epoch}`, `${epoch}.0`, '9007199254740993', `wp:post:1024#title=${epoch}, wp:post:1024#title=${epoch}`, `wp:post:1024#Title=${epoch}`, `wp:post:1024=${epoch}`]) {
      // Unparseable, or naming a key the write does not coordinate on: MALFORMED_REQUEST, before any lease is read.
      const r = await refused('seo-agent-7', title(), { decision: decision.token, lease, fencing: bad }, 'MALFORMED_REQUEST');
      expect(r.status, bad).toBeGreaterThanOrEqual(400);
    }
    const ok = await act(h, 'seo-agent-7', title(), { decision: decision.token, lease, fencing: String(epoch) });
    expect(ok.status, ok.raw).toBe(201);
  });
});

describe('the version precondition cannot be bypassed', () => {
  it('missing → VERSION_REQUIRED; null, a string, a float, a negative, a boolean, an array or past 2^53 − 1 → 400 MALFORMED_REQUEST; nothing forwarded', async () => {
    const { decision, lease } = await decideAndLease(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['title'] });
    const { expected_version: _, ...noVersion } = title();
    await refused('seo-agent-7', noVersion, { decision: decision.token, lease }, 'VERSION_REQUIRED');
    for (const v of [null, '0', 0.5, -1, true, [0], { v: 0 }, 2 ** 53, 1e300]) {
      const r = await refused('seo-agent-7', title('wp:post:1024', v), { decision: decision.token, lease }, 'MALFORMED_REQUEST');
      expect(r.status, JSON.stringify(v)).toBe(400);
    }
    // The largest safe integer passes Writ's schema and is forwarded as If-Match: "9007199254740991"; the sample
    // upstream reads revisions of at most 15 digits and refuses it (400): FAILED, nothing applied.
    const ahead = await act(h, 'seo-agent-7', title('wp:post:1024', Number.MAX_SAFE_INTEGER), { decision: decision.token, lease });
    expect(ahead.body.code, ahead.raw).toBe('UPSTREAM_FAILED');
    expect(((await (await fetch(`${h.upstreamUrl}/writes`)).json()) as { total: number }).total).toBe(0);
    expect((await h.call('governance', { method: 'GET', url: `/v1/receipts/${ahead.body.receipt_id}` })).body.receipt.status).toBe('FAILED');
  });
});
