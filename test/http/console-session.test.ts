import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { GOVERNANCE_ID } from '../../src/graph/model.js';
import { CONSOLE_SESSION_TTL_MS, createGrant, issueLoginToken, LOGIN_LINK_TTL_MS, revokeEdge } from '../../src/service/index.js';
import { decideLeaseWrite, decideOk } from '../support/agent.js';
import { startHarness, type Harness } from '../support/harness.js';

let h: Harness;
let clock: ManualClock;

/** Exchanges a fresh login link of `principal` for a session; returns the Cookie header. */
async function signIn(principal: string): Promise<{ cookie: string }> {
  const { token } = await issueLoginToken(h.ctx, principal);
  const r = await h.call(null, { method: 'POST', url: '/v1/console/session', payload: { token } });
  expect(r.status).toBe(201);
  return { cookie: String(r.headers['set-cookie']).split(';')[0]! };
}

const get = (headers: Record<string, string>, url: string) => h.call(null, { method: 'GET', url, headers });

beforeAll(async () => {
  clock = new ManualClock(Date.UTC(2026, 5, 1, 12));
  h = await startHarness({ upstream: true, clock });
  // One receipt each for seo-agent-7 and content-agent-3.
  for (const [who, field] of [['seo-agent-7', 'title'], ['content-agent-3', 'body']] as const) {
    const { answer: w } = await decideLeaseWrite(h, who, { resource: 'wp:post:5', payload: { [field]: 'x' }, expected_version: 0 });
    expect(w.status).toBe(201);
  }
}, 60_000);
afterAll(async () => h?.close());

describe('console sign-in with a one-time link', () => {
  it('a link is exchanged once for an HttpOnly, SameSite=Strict cookie; the second use is LOGIN_LINK_SPENT and changes nothing', async () => {
    const { token } = await issueLoginToken(h.ctx, GOVERNANCE_ID);
    const first = await h.call(null, { method: 'POST', url: '/v1/console/session', payload: { token } });
    expect(first.status).toBe(201);
    expect(first.body).toMatchObject({ principal: 'governance', auditor: true });
    const setCookie = String(first.headers['set-cookie']);
    expect(setCookie).toMatch(/^writ_console=[\w.-]+; Path=\/; Max-Age=1800; HttpOnly; SameSite=Strict$/);
    expect(setCookie).not.toContain('Secure'); // plain HTTP here; over TLS the cookie is Secure
    const second = await h.call(null, { method: 'POST', url: '/v1/console/session', payload: { token } });
    expect(second.status).toBe(401);
    expect(second.body.code).toBe('LOGIN_LINK_SPENT');
    expect(second.headers['set-cookie']).toBeUndefined();
  });

  it('refuses forged, tampered, expired or foreign tokens with LOGIN_LINK_INVALID', async () => {
    const { token } = await issueLoginToken(h.ctx, GOVERNANCE_ID);
    const [head, payload, sig] = token.split('.');
    const claims = JSON.parse(Buffer.from(payload!, 'base64url').toString());
    const forged = `${head}.${Buffer.from(JSON.stringify({ ...claims, sub: 'editor-alice' })).toString('base64url')}.${sig}`;
    const d = await decideOk(h, 'seo-agent-7', { resource: 'wp:post:6', fields: ['title'] });
    for (const bad of [forged, 'not-a-token', d.token]) {
      const r = await h.call(null, { method: 'POST', url: '/v1/console/session', payload: { token: bad } });
      expect(r.status, bad.slice(0, 20)).toBe(401);
      expect(r.body.code).toBe('LOGIN_LINK_INVALID');
    }
    // A session cookie is no login link either.
    const { cookie } = await signIn(GOVERNANCE_ID);
    const asLink = await h.call(null, { method: 'POST', url: '/v1/console/session', payload: { token: cookie.split('=')[1] } });
    expect(asLink.body.code).toBe('LOGIN_LINK_INVALID');
    // Past its 10 minutes, the link is refused (and so is a session past its 30).
    const late = await issueLoginToken(h.ctx, GOVERNANCE_ID);
    clock.advance(LOGIN_LINK_TTL_MS + 1000);
    const expired = await h.call(null, { method: 'POST', url: '/v1/console/session', payload: { token: late.token } });
    expect(expired.body.code).toBe('LOGIN_LINK_INVALID');
    expect(expired.body.detail).toContain('expired');
    clock.advance(CONSOLE_SESSION_TTL_MS);
    expect((await get({ cookie }, '/v1/receipts')).body.code).toBe('UNAUTHENTICATED');
  });
});

describe('the session cookie as a credential of the public API', () => {
  it('reads (GET) and asks for impact analysis, and is refused every change with SESSION_READ_ONLY before anything is done', async () => {
    const gov = await signIn(GOVERNANCE_ID);
    expect((await get(gov, '/v1/receipts')).body.receipts).toHaveLength(2);
    expect((await get(gov, '/v1/graph')).status).toBe(200);
    const impact = await h.call(null, { method: 'POST', url: '/v1/impact', headers: gov, payload: { revoke: { edge: 'd-orch-seo' } } });
    expect(impact.status).toBe(200);
    const revision = (await h.ctx.graph.current()).revision;
    const refusals = [
      { method: 'POST' as const, url: '/v1/grants', payload: { id: 'g-x', to: 'seo-agent-7', reason: 'x', scope: { actions: ['read_post'], resources: ['wp:post:*'] } } },
      { method: 'DELETE' as const, url: '/v1/edges/d-orch-seo' },
      { method: 'POST' as const, url: '/v1/decisions', payload: { action: 'update_post', resource: 'wp:post:1', environment: 'production', fields: ['title'] } },
      { method: 'POST' as const, url: '/access/v1/evaluation', payload: {} },
      { method: 'PUT' as const, url: '/v1/receipts' },
    ];
    for (const r of refusals) {
      const res = await h.call(null, { ...r, headers: gov });
      expect(res.status, `${r.method} ${r.url}`).toBe(403);
      expect(res.body.code).toBe('SESSION_READ_ONLY');
    }
    expect((await h.ctx.graph.current()).revision).toBe(revision);
    expect((await h.ctx.graph.current()).edge('d-orch-seo')!.revoked_at).toBeNull();
  });

  it('a principal without an audit grant sees its own receipts and capabilities only', async () => {
    const seo = await signIn('seo-agent-7');
    expect((await get(seo, '/v1/console/session')).body).toMatchObject({ principal: 'seo-agent-7', auditor: false });
    const mine = await get(seo, '/v1/receipts');
    expect(mine.body.receipts.map((r: { principal: string }) => r.principal)).toEqual(['seo-agent-7']);
    const theirs = (await h.call('governance', { method: 'GET', url: '/v1/receipts?principal=content-agent-3' })).body.receipts[0].receipt_id;
    expect((await get(seo, `/v1/receipts/${theirs}`)).body.code).toBe('NOT_FOUND');
    expect((await get(seo, `/v1/receipts/${theirs}/why`)).body.code).toBe('NOT_FOUND');
    expect((await get(seo, '/v1/receipts?principal=content-agent-3')).body.code).toBe('NOT_FOUND');
    expect((await get(seo, '/v1/principals/seo-agent-7/capabilities')).status).toBe(200);
    expect((await get(seo, '/v1/principals/content-agent-3/capabilities')).body.code).toBe('FORBIDDEN');
    for (const url of ['/v1/graph', '/v1/graph/events', '/v1/graph/diff?from=1', '/v1/leases', '/v1/leases/queues', '/v1/incidents', '/v1/audit/verify']) {
      expect((await get(seo, url)).body.code, url).toBe('FORBIDDEN');
    }
    // Itself and the edges it holds, and no other's.
    expect((await get(seo, '/v1/principals/seo-agent-7')).status).toBe(200);
    expect((await get(seo, '/v1/edges/d-orch-seo')).status).toBe(200);
    expect((await get(seo, '/v1/principals/content-agent-3')).body.code).toBe('NOT_FOUND');
    expect((await get(seo, '/v1/edges/d-orch-content')).body.code).toBe('UNKNOWN_EDGE');
    // Its own delegations only: orphans and expiring edges are narrowed to it.
    expect((await get(seo, '/v1/audit/orphans')).status).toBe(200);
    expect((await get(seo, '/v1/audit/expiring?principal=editor-alice')).body.code).toBe('NOT_FOUND');
    // The same principal with a signed assertion (an agent's credential) is narrowed the same way (next test).
    expect((await h.call('seo-agent-7', { method: 'GET', url: '/v1/receipts' })).body.receipts.map((r: { principal: string }) => r.principal)).toEqual(['seo-agent-7']);
  });

  it('a signed read by a principal without an audit grant sees what its console would, and the coordination state besides', async () => {
    const seo = (url: string) => h.call('seo-agent-7', { method: 'GET', url });
    const theirs = (await h.call('governance', { method: 'GET', url: '/v1/receipts?principal=content-agent-3' })).body.receipts[0].receipt_id;
    // Before: every one of these answered 200 to any registered agent (the whole graph, another agent's receipts and chains).
    for (const url of [`/v1/receipts/${theirs}`, `/v1/receipts/${theirs}/why`, '/v1/receipts?principal=content-agent-3', '/v1/audit/expiring?principal=editor-alice']) {
      expect((await seo(url)).body.code, url).toBe('NOT_FOUND');
    }
    for (const url of ['/v1/graph', '/v1/graph/events', '/v1/graph/diff?from=1', '/v1/audit/verify']) {
      const r = await seo(url);
      expect(r.body.code, url).toBe('FORBIDDEN');
      expect(r.body.detail).toContain('audit_read on audit:principal:*');
    }
    expect((await seo('/v1/principals/content-agent-3')).body.code).toBe('NOT_FOUND');
    expect((await seo('/v1/principals/no-such-one')).body.code).toBe('NOT_FOUND'); // no telling unknown from unreadable
    expect((await seo('/v1/edges/d-orch-content')).body.code).toBe('UNKNOWN_EDGE');
    expect((await seo('/v1/principals/seo-agent-7')).status).toBe(200);
    expect((await seo('/v1/edges/d-orch-seo')).status).toBe(200); // the delegation it holds
    expect((await h.call('orchestrator', { method: 'GET', url: '/v1/edges/d-orch-content' })).status).toBe(200); // one it gave
    const mine = (await seo('/v1/receipts')).body.receipts;
    expect(mine.map((r: { principal: string }) => r.principal)).toEqual(['seo-agent-7']);
    expect((await seo(`/v1/receipts/${mine[0].receipt_id}/why`)).status).toBe(200);
    // Coordination: who holds which key, who waits, the incidents.
    for (const url of ['/v1/leases', '/v1/leases/queues', '/v1/incidents']) expect((await seo(url)).status, url).toBe(200);
    // audit_read on one principal's key lets a reader ask about that principal's receipts, and no one else's.
    await createGrant(h.ctx, GOVERNANCE_ID, { id: 'g-seo-reads-content', to: 'seo-agent-7', reason: 'reviews the content agent', scope: { actions: ['audit_read'], resources: ['audit:principal:content-agent-3'], environments: ['*'], fields: ['*'], constraints: { risk_max: 0 } } } as never);
    expect((await seo(`/v1/receipts/${theirs}`)).status).toBe(200);
    expect((await seo('/v1/receipts?principal=content-agent-3')).body.receipts).toHaveLength(1);
    expect((await seo('/v1/graph')).body.code).toBe('FORBIDDEN');
    await revokeEdge(h.ctx, GOVERNANCE_ID, 'g-seo-reads-content', 'review over');
    expect((await seo(`/v1/receipts/${theirs}`)).body.code).toBe('NOT_FOUND');
    // Governance reads everything.
    for (const url of ['/v1/graph', `/v1/receipts/${theirs}/why`, '/v1/principals/content-agent-3']) expect((await h.call('governance', { method: 'GET', url })).status, url).toBe(200);
  });

  it('audit_read on audit:principal:* makes an auditor; revoking the grant (or the principal) takes it back at the next request', async () => {
    const grant = await createGrant(h.ctx, GOVERNANCE_ID, { id: 'g-alice-audit', to: 'editor-alice', reason: 'quarterly audit', scope: { actions: ['audit_read'], resources: ['audit:principal:*'], environments: ['*'], fields: ['*'], constraints: { risk_max: 0 } } } as never);
    const alice = await signIn('editor-alice');
    expect((await get(alice, '/v1/console/session')).body.auditor).toBe(true);
    expect((await get(alice, '/v1/receipts')).body.receipts).toHaveLength(2);
    expect((await get(alice, '/v1/graph')).status).toBe(200);
    await revokeEdge(h.ctx, GOVERNANCE_ID, grant.edge.id, 'audit over');
    expect((await get(alice, '/v1/graph')).body.code).toBe('FORBIDDEN');
    expect((await get(alice, '/v1/receipts')).body.receipts).toEqual([]);
  });

  it('audit_read limited to some environments makes no auditor and reads nothing of another principal (the reads are tied to no one environment); in those environments it still asks AuthZEN', async () => {
    const theirs = (await h.call('governance', { method: 'GET', url: '/v1/receipts?principal=content-agent-3' })).body.receipts[0].receipt_id;
    const staging = (id: string, resource: string) => createGrant(h.ctx, GOVERNANCE_ID, { id, to: 'editor-alice', reason: 'audits staging', scope: { actions: ['audit_read'], resources: [resource], environments: ['staging'], fields: ['*'], constraints: { risk_max: 0 } } } as never);
    const every = await staging('g-alice-audit-staging', 'audit:principal:*');
    const one = await staging('g-alice-reads-content-staging', 'audit:principal:content-agent-3');
    const alice = (url: string) => h.call('editor-alice', { method: 'GET', url });
    try {
      // Before: an auditor that read everything everywhere (the production receipts and chains of every principal, the whole graph).
      expect((await get(await signIn('editor-alice'), '/v1/console/session')).body.auditor).toBe(false);
      for (const url of ['/v1/graph', '/v1/graph/events', '/v1/audit/verify']) expect((await alice(url)).body.code, url).toBe('FORBIDDEN');
      for (const url of [`/v1/receipts/${theirs}`, `/v1/receipts/${theirs}/why`, '/v1/receipts?principal=content-agent-3', '/v1/principals/content-agent-3', '/v1/audit/expiring?principal=content-agent-3', '/v1/audit/orphans?principal=content-agent-3']) {
        expect((await alice(url)).body.code, url).toBe('NOT_FOUND');
      }
      expect((await alice('/v1/edges/d-orch-content')).body.code).toBe('UNKNOWN_EDGE');
      expect((await alice('/v1/principals/content-agent-3/capabilities')).body.code).toBe('FORBIDDEN');
      expect((await alice('/v1/receipts')).body.receipts).toEqual([]); // its own: none
      // What the grants say they give, they still give: questions about content-agent-3 in staging, none in production.
      const ask = (environment: string) => h.call('editor-alice', {
        method: 'POST', url: '/access/v1/evaluation',
        payload: { subject: { type: 'agent', id: 'content-agent-3' }, resource: { type: 'wp:post', id: 'wp:post:5', properties: { environment, fields: ['body'] } }, action: { name: 'update_post' } },
      });
      expect((await ask('staging')).status).toBe(200);
      expect((await ask('production')).body.code).toBe('FORBIDDEN');
      // A resource search that names no environment reads the subject's authority in every one.
      const search = (properties: object) => h.call('editor-alice', {
        method: 'POST', url: '/access/v1/search/resource',
        payload: { subject: { type: 'agent', id: 'content-agent-3' }, action: { name: 'update_post' }, resource: { type: 'wp:post', properties } },
      });
      expect((await search({ environment: 'staging' })).status).toBe(200);
      expect((await search({})).body.code).toBe('FORBIDDEN');
      // Every environment: the same resources read as before.
      await createGrant(h.ctx, GOVERNANCE_ID, { id: 'g-alice-reads-content', to: 'editor-alice', reason: 'reviews the content agent', scope: { actions: ['audit_read'], resources: ['audit:principal:content-agent-3'], environments: ['*'], fields: ['*'], constraints: { risk_max: 0 } } } as never);
      for (const url of [`/v1/receipts/${theirs}`, `/v1/receipts/${theirs}/why`, '/v1/principals/content-agent-3', '/v1/principals/content-agent-3/capabilities', '/v1/edges/d-orch-content']) {
        expect((await alice(url)).status, url).toBe(200);
      }
      expect((await alice('/v1/graph')).body.code).toBe('FORBIDDEN');
      await revokeEdge(h.ctx, GOVERNANCE_ID, 'g-alice-reads-content', 'review over');
    } finally {
      for (const g of [every, one]) await revokeEdge(h.ctx, GOVERNANCE_ID, g.edge.id, 'audit over');
    }
  });

  it('signing out spends the session: the cookie is refused afterwards', async () => {
    const gov = await signIn(GOVERNANCE_ID);
    const out = await h.call(null, { method: 'DELETE', url: '/v1/console/session', headers: gov });
    expect(out.status).toBe(200);
    expect(String(out.headers['set-cookie'])).toContain('Max-Age=0');
    const after = await get(gov, '/v1/receipts');
    expect(after.status).toBe(401);
    expect(after.body.detail).toContain('signed out');
  });
});

describe('the auditor\'s reads', () => {
  it('capabilities at a time cross a revocation; the graph diff names the revoked edge; events list it', async () => {
    const gov = await signIn(GOVERNANCE_ID);
    const before = new Date(clock.now()).toISOString();
    const from = (await h.ctx.graph.current()).revision;
    clock.advance(1000);
    await revokeEdge(h.ctx, GOVERNANCE_ID, 'd-orch-content', 'content agent retired');
    const valid = (body: { capabilities: { valid: boolean; chain: { id: string }[] }[] }) => body.capabilities.filter((c) => c.valid).map((c) => c.chain.map((e) => e.id).join('>'));
    expect(valid((await get(gov, `/v1/principals/content-agent-3/capabilities?at=${encodeURIComponent(before)}`)).body)).toContain('g-orchestrator>d-orch-content');
    expect(valid((await get(gov, '/v1/principals/content-agent-3/capabilities')).body)).toEqual([]);
    const diff = (await get(gov, `/v1/graph/diff?from=${from}`)).body;
    expect(diff.revoked.map((e: { id: string }) => e.id)).toEqual(['d-orch-content']);
    expect(diff.added).toEqual([]);
    expect(diff.to.revision).toBe(from + 1);
    const events = (await get(gov, `/v1/graph/events?after=${from}`)).body;
    expect(events.events).toEqual([expect.objectContaining({ revision: from + 1, type: 'edge.revoked', subject: 'd-orch-content', from: 'orchestrator', to: 'content-agent-3', reason: 'content agent retired' })]);
    expect(events.next).toBeNull();
    // Receipts by creation time.
    const since = (await get(gov, `/v1/receipts?since=${encodeURIComponent(new Date(clock.now()).toISOString())}`)).body;
    expect(since.receipts).toEqual([]);
    expect((await get(gov, `/v1/receipts?until=${encodeURIComponent(new Date(clock.now()).toISOString())}`)).body.receipts).toHaveLength(2);
  });

  it('the console page is served from this origin under a CSP with no inline script or style and no other origin', async () => {
    const page = await h.call(null, { method: 'GET', url: '/console' });
    expect(page.status).toBe(200);
    const csp = String(page.headers['content-security-policy']);
    expect(csp).toContain("default-src 'self'");
    expect(csp).not.toMatch(/unsafe-inline|unsafe-eval|https?:|\*/);
    expect(page.raw).not.toMatch(/<script(?![^>]*\bsrc=)/); // no inline script
    expect(page.raw).not.toMatch(/\sstyle=|<style/);
    expect((await h.call(null, { method: 'GET', url: '/console/..%2F..%2Fpackage.json' })).status).toBe(404);
  });
});

describe('across processes sharing the store', () => {
  it('a link spent through one Writ is refused by another on the same store, and a session from one is honoured by the other', async () => {
    const { openWrit, exchangeLoginToken, consoleSession } = await import('../../src/service/index.js');
    const other = await openWrit(h.config, { clock });
    try {
      const { token } = await issueLoginToken(other.ctx, GOVERNANCE_ID);
      const session = await exchangeLoginToken(h.ctx, token);
      await expect(exchangeLoginToken(other.ctx, token)).rejects.toMatchObject({ code: 'LOGIN_LINK_SPENT' });
      expect((await consoleSession(other.ctx, session.token)).principal).toBe(GOVERNANCE_ID);
    } finally {
      await other.close();
    }
  });
});
