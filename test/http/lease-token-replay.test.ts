import { decodeJwt } from 'jose';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { newLeaseToken } from '../../src/sdk/index.js';
import { decideOk } from '../support/agent.js';
import { startHarness, type Harness } from '../support/harness.js';

/**
 * POST /v1/leases with the caller's own `token`: asked again after its answer was lost, the acquisition
 * is answered with the lease it was granted (200, replayed, Idempotent-Replayed) instead of a second lease
 * or RESOURCE_BUSY behind itself.
 */
let h: Harness;
beforeEach(async () => {
  h = await startHarness();
});
afterEach(async () => h?.close());

const A = 'seo-agent-7';
const K = 'wp:post:1024';
const KEY = `${K}#title`;
const lease = (principal: string, decisions: string[], token: string, extra: Record<string, unknown> = {}) =>
  h.call(principal, { method: 'POST', url: '/v1/leases', payload: { decisions, ttl_ms: 10_000, token, ...extra } });
const leaseRows = async () => (await h.call('governance', { method: 'GET', url: `/v1/leases` })).body.leases;

describe('a lease acquisition asked again with its own token', () => {
  it('is answered 200 with the same lease, replayed, and takes nothing; the first answer was 201, replayed false', async () => {
    const d = await decideOk(h, A, { resource: K, fields: ['title'] });
    const token = newLeaseToken();
    const first = await lease(A, [d.token], token);
    expect(first.status, first.raw).toBe(201);
    expect(first.body).toMatchObject({ token, replayed: false, keys: [KEY], holder: A, epochs: { [KEY]: 1 } });
    expect(first.headers['idempotent-replayed']).toBeUndefined();
    const rows = await leaseRows();

    // A new decision (the first was spent by nobody: a lease does not spend decisions) and a wait: still the same lease at once.
    const d2 = await decideOk(h, A, { resource: K, fields: ['title'] });
    const again = await lease(A, [d2.token], token, { wait_ms: 5_000 });
    expect(again.status, again.raw).toBe(200);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body).toEqual({ ...first.body, replayed: true });
    expect(await leaseRows()).toEqual(rows);
  });

  it('spends the caller assertion of the retry: the same assertion sent again is 401, never the lease', async () => {
    const d = await decideOk(h, A, { resource: K, fields: ['title'] });
    const token = newLeaseToken();
    expect((await lease(A, [d.token], token)).status).toBe(201);
    const headers = await h.auth(A);
    const ask = () => h.app.inject({ method: 'POST', url: '/v1/leases', headers, payload: { decisions: [d.token], token } });
    expect((await ask()).statusCode).toBe(200);
    // Spent in the store (durably, as any lease call's), not only marked in this process's memory: another
    // replica, or this one restarted, refuses it too.
    const { jti } = decodeJwt(headers.authorization!.replace(/^Bearer /, ''));
    expect(h.db.prepare('SELECT count(*) AS n FROM seen_ids WHERE id = ?').get(`${A}\u0000${jti}`)).toEqual({ n: 1 });
    const replayed = await ask();
    expect(replayed.statusCode, replayed.body).toBe(401);
    expect(replayed.body).not.toContain(token);
  });

  it('a token whose lease was released is LEASE_EXPIRED, one used by another principal IDEMPOTENCY_MISMATCH, a malformed one 400; none takes anything', async () => {
    const d = await decideOk(h, A, { resource: K, fields: ['title'] });
    const token = newLeaseToken();
    const first = await lease(A, [d.token], token);
    expect(first.status).toBe(201);
    const released = await h.call(A, { method: 'DELETE', url: `/v1/leases/${first.body.lease_id}`, payload: { token } });
    expect(released.status, released.raw).toBe(200);
    const rows = await leaseRows();

    const ended = await lease(A, [d.token], token);
    expect(ended.status, ended.raw).toBe(423);
    expect(ended.body).toMatchObject({ code: 'LEASE_EXPIRED', lease_id: first.body.lease_id });
    expect(ended.body.detail).toMatch(/released.*fresh token/);

    const other = await decideOk(h, 'content-agent-3', { resource: K, fields: ['body'] });
    const copied = await lease('content-agent-3', [other.token], token);
    expect(copied.status, copied.raw).toBe(422);
    expect(copied.body.code).toBe('IDEMPOTENCY_MISMATCH');
    expect(copied.body.detail).not.toMatch(/seo-agent-7|#title/);
    const malformed = await lease(A, [d.token], `${token.slice(0, 40)}!!!`);
    expect(malformed.status, malformed.raw).toBe(400);
    expect(malformed.body.code).toBe('MALFORMED_REQUEST');
    expect(await leaseRows()).toEqual(rows);
  });
});
