/**
 * An incident is declared for the environment of the decision that declared it, and preemption counts
 * only an incident of the lease's environment: over HTTP and over the lease stream. The security
 * review's repro: an on-call who may declare incidents only in development, with a preempts edge over
 * release-controller, must not take release-controller's production lease by declaring one.
 */
import type { InjectOptions } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { resolveIncident } from '../../src/service/index.js';
import { createCallerAssertion, generatePrincipalKeyPair, WritApiError, WritClient } from '../../src/sdk/index.js';
import { decideOk, leaseOk, snapshot } from '../support/agent.js';
import type { Harness } from '../support/harness.js';
import { closeOpened, listening, opened } from '../support/lease-stream.js';

afterEach(closeOpened);

const ONCALL = 'dev-oncall';
const KEY = 'deploy:site:www';
const deploy = (environment = 'production') => ({ action: 'deploy', resource: KEY, environment, fields: [] as string[] });

/** The reviewer's principal: declare_incident in development only, deploy in production, a preempts edge over release-controller. */
async function devOncall(h: Harness, url: string) {
  const kp = await generatePrincipalKeyPair(`${ONCALL}-k1`);
  const gov = async (path: string, payload: Record<string, unknown>) => {
    const r = await h.call('governance', { method: 'POST', url: path, payload });
    expect(r.status, r.raw).toBe(201);
  };
  await gov('/v1/principals', { id: ONCALL, kind: 'human', keys: [kp.publicJwk] });
  await gov('/v1/grants', { id: 'g-oncall-incidents', to: ONCALL, reason: 'development on-call', max_depth: 0, scope: { actions: ['declare_incident'], resources: ['incident:*'], environments: ['development'], fields: ['*'], risk_max: 3 } });
  await gov('/v1/grants', { id: 'g-oncall-deploy', to: ONCALL, reason: 'deployer', max_depth: 0, scope: { actions: ['deploy'], resources: ['deploy:**'], environments: ['production'], fields: ['*'], risk_max: 3 } });
  await gov('/v1/preemptions', { id: 'p-oncall-release', from: ONCALL, to: 'release-controller', reason: 'may preempt releases during incidents' });
  const call = async (inject: InjectOptions) => {
    const authorization = `Bearer ${await createCallerAssertion({ principal: ONCALL, privateJwk: kp.privateJwk, now: h.clock.now() })}`;
    const res = await h.app.inject({ ...inject, headers: { ...(inject.headers ?? {}), authorization } });
    return { status: res.statusCode, body: JSON.parse(res.body) as any, raw: res.body };
  };
  const decide = async (req: { action: string; resource: string; environment: string; fields: string[] }) => {
    const r = await call({ method: 'POST', url: '/v1/decisions', payload: req });
    expect(r.status, r.raw).toBe(200);
    return r.body as { allow: boolean; token: string | null };
  };
  const client = new WritClient({ baseUrl: url, principal: ONCALL, privateJwk: kp.privateJwk });
  return { call, decide, client };
}

type Oncall = Awaited<ReturnType<typeof devOncall>>;

async function declareIn(oncall: Oncall, id: string, environment: string) {
  const d = await oncall.decide({ action: 'declare_incident', resource: `incident:${id}`, environment, fields: [] });
  expect(d.allow).toBe(true);
  const r = await oncall.call({ method: 'POST', url: '/v1/incidents', payload: { id, reason: 'the dev database is slow', decision: d.token } });
  expect(r.status, r.raw).toBe(201);
  return r.body.incident;
}

/** incident-commander (declare_incident in production) declares a production incident. */
async function productionIncident(h: Harness, id: string) {
  const d = await decideOk(h, 'incident-commander', { action: 'declare_incident', resource: `incident:${id}`, fields: [] });
  const r = await h.call('incident-commander', { method: 'POST', url: '/v1/incidents', payload: { id, reason: 'checkout is down', decision: d.token } });
  expect(r.status, r.raw).toBe(201);
  expect(r.body.incident.environment).toBe('production');
}

async function releaseHeld(h: Harness) {
  return leaseOk(h, 'release-controller', [(await decideOk(h, 'release-controller', deploy())).token], { ttl_ms: 60_000 });
}

async function renews(h: Harness, held: { lease_id: string; token: string }) {
  return h.call('release-controller', { method: 'POST', url: `/v1/leases/${held.lease_id}/renew`, payload: { token: held.token, ttl_ms: 60_000 } });
}

describe('an incident is scoped to the environment it was declared for (HTTP)', () => {
  it('a development incident does not let its declarer take over a production lease; a production incident does', async () => {
    const { h, url } = await listening({ upstream: true });
    const oncall = await devOncall(h, url);
    const held = await releaseHeld(h);
    const n = held.epochs[KEY]!;

    expect((await oncall.decide({ action: 'declare_incident', resource: 'incident:dev-db-slow', environment: 'production', fields: [] })).allow).toBe(false);
    const incident = await declareIn(oncall, 'dev-db-slow', 'development');
    expect(incident).toMatchObject({ id: 'dev-db-slow', declared_by: ONCALL, environment: 'development' });
    const listed = await oncall.call({ method: 'GET', url: '/v1/incidents' });
    expect(listed.body.incidents.map((i: any) => [i.id, i.environment])).toEqual([['dev-db-slow', 'development']]);

    const before = await snapshot(h);
    const prod = await oncall.decide(deploy());
    const refused = await oncall.call({ method: 'POST', url: '/v1/leases', payload: { decisions: [prod.token], ttl_ms: 5_000, preempt: true } });
    expect(refused.status, refused.raw).toBe(403);
    expect(refused.body).toMatchObject({ code: 'NO_INCIDENT', environments: ['production'] });
    expect(await snapshot(h)).toEqual(before);
    // The holder keeps its lease, at its epoch.
    const renewed = await renews(h, held);
    expect(renewed.status, renewed.raw).toBe(200);
    expect(renewed.body.epochs).toEqual({ [KEY]: n });

    await productionIncident(h, 'checkout-down');
    const taken = await oncall.call({ method: 'POST', url: '/v1/leases', payload: { decisions: [(await oncall.decide(deploy())).token], ttl_ms: 5_000, preempt: true } });
    expect(taken.status, taken.raw).toBe(201);
    expect(taken.body.epochs).toEqual({ [KEY]: n + 1 });
    expect(taken.body.preempted).toEqual([{ lease_id: held.lease_id, holder: 'release-controller', key: KEY, epoch: n }]);
    expect((await renews(h, held)).body.code).toBe('LEASE_PREEMPTED');
  });

  it('the lease taken over must be in an incident\'s environment too: a production incident does not open a key held with a staging decision', async () => {
    const { h } = await listening({ upstream: true });
    const g = await h.call('governance', { method: 'POST', url: '/v1/grants', payload: { id: 'g-release-staging', to: 'release-controller', reason: 'staging releases', max_depth: 0, scope: { actions: ['deploy'], resources: ['deploy:**'], environments: ['staging'], fields: ['*'], risk_max: 3 } } });
    expect(g.status, g.raw).toBe(201);
    // Coordination keys are not per environment: the staging release holds the same key a production deploy needs.
    const held = await leaseOk(h, 'release-controller', [(await decideOk(h, 'release-controller', deploy('staging'))).token], { ttl_ms: 60_000 });
    await productionIncident(h, 'checkout-down');
    const before = await snapshot(h);
    const r = await h.call('incident-commander', { method: 'POST', url: '/v1/leases', payload: { decisions: [(await decideOk(h, 'incident-commander', deploy())).token], ttl_ms: 5_000, preempt: true } });
    expect(r.status, r.raw).toBe(403);
    expect(r.body).toMatchObject({ code: 'NO_INCIDENT', environments: ['staging'] });
    expect(await snapshot(h)).toEqual(before);
    expect((await renews(h, held)).status).toBe(200);
  });

  it('an incident resolved between the check and the takeover preempts nothing', async () => {
    const { h } = await listening({ upstream: true });
    const held = await releaseHeld(h);
    await productionIncident(h, 'checkout-down');
    const cd = await decideOk(h, 'incident-commander', deploy());
    // The resolve lands after the acquisition counted the incident, before it takes the key over.
    const describe = h.ctx.leases.describe.bind(h.ctx.leases);
    let resolved = false;
    h.ctx.leases.describe = async (key: string) => {
      if (!resolved) {
        resolved = true;
        await resolveIncident(h.ctx, 'incident-commander', 'checkout-down');
      }
      return describe(key);
    };
    const before = await snapshot(h);
    const r = await h.call('incident-commander', { method: 'POST', url: '/v1/leases', payload: { decisions: [cd.token], ttl_ms: 5_000, preempt: true } });
    expect(resolved).toBe(true);
    expect(r.status, r.raw).toBe(403);
    expect(r.body).toMatchObject({ code: 'NO_INCIDENT', environments: ['production'] });
    expect(await snapshot(h)).toEqual(before);
    expect((await renews(h, held)).body.epochs).toEqual(held.epochs);
  });
});

describe('what is really taken over is checked in the takeover\'s transaction', () => {
  it('a lease that ends after the check, its key taken again with a staging decision, is not taken over by a production incident', async () => {
    const { h } = await listening({ upstream: true });
    const g = await h.call('governance', { method: 'POST', url: '/v1/grants', payload: { id: 'g-release-staging', to: 'release-controller', reason: 'staging releases', max_depth: 0, scope: { actions: ['deploy'], resources: ['deploy:**'], environments: ['staging'], fields: ['*'], risk_max: 3 } } });
    expect(g.status, g.raw).toBe(201);
    const first = await releaseHeld(h);
    await productionIncident(h, 'checkout-down');
    const cd = await decideOk(h, 'incident-commander', deploy());
    // The check sees the production lease; before the takeover commits, its holder lets it go and takes
    // the key again for staging (the review's scenario: the first check alone would take the staging lease).
    const describe = h.ctx.leases.describe.bind(h.ctx.leases);
    let again: Awaited<ReturnType<typeof leaseOk>> | undefined;
    h.ctx.leases.describe = async (key: string) => {
      const seen = await describe(key);
      if (!again) {
        const released = await h.call('release-controller', { method: 'DELETE', url: `/v1/leases/${first.lease_id}`, payload: { token: first.token } });
        expect(released.status, released.raw).toBe(200);
        again = await leaseOk(h, 'release-controller', [(await decideOk(h, 'release-controller', deploy('staging'))).token], { ttl_ms: 60_000 });
      }
      return seen;
    };
    const r = await h.call('incident-commander', { method: 'POST', url: '/v1/leases', payload: { decisions: [cd.token], ttl_ms: 5_000, preempt: true } });
    h.ctx.leases.describe = describe;
    expect(again).toBeDefined();
    expect(r.status, r.raw).toBe(403);
    expect(r.body).toMatchObject({ code: 'NO_INCIDENT', environments: ['staging'] });
    // The staging holder keeps its lease, at its epoch.
    const renewed = await renews(h, again!);
    expect(renewed.status, renewed.raw).toBe(200);
    expect(renewed.body.epochs).toEqual(again!.epochs);
  });
});

describe('incidents declared before environments were recorded (environment null)', () => {
  /** A row as the Writ before SQLite migration 13 wrote it. */
  function legacyIncident(h: Harness, id: string, declaredBy: string) {
    const now = h.clock.now();
    h.db.prepare('INSERT INTO incidents (id, declared_by, reason, decision_id, declared_at, ends_at) VALUES (?, ?, ?, ?, ?, ?)').run(id, declaredBy, 'declared before the upgrade', `dec-${id}`, now - 60_000, now + 3_600_000);
  }

  it('count in an environment only while their declarer may declare them there', async () => {
    const { h, url } = await listening({ upstream: true });
    const oncall = await devOncall(h, url);
    const held = await releaseHeld(h);
    legacyIncident(h, 'old-dev', ONCALL);
    expect((await oncall.call({ method: 'GET', url: '/v1/incidents' })).body.incidents).toMatchObject([{ id: 'old-dev', environment: null }]);

    const before = await snapshot(h);
    const refused = await oncall.call({ method: 'POST', url: '/v1/leases', payload: { decisions: [(await oncall.decide(deploy())).token], ttl_ms: 5_000, preempt: true } });
    expect(refused.body).toMatchObject({ code: 'NO_INCIDENT', environments: ['production'] });
    expect(await snapshot(h)).toEqual(before);

    // The commander's incident, declared before the upgrade, keeps working in production: it may declare there.
    legacyIncident(h, 'old-prod', 'incident-commander');
    const taken = await oncall.call({ method: 'POST', url: '/v1/leases', payload: { decisions: [(await oncall.decide(deploy())).token], ttl_ms: 5_000, preempt: true } });
    expect(taken.status, taken.raw).toBe(201);
    expect(taken.body.epochs).toEqual({ [KEY]: held.epochs[KEY]! + 1 });
  });
});

describe('an incident is scoped to the environment it was declared for (lease stream)', () => {
  it('a development incident does not let a stream take over a production lease; a production incident does', async () => {
    const { h, url } = await listening({ upstream: true });
    const oncall = await devOncall(h, url);
    const held = await releaseHeld(h);
    const n = held.epochs[KEY]!;
    await declareIn(oncall, 'dev-db-slow', 'development');
    const stream = await oncall.client.openLeaseStream();
    opened.push(stream);

    const before = await snapshot(h);
    const refused = await stream.acquire([(await oncall.decide(deploy())).token!], { ttlMs: 5_000, preempt: true }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(WritApiError);
    expect(refused).toMatchObject({ code: 'NO_INCIDENT', status: 403 });
    expect(await snapshot(h)).toEqual(before);
    expect((await renews(h, held)).body.epochs).toEqual({ [KEY]: n });

    await productionIncident(h, 'checkout-down');
    const taken = await stream.acquire([(await oncall.decide(deploy())).token!], { ttlMs: 5_000, preempt: true });
    expect(taken.epochs).toEqual({ [KEY]: n + 1 });
    expect(taken.preempted).toEqual([{ lease_id: held.lease_id, holder: 'release-controller', key: KEY, epoch: n }]);
    expect((await renews(h, held)).body.code).toBe('LEASE_PREEMPTED');
  });
});
