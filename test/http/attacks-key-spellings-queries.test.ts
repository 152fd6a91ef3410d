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

  // A query spelt otherwise than keys are recorded (under an alias, not NFC, a host in capitals) would match
  // nothing and answer "no writes": it is refused naming the spelling to ask for (checkQuerySpelling), which
  // checks the spelling only, not a resource class (receipts outlive the policy that governed them).
  it('a query under the alias of a written key is refused naming the canonical key, not answered empty', async () => {
    const r = await receiptsOf('wordpress:article:1024');
    expect(r.status, r.raw).toBe(422);
    expect(r.body.detail).toContain('wp:post:1024');
  });

  it('a query in NFD, or with a host in capitals, is refused naming the spelling to ask for; leases too', async () => {
    const nfd = await receiptsOf('wp:post:cafe\u0301');
    expect([nfd.status, nfd.body.code]).toEqual([422, 'UNPROCESSABLE']);
    expect(nfd.body.detail).toContain('NFC');
    const host = await h.call(GOVERNANCE_ID, { method: 'GET', url: `/v1/receipts?resource=${encodeURIComponent('site:EXAMPLE.COM:template:canonical')}` });
    expect([host.status, host.body.detail]).toEqual([422, expect.stringContaining('site:example.com:template:canonical')]);
    const leases = await h.call(GOVERNANCE_ID, { method: 'GET', url: `/v1/leases?resource=${encodeURIComponent('wordpress:article:1024#title')}` });
    expect([leases.status, leases.body.detail]).toEqual([422, expect.stringContaining('wp:post:1024#title')]);
    // A key no class governs any more is still asked for as written (receipts outlive their policy).
    expect((await receiptsOf('gone:thing:1')).status).toBe(200);
  });
});
