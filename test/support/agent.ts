import { expect } from 'vitest';
import { formatFencingEpochs } from '../../src/wire/fencing-header.js';
import type { Harness } from './harness.js';

/** Small in-process "agent" helpers over app.inject, for gateway tests. */
export async function decideOk(h: Harness, principal: string, req: { action?: string; resource: string; fields: string[]; environment?: string; context?: Record<string, unknown> }): Promise<{ token: string; body: any }> {
  const r = await h.call(principal, { method: 'POST', url: '/v1/decisions', payload: { action: 'update_post', environment: 'production', ...req } });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  expect(r.body.allow, JSON.stringify(r.body.reasons)).toBe(true);
  return { token: r.body.token, body: r.body };
}

export async function leaseOk(h: Harness, principal: string, decisions: string[], extra: Record<string, unknown> = {}): Promise<{ lease_id: string; token: string; epochs: Record<string, number>; keys: string[] }> {
  const r = await h.call(principal, { method: 'POST', url: '/v1/leases', payload: { decisions, ttl_ms: 10_000, ...extra } });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  return r.body;
}

export const fencing = formatFencingEpochs;

export async function act(
  h: Harness,
  principal: string,
  body: { action?: string; resource: string; fields: string[]; payload: Record<string, unknown>; expected_version?: number },
  headers: { decision?: string; lease?: { lease_id: string; token: string; epochs: Record<string, number> }; fencing?: string; token?: string; idempotencyKey?: string },
) {
  const hdrs: Record<string, string> = {};
  if (headers.decision) hdrs['writ-decision'] = headers.decision;
  if (headers.lease) {
    hdrs['writ-lease-token'] = headers.token ?? headers.lease.token;
    hdrs['writ-lease-id'] = headers.lease.lease_id;
    hdrs['writ-fencing-epoch'] = headers.fencing ?? fencing(headers.lease.epochs);
  }
  if (headers.idempotencyKey) hdrs['idempotency-key'] = headers.idempotencyKey;
  return h.call(principal, { method: 'POST', url: '/v1/actions', headers: hdrs, payload: { action: 'update_post', ...body } });
}

/** A granted lease as POST /v1/leases answers it. */
export type Lease = Awaited<ReturnType<typeof leaseOk>>;
/** What POST /v1/actions answered (through `act`). */
export type ActAnswer = Awaited<ReturnType<typeof act>>;

/** One write through the gateway: `fields` defaults to the payload's own names. */
export interface WriteRequest {
  action?: string;
  resource: string;
  fields?: string[];
  payload: Record<string, unknown>;
  expected_version?: number;
  environment?: string;
}

/**
 * An allowed decision and a lease granted on it, as `principal`: `decideOk` then `leaseOk` (each checks that
 * it was granted). `lease` is added to POST /v1/leases's body (e.g. `{ ttl_ms: 60_000 }`, `{ preempt: true }`).
 */
export async function decideAndLease(
  h: Harness,
  principal: string,
  req: { action?: string; resource: string; fields: string[]; environment?: string; context?: Record<string, unknown> },
  lease: Record<string, unknown> = {},
): Promise<{ decision: { token: string; body: any }; lease: Lease }> {
  const decision = await decideOk(h, principal, req);
  return { decision, lease: await leaseOk(h, principal, [decision.token], lease) };
}

/**
 * "Decide, lease, write once" as an agent does it, over app.inject: POST /v1/decisions (must allow), POST
 * /v1/leases on that decision (must be granted), then POST /v1/actions with the decision, the lease and its
 * fencing epochs. The write's answer is not checked here: the test says what it expects of it.
 * `release` lets the lease go afterwards (DELETE /v1/leases/{id}, which must answer 200), for a test that
 * writes the same key again; `idempotencyKey` is sent as Idempotency-Key.
 */
export async function decideLeaseWrite(
  h: Harness,
  principal: string,
  write: WriteRequest,
  options: { lease?: Record<string, unknown>; idempotencyKey?: string; release?: boolean } = {},
): Promise<{ decision: { token: string; body: any }; lease: Lease; answer: ActAnswer }> {
  const { action, resource, environment, payload, expected_version } = write;
  const fields = write.fields ?? Object.keys(payload);
  const { decision, lease } = await decideAndLease(h, principal, { resource, fields, ...(action === undefined ? {} : { action }), ...(environment === undefined ? {} : { environment }) }, options.lease);
  const answer = await act(
    h, principal,
    { resource, fields, payload, ...(action === undefined ? {} : { action }), ...(expected_version === undefined ? {} : { expected_version }) },
    { decision: decision.token, lease, ...(options.idempotencyKey === undefined ? {} : { idempotencyKey: options.idempotencyKey }) },
  );
  if (options.release) {
    const released = await h.call(principal, { method: 'DELETE', url: `/v1/leases/${lease.lease_id}`, payload: { token: lease.token } });
    expect(released.status, released.raw).toBe(200);
  }
  return { decision, lease, answer };
}

export async function upstreamGet(h: Harness, path: string): Promise<any> {
  const res = await fetch(`${h.upstreamUrl}${path}`);
  return res.json();
}

/** Everything that shows whether a refused request changed anything: upstream writes and the lease table. */
export async function snapshot(h: Harness): Promise<unknown> {
  const writes = await upstreamGet(h, '/writes');
  const keys = h.db.prepare('SELECT * FROM lease_keys ORDER BY 1').all();
  const leases = h.db.prepare('SELECT * FROM leases ORDER BY 1').all();
  const requests = await upstreamGet(h, '/requests');
  return { writes, keys, leases, upstreamRequests: Array.isArray(requests) ? requests.length : requests.requests?.length };
}
