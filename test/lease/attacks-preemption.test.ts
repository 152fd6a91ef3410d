/**
 * Preemption and incidents tried as an attacker would: preempting on an incident whose declarer has since
 * been revoked, or with a preempt flag on keys nobody holds.
 */
import type { InjectOptions } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { createCallerAssertion, generatePrincipalKeyPair } from '../../src/sdk/index.js';
import { decideOk, leaseOk, snapshot } from '../support/agent.js';
import { startHarness, type Harness } from '../support/harness.js';

let h: Harness | undefined;
afterEach(async () => h?.close());

const KEY = 'deploy:site:www';
const ONCALL = 'oncall-2';

/** A deployer in production with a preempts edge over release-controller, who may not declare incidents. */
async function deployerWhoPreempts(harness: Harness) {
  const kp = await generatePrincipalKeyPair(`${ONCALL}-k1`);
  const gov = async (path: string, payload: Record<string, unknown>) => {
    const r = await harness.call('governance', { method: 'POST', url: path, payload });
    expect(r.status, r.raw).toBe(201);
  };
  await gov('/v1/principals', { id: ONCALL, kind: 'human', keys: [kp.publicJwk] });
  await gov('/v1/grants', { id: 'g-oncall2-deploy', to: ONCALL, reason: 'deployer', max_depth: 0, scope: { actions: ['deploy'], resources: ['deploy:**'], environments: ['production'], fields: ['*'], risk_max: 3 } });
  await gov('/v1/preemptions', { id: 'p-oncall2-release', from: ONCALL, to: 'release-controller', reason: 'may preempt releases during incidents' });
  return async (inject: InjectOptions) => {
    const authorization = `Bearer ${await createCallerAssertion({ principal: ONCALL, privateJwk: kp.privateJwk, now: harness.clock.now() })}`;
    const res = await harness.app.inject({ ...inject, headers: { ...(inject.headers ?? {}), authorization } });
    return { status: res.statusCode, body: JSON.parse(res.body) as any, raw: res.body };
  };
}

async function declareProductionIncident(harness: Harness, id: string) {
  const d = await decideOk(harness, 'incident-commander', { action: 'declare_incident', resource: `incident:${id}`, fields: [] });
  const r = await harness.call('incident-commander', { method: 'POST', url: '/v1/incidents', payload: { id, reason: 'checkout is down', decision: d.token } });
  expect(r.status, r.raw).toBe(201);
}

async function preemptAs(call: Awaited<ReturnType<typeof deployerWhoPreempts>>) {
  const d = await call({ method: 'POST', url: '/v1/decisions', payload: { action: 'deploy', resource: KEY, environment: 'production', fields: [] } });
  expect(d.body.allow, d.raw).toBe(true);
  return call({ method: 'POST', url: '/v1/leases', payload: { decisions: [d.body.token], ttl_ms: 10_000, preempt: true } });
}

describe('preemption on an incident', () => {
  it('a takeover of the whole resource takes over a lease of one of its fields (src/wire/key-family.ts); over a field holder it has no preempts edge over, FORBIDDEN and nothing changes', async () => {
    h = await startHarness({ example: true, upstream: true });
    const call = await deployerWhoPreempts(h);
    const field = await leaseOk(h, 'release-controller', [(await decideOk(h, 'release-controller', { action: 'deploy', resource: KEY, fields: ['config'] })).token]);
    await declareProductionIncident(h, 'inc-family');
    const r = await preemptAs(call);
    expect(r.status, r.raw).toBe(201);
    expect(r.body.preempted).toMatchObject([{ lease_id: field.lease_id, holder: 'release-controller', key: `${KEY}#config` }]);
    expect((await h.call('release-controller', { method: 'POST', url: `/v1/leases/${field.lease_id}/renew`, payload: { token: field.token, ttl_ms: 10_000 } })).body.code).toBe('LEASE_PREEMPTED');
    // A field held by someone the deployer may not preempt: the whole resource is not taken from them.
    const mine = r.body;
    await call({ method: 'DELETE', url: `/v1/leases/${mine.lease_id}`, payload: { token: mine.token } });
    await leaseOk(h, 'incident-commander', [(await decideOk(h, 'incident-commander', { action: 'deploy', resource: KEY, fields: ['env'] })).token]);
    const before = await snapshot(h);
    const refused = await preemptAs(call);
    expect(refused.status, refused.raw).toBe(403);
    expect(refused.body).toMatchObject({ code: 'FORBIDDEN', detail: expect.stringContaining(`incident-commander, who holds ${KEY}#env`) });
    expect(await snapshot(h)).toEqual(before);
  });

  it('holds: without any incident a preempts edge takes nothing (NO_INCIDENT) and nothing changes', async () => {
    h = await startHarness({ example: true, upstream: true });
    const call = await deployerWhoPreempts(h);
    await leaseOk(h, 'release-controller', [(await decideOk(h, 'release-controller', { action: 'deploy', resource: KEY, fields: [] })).token]);
    const before = await snapshot(h);
    const r = await preemptAs(call);
    expect(r.status, r.raw).toBe(403);
    expect(r.body.code).toBe('NO_INCIDENT');
    expect(await snapshot(h)).toEqual(before);
  });

  it('holds: an incident resolved by governance preempts nothing any more', async () => {
    h = await startHarness({ example: true, upstream: true });
    const call = await deployerWhoPreempts(h);
    await leaseOk(h, 'release-controller', [(await decideOk(h, 'release-controller', { action: 'deploy', resource: KEY, fields: [] })).token]);
    await declareProductionIncident(h, 'inc-r');
    expect((await h.call('governance', { method: 'DELETE', url: '/v1/incidents/inc-r' })).status).toBe(200);
    const before = await snapshot(h);
    expect((await preemptAs(call)).body.code).toBe('NO_INCIDENT');
    expect(await snapshot(h)).toEqual(before);
  });

  // An incident counts only while its declarer is a principal not revoked (declarerStands): revoking a
  // principal says it can no longer be trusted, and an incident it declared may have been a pretext.
  // Revoking its grant (a commander's shift ended) leaves the incident standing: see the next test.
  it('an incident whose declarer was revoked since lets no one preempt', async () => {
    h = await startHarness({ example: true, upstream: true });
    const call = await deployerWhoPreempts(h);
    await leaseOk(h, 'release-controller', [(await decideOk(h, 'release-controller', { action: 'deploy', resource: KEY, fields: [] })).token]);
    await declareProductionIncident(h, 'inc-pretext');
    const revoked = await h.call('governance', { method: 'DELETE', url: '/v1/principals/incident-commander', payload: { reason: 'key compromised' } });
    expect(revoked.status, revoked.raw).toBe(200);
    const r = await preemptAs(call);
    expect(r.body.code, r.raw).toBe('NO_INCIDENT');
  });

  it('the active incidents listed are those that let preemption happen: not one whose declarer was revoked, which governance can still resolve', async () => {
    h = await startHarness({ example: true, upstream: true });
    await declareProductionIncident(h, 'inc-listed');
    const listed = async () => (await h!.call('governance', { method: 'GET', url: '/v1/incidents' })).body.incidents.map((i: { id: string }) => i.id);
    expect(await listed()).toEqual(['inc-listed']);
    const revoked = await h.call('governance', { method: 'DELETE', url: '/v1/principals/incident-commander', payload: { reason: 'key compromised' } });
    expect(revoked.status, revoked.raw).toBe(200);
    expect(await listed()).toEqual([]);
    const resolved = await h.call('governance', { method: 'DELETE', url: '/v1/incidents/inc-listed' });
    expect(resolved.status, resolved.raw).toBe(200);
  });

  it('holds: a revoked declarer cannot be registered again under its id to bring its incident back', async () => {
    h = await startHarness({ example: true, upstream: true });
    const call = await deployerWhoPreempts(h);
    await leaseOk(h, 'release-controller', [(await decideOk(h, 'release-controller', { action: 'deploy', resource: KEY, fields: [] })).token]);
    await declareProductionIncident(h, 'inc-again');
    expect((await h.call('governance', { method: 'DELETE', url: '/v1/principals/incident-commander', payload: { reason: 'key compromised' } })).status).toBe(200);
    const kp = await generatePrincipalKeyPair('incident-commander-k9');
    const again = await h.call('governance', { method: 'POST', url: '/v1/principals', payload: { id: 'incident-commander', kind: 'human', keys: [kp.publicJwk] } });
    expect(again.body.code, again.raw).toBe('ALREADY_EXISTS');
    expect((await preemptAs(call)).body.code).toBe('NO_INCIDENT');
  });

  it('an incident whose declarer\'s grant was revoked (its shift ended) still lets preemption happen', async () => {
    h = await startHarness({ example: true, upstream: true });
    const call = await deployerWhoPreempts(h);
    await leaseOk(h, 'release-controller', [(await decideOk(h, 'release-controller', { action: 'deploy', resource: KEY, fields: [] })).token]);
    await declareProductionIncident(h, 'inc-shift');
    const revoked = await h.call('governance', { method: 'DELETE', url: '/v1/edges/g-incident-commander', payload: { reason: 'end of shift' } });
    expect(revoked.status, revoked.raw).toBe(200);
    const r = await preemptAs(call);
    expect(r.status, r.raw).toBe(201);
    expect(r.body.preempted.map((p: { holder: string }) => p.holder)).toContain('release-controller');
  });
});
