import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from '../support/harness.js';

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => h?.close());

describe('operations endpoints', () => {
  it('healthz and readyz answer without credentials', async () => {
    expect((await h.call(null, { method: 'GET', url: '/healthz' })).status).toBe(200);
    const ready = await h.call(null, { method: 'GET', url: '/readyz' });
    expect(ready.status).toBe(200);
    expect(ready.body.graph_revision).toBeGreaterThan(0);
    expect(ready.body.policy_revision).toMatch(/^sha256:/);
  });

  it('metrics count decisions by result and expose the latency histogram', async () => {
    await h.call('seo-agent-7', { method: 'POST', url: '/v1/decisions', payload: { action: 'update_post', resource: 'wp:post:1', environment: 'production', fields: ['title'] } });
    await h.call('seo-agent-7', { method: 'POST', url: '/v1/decisions', payload: { action: 'update_post', resource: 'wp:post:1', environment: 'production', fields: ['body'] } });
    const m = await h.call(null, { method: 'GET', url: '/metrics' });
    expect(m.raw).toMatch(/writ_decisions_total\{result="allow"\} 1/);
    expect(m.raw).toMatch(/writ_decisions_total\{result="deny"\} 1/);
    expect(m.raw).toMatch(/writ_decision_duration_seconds_bucket/);
  });

  it('serves the JWKS and an OpenAPI document that lists the v1 routes', async () => {
    const jwks = await h.call(null, { method: 'GET', url: '/.well-known/jwks.json' });
    expect(jwks.body.keys[0]).toMatchObject({ kty: 'OKP', crv: 'Ed25519', alg: 'EdDSA' });
    expect(jwks.body.keys[0].d).toBeUndefined();
    const api = await h.call(null, { method: 'GET', url: '/openapi.json' });
    expect(api.status).toBe(200);
    for (const path of ['/v1/decisions', '/v1/delegations', '/v1/leases', '/v1/actions', '/v1/receipts/{id}', '/v1/audit/verify', '/v1/graph']) {
      expect(Object.keys(api.body.paths)).toContain(path);
    }
  });

  it('decision tokens verify against the served JWKS', async () => {
    const { verifyDecision } = await import('../../src/decision/index.js');
    const d = await h.call('seo-agent-7', { method: 'POST', url: '/v1/decisions', payload: { action: 'update_post', resource: 'wp:post:1', environment: 'production', fields: ['title'] } });
    const jwks = await h.call(null, { method: 'GET', url: '/.well-known/jwks.json' });
    const claims = await verifyDecision(d.body.token, { keys: jwks.body, audience: 'writ-gateway', now: h.clock.now() });
    expect(claims).toMatchObject({ principal: 'seo-agent-7', resource: 'wp:post:1', fields: ['title'], chain: ['g-orchestrator', 'd-orch-seo'] });
  });
});
