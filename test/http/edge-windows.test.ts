import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { startHarness, type Harness } from '../support/harness.js';

const T0 = Date.UTC(2026, 5, 1, 12, 0, 0);
let h: Harness;
let clock: ManualClock;
beforeEach(async () => {
  clock = new ManualClock(T0);
  h = await startHarness({ clock });
  // A time-boxed delegation: live on [T0 + 1h, T0 + 2h).
  const r = await h.call('orchestrator', {
    method: 'POST', url: '/v1/delegations',
    payload: {
      id: 'd-window', from: 'orchestrator', to: 'publisher', reason: 'one-hour window', max_depth: 0,
      not_before: new Date(T0 + 3_600_000).toISOString(), expires_at: new Date(T0 + 7_200_000).toISOString(),
      scope: { actions: ['update_post'], resources: ['wp:post:*'], environments: ['production'], fields: ['title'], risk_max: 1 },
    },
  });
  expect(r.status).toBe(201);
});
afterEach(async () => h?.close());

const ask = () => h.call('publisher', { method: 'POST', url: '/v1/decisions', payload: { action: 'update_post', resource: 'wp:post:9', environment: 'production', fields: ['title'] } });

describe('expired and not-yet-valid edges deny', () => {
  it('one millisecond before not_before: denied as not yet valid', async () => {
    clock.set(T0 + 3_600_000 - 1);
    const r = await ask();
    expect(r.body.allow).toBe(false);
    expect(r.body.reasons.join('\n')).toMatch(/d-window.*not valid before/);
  });
  it('exactly at not_before: allowed', async () => {
    clock.set(T0 + 3_600_000);
    expect((await ask()).body.allow).toBe(true);
  });
  it('one millisecond before expires_at: allowed', async () => {
    clock.set(T0 + 7_200_000 - 1);
    expect((await ask()).body.allow).toBe(true);
  });
  it('exactly at expires_at: denied as expired', async () => {
    clock.set(T0 + 7_200_000);
    const r = await ask();
    expect(r.body.allow).toBe(false);
    expect(r.body.reasons.join('\n')).toMatch(/d-window.*expired/);
  });
  it('decision tokens expire with the configured short TTL (30 s)', async () => {
    clock.set(T0 + 3_600_000);
    const r = await ask();
    expect(Date.parse(r.body.expires_at) - Date.parse(r.body.issued_at)).toBe(30_000);
  });
});

describe('an edge\'s times are instants RFC 3339 can name', () => {
  const body = (window: Record<string, unknown>) => ({
    id: 'd-far', from: 'orchestrator', to: 'publisher', reason: 'far', max_depth: 0, ...window,
    scope: { actions: ['update_post'], resources: ['wp:post:*'], environments: ['production'], fields: ['title'], risk_max: 1 },
  });
  // 1e20 ms was taken before and stored: every later read of the graph (GET /v1/graph, the edge, its revocation) failed with 500.
  it.each([
    [{ expires_at: 1e20 }, /^expires_at is outside the years 0000–9999: 100000000000000000000$/],
    [{ expires_at: Date.parse('9999-12-31T23:59:59.999Z') + 1 }, /^expires_at is outside the years 0000–9999/],
    [{ not_before: '+275760-09-13T00:00:00.000Z' }, /^not_before is not an RFC 3339 time/],
    [{ not_before: -62_167_219_200_001 }, /^not_before is outside the years 0000–9999/],
  ])('%j is UNPROCESSABLE, nothing is written, and the graph still reads', async (window, detail) => {
    const before = await h.call('governance', { method: 'GET', url: '/v1/graph' });
    const r = await h.call('orchestrator', { method: 'POST', url: '/v1/delegations', payload: body(window) });
    expect(r.status, JSON.stringify(r.body)).toBe(422);
    expect(r.body).toMatchObject({ code: 'UNPROCESSABLE', detail: expect.stringMatching(detail) });
    const after = await h.call('governance', { method: 'GET', url: '/v1/graph' });
    expect(after.status).toBe(200);
    expect(after.body.revision).toBe(before.body.revision);
    expect((await h.call('governance', { method: 'GET', url: '/v1/edges/d-far' })).status).toBe(404);
  });
  // Date.parse alone rolled these over or read them in the server's zone: a delegation two days longer,
  // or one live at once in 1970 when its not_before was given in seconds.
  it.each([
    [{ expires_at: '2027-02-30T00:00:00Z' }, /^expires_at is not an RFC 3339 time \(such as 2027-01-31T09:00:00Z\): "2027-02-30T00:00:00Z"$/],
    [{ expires_at: '2027-01-01T24:00:00Z' }, /^expires_at is not an RFC 3339 time/],
    [{ expires_at: '2027-01-01T00:00:00' }, /^expires_at is not an RFC 3339 time/],
    [{ expires_at: '1 January 2027' }, /^expires_at is not an RFC 3339 time/],
    [{ expires_at: '2016-12-31T23:59:60Z' }, /^expires_at is not an RFC 3339 time/],
    [{ expires_at: '2027-01-01T00:00:00+24:00' }, /^expires_at is not an RFC 3339 time/],
    [{ not_before: Math.floor((T0 + 3_600_000) / 1000) }, /^not_before 1780318800 would be 1970-01-21T14:31:58\.800Z: a time given as a number is milliseconds since the epoch, not seconds \(or give an RFC 3339 string\)$/],
    [{ expires_at: Math.floor((T0 + 3_600_000) / 1000) }, /^expires_at 1780318800 would be 1970-01-21T.+: a time given as a number is milliseconds/],
  ])('%j is UNPROCESSABLE and nothing is written', async (window, detail) => {
    const r = await h.call('orchestrator', { method: 'POST', url: '/v1/delegations', payload: body(window) });
    expect(r.status, JSON.stringify(r.body)).toBe(422);
    expect(r.body).toMatchObject({ code: 'UNPROCESSABLE', detail: expect.stringMatching(detail) });
    expect((await h.call('governance', { method: 'GET', url: '/v1/edges/d-far' })).status).toBe(404);
  });
  it('a leap day, a date alone and an offset are RFC 3339, and taken', async () => {
    const r = await h.call('orchestrator', { method: 'POST', url: '/v1/delegations', payload: body({ not_before: '2028-02-29', expires_at: '2028-03-01T01:30:00+02:00' }) });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    expect(r.body.edge).toMatchObject({ not_before: '2028-02-29T00:00:00.000Z', expires_at: '2028-02-29T23:30:00.000Z' });
  });
  it('the last instant of 9999 is taken, and answered as RFC 3339', async () => {
    const r = await h.call('orchestrator', { method: 'POST', url: '/v1/delegations', payload: body({ expires_at: Date.parse('9999-12-31T23:59:59.999Z') }) });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    expect(r.body.edge.expires_at).toBe('9999-12-31T23:59:59.999Z');
    expect((await h.call('governance', { method: 'GET', url: '/v1/graph' })).status).toBe(200);
  });
});

describe('a new edge that has ended already is refused: it would never count', () => {
  const body = (window: Record<string, unknown>) => ({
    id: 'd-over', from: 'orchestrator', to: 'publisher', reason: 'over before it starts', max_depth: 0, ...window,
    scope: { actions: ['update_post'], resources: ['wp:post:*'], environments: ['production'], fields: ['title'], risk_max: 1 },
  });
  it.each([
    ['now itself', T0, /^expires_at 2026-06-01T12:00:00.000Z is not after now \(2026-06-01T12:00:00.000Z\): the edge would never count$/],
    ['a minute ago', new Date(T0 - 60_000).toISOString(), /is not after now .*would never count$/],
  ])('%s: UNPROCESSABLE, and nothing is written', async (_label, expires_at, detail) => {
    const before = await h.call('governance', { method: 'GET', url: '/v1/graph' });
    const r = await h.call('orchestrator', { method: 'POST', url: '/v1/delegations', payload: body({ expires_at }) });
    expect(r.status, JSON.stringify(r.body)).toBe(422);
    expect(r.body).toMatchObject({ code: 'UNPROCESSABLE', detail: expect.stringMatching(detail) });
    expect((await h.call('governance', { method: 'GET', url: '/v1/graph' })).body.revision).toBe(before.body.revision);
    expect((await h.call('governance', { method: 'GET', url: '/v1/edges/d-over' })).status).toBe(404);
  });
  it('one millisecond after now is taken; a retry by id after it ended answers the edge made before', async () => {
    const b = body({ expires_at: T0 + 1 });
    expect((await h.call('orchestrator', { method: 'POST', url: '/v1/delegations', payload: b })).status).toBe(201);
    clock.set(T0 + 5);
    const again = await h.call('orchestrator', { method: 'POST', url: '/v1/delegations', payload: b });
    expect(again.status, JSON.stringify(again.body)).toBe(200);
    expect(again.body).toMatchObject({ created: false, edge: { id: 'd-over' } });
  });
  it('impact analysis of such a delegation is refused the same way', async () => {
    const r = await h.call('orchestrator', { method: 'POST', url: '/v1/impact', payload: { delegate: body({ expires_at: T0 - 1 }) } });
    expect(r.status, JSON.stringify(r.body)).toBe(422);
    expect(r.body.detail).toMatch(/would never count/);
  });
});

describe('reasons auditors read are not blank', () => {
  it.each([
    ['a delegation', 'orchestrator', { method: 'POST', url: '/v1/delegations', payload: { from: 'orchestrator', to: 'publisher', reason: ' \t\n', scope: { actions: ['update_post'], resources: ['wp:post:*'], environments: ['production'], fields: ['title'], risk_max: 1 } } }, /^every edge needs a reason that is not blank/],
    ['an edge revocation (body)', 'governance', { method: 'DELETE', url: '/v1/edges/d-window', payload: { reason: '   ' } }, /^a revocation needs a reason that is not blank/],
    ['an edge revocation (query)', 'governance', { method: 'DELETE', url: '/v1/edges/d-window?reason=%20%20' }, /^a revocation needs a reason that is not blank/],
    ['a principal revocation', 'governance', { method: 'DELETE', url: '/v1/principals/publisher', payload: { reason: '\u00a0' } }, /^a revocation needs a reason that is not blank/],
  ] as const)('%s: UNPROCESSABLE, and nothing changes', async (_label, caller, req, detail) => {
    const before = await h.call('governance', { method: 'GET', url: '/v1/graph' });
    const r = await h.call(caller, req as never);
    expect(r.status, JSON.stringify(r.body)).toBe(422);
    expect(r.body).toMatchObject({ code: 'UNPROCESSABLE', detail: expect.stringMatching(detail) });
    expect((await h.call('governance', { method: 'GET', url: '/v1/graph' })).body.revision).toBe(before.body.revision);
  });
});

describe('a revoked edge is not made again by a retry', () => {
  it('the same request after the revocation is 409 ALREADY_EXISTS with {edge_id}, and nothing changes', async () => {
    const payload = {
      id: 'd-again', from: 'orchestrator', to: 'publisher', reason: 'then revoked', max_depth: 0, expires_at: new Date(T0 + 7_200_000).toISOString(),
      scope: { actions: ['update_post'], resources: ['wp:post:*'], environments: ['production'], fields: ['title'], risk_max: 1 },
    };
    expect((await h.call('orchestrator', { method: 'POST', url: '/v1/delegations', payload })).status).toBe(201);
    expect((await h.call('orchestrator', { method: 'POST', url: '/v1/delegations', payload })).status).toBe(200);
    expect((await h.call('orchestrator', { method: 'DELETE', url: '/v1/edges/d-again', payload: { reason: 'done' } })).status).toBe(200);
    const before = await h.call('governance', { method: 'GET', url: '/v1/graph' });
    const r = await h.call('orchestrator', { method: 'POST', url: '/v1/delegations', payload });
    expect(r.status, JSON.stringify(r.body)).toBe(409);
    expect(r.body).toMatchObject({ code: 'ALREADY_EXISTS', edge_id: 'd-again', detail: expect.stringMatching(/^edge d-again was revoked at 2026-06-01T12:00:00.000Z: a revoked edge stays revoked; make a new one under a new id$/) });
    expect((await h.call('governance', { method: 'GET', url: '/v1/graph' })).body.revision).toBe(before.body.revision);
  });
});
