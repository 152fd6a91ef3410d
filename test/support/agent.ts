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
