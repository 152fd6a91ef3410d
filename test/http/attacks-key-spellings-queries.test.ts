/**
 * One name, one key, tried at the doors that only read: the query strings of GET endpoints. A write to
 * wp:post:1024 (alias wordpress:article:1024) is recorded under its canonical key; a query under another
 * spelling of that key finds nothing, and says nothing about why.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GOVERNANCE_ID } from '../../src/graph/model.js';
import { decideLeaseWrite } from '../support/agent.js';
import { startHarness, type Harness } from '../support/harness.js';

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ example: true, upstream: true });
  const { answer } = await decideLeaseWrite(h, 'seo-agent-7', { resource: 'wp:post:1024', payload: { title: 'first' }, expected_version: 0 });
  expect(answer.status, JSON.stringify(answer.body)).toBe(201);
});
afterAll(async () => h?.close());

const receiptsOf = (resource: string) => h.call(GOVERNANCE_ID, { method: 'GET', url: `/v1/receipts?resource=${encodeURIComponent(resource)}` });

describe('query strings of GET endpoints', () => {
  it('holds: the canonical key finds the write\'s receipt', async () => {
    const r = await receiptsOf('wp:post:1024');
    expect(r.status).toBe(200);
    expect(r.body.receipts.map((x: { resource_key: string }) => x.resource_key)).toEqual(['wp:post:1024']);
  });

  // DESIGN QUESTION (not built): GET /v1/receipts?resource= (and /v1/leases?resource=) take the key as
  // written, so an auditor asking under the alias (wordpress:article:1024), in NFD, or with a host in
  // capitals is told 200 [] — "no writes" — for a key that was written. Refusing with 422 naming the
  // canonical spelling (as canonicalResource does for decisions) would need a check of spelling only:
  // not of the key's resource class, since receipts outlive the policy that governed them (a class
  // removed later must not hide its receipts), and /v1/leases takes coordination keys (R#f, domain:…),
  // not resource keys. Rewriting the alias instead would break "refused, not rewritten".
  it.fails('a query under the alias of a written key is refused naming the canonical key, not answered empty', async () => {
    const r = await receiptsOf('wordpress:article:1024');
    expect(r.status, r.raw).toBe(422);
    expect(r.body.detail).toContain('wp:post:1024');
  });
});
