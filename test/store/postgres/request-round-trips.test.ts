import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/config/index.js';
import { UpstreamRouter } from '../../../src/gateway/index.js';
import { GOVERNANCE_ID } from '../../../src/graph/model.js';
import { buildApp } from '../../../src/http/index.js';
import { createCallerAssertion } from '../../../src/sdk/assertion.js';
import { applyManifest, openWrit, readAdminCredential, readManifest, type OpenedWrit } from '../../../src/service/index.js';
import type { PostgresStore } from '../../../src/store/postgres/index.js';
import { startSampleUpstream } from '../../../src/upstream/index.js';
import { BUNDLE_DIR, EXAMPLE_GRAPH, REPO, fixtureKey } from '../../support/harness.js';
import { createTestDatabase } from '../conformance/engines.js';

/**
 * Round trips to PostgreSQL per HTTP request, counted by the engine while a Writ on PostgreSQL answers
 * the requests an agent makes: what a request costs end to end, reads included, not only its
 * transactions (test/store/postgres/engine.test.ts pins those). Before the deferred statements
 * (Sql.defer) these were: a decision 4, an acquisition 6, a renewal or release 7, a gateway write 12;
 * before the hash in SQL (migration 005) and one-statement settlements, a gateway write 7.
 */
const cleanups: (() => Promise<unknown> | void)[] = [];
afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

let writ: OpenedWrit;
let app: FastifyInstance;
let store: PostgresStore;
let dataDir: string;

beforeAll(async () => {
  const db = await createTestDatabase('writ_request_trips');
  cleanups.push(db.drop);
  dataDir = mkdtempSync(join(tmpdir(), 'writ-trips-'));
  cleanups.push(() => rmSync(dataDir, { recursive: true, force: true }));
  const upstream = await startSampleUpstream({ port: 0, host: '127.0.0.1', dbFile: join(dataDir, 'upstream.sqlite') });
  cleanups.push(() => upstream.app.close());
  const config = loadConfig({ dataDir, bundleDir: BUNDLE_DIR, policiesDir: join(REPO, 'policies'), databaseUrl: db.url }, {});
  writ = await openWrit(config, { upstreams: UpstreamRouter.fromConfig([{ pattern: 'wp:post:*', url: upstream.url, timeoutMs: 5000, environment: 'production' }]) });
  cleanups.push(() => writ.close());
  const { manifest, baseDir } = readManifest(EXAMPLE_GRAPH);
  await applyManifest(writ.ctx, GOVERNANCE_ID, manifest, baseDir);
  app = await buildApp(writ.ctx);
  cleanups.push(() => app.close());
  store = writ.ctx.store as PostgresStore;
}, 60_000);

async function call(method: 'POST' | 'DELETE', url: string, payload: unknown, headers: Record<string, string> = {}) {
  const authorization = `Bearer ${await createCallerAssertion({ principal: 'seo-agent-7', privateJwk: fixtureKey('seo-agent-7'), now: Date.now() })}`;
  const before = store.stats().roundTrips;
  const res = await app.inject({ method, url, payload: payload as object, headers: { authorization, ...headers } });
  return { status: res.statusCode, body: res.json(), roundTrips: store.stats().roundTrips - before };
}

const decide = (fields: string[], resource = 'wp:post:1024') => call('POST', '/v1/decisions', { action: 'update_post', resource, environment: 'production', fields });

describe('round trips to PostgreSQL per request', () => {
  it('a decision 1, a lease acquisition 2, a renewal or release 2, a gateway write 3 (intent 2 + settlement 1)', async () => {
    await decide(['title']); // the first request (its spend also starts the background purge: not this request's round trips)
    const d = await decide(['title']);
    expect(d.status, JSON.stringify(d.body)).toBe(200);
    expect(d.roundTrips).toBe(1);

    const lease = await call('POST', '/v1/leases', { decisions: [d.body.token], ttl_ms: 10_000 });
    expect(lease.status, JSON.stringify(lease.body)).toBe(201);
    expect(lease.roundTrips).toBe(2);
    const renewed = await call('POST', `/v1/leases/${lease.body.lease_id}/renew`, { token: lease.body.token });
    expect(renewed.status, JSON.stringify(renewed.body)).toBe(200);
    // The authority the lease was taken with is read beside the renewal or release, the spend goes with the COMMIT.
    expect(renewed.roundTrips).toBe(2);
    const released = await call('DELETE', `/v1/leases/${lease.body.lease_id}`, { token: lease.body.token });
    expect(released.status, JSON.stringify(released.body)).toBe(200);
    expect(released.roundTrips).toBe(2);

    const w = await decide(['meta_description']);
    const write = await call('POST', '/v1/actions', { action: 'update_post', resource: 'wp:post:1024', fields: ['meta_description'], payload: { meta_description: 'm' }, expected_version: 0 }, { 'writ-decision': w.body.token });
    expect(write.status, JSON.stringify(write.body)).toBe(201);
    // Intent 2 (the assertion's spend, the append and the graph re-read in one message; the decision's
    // spend with the COMMIT); settlement 1 (the append, its own implicit transaction, answering with the
    // receipt's intent too, so nothing is read back).
    expect(write.roundTrips).toBe(3);
    expect(write.body).toMatchObject({ receipt: { status: 'COMPLETED', final_version: 1 } });
    expect(store.stats().eagerRuns).toBe(0);
  }, 60_000);

  it('replayed assertions, which nothing reads from the store beforehand: 401 and nothing lands, on a free key, a busy key and a write', async () => {
    const token = async () => `Bearer ${await createCallerAssertion({ principal: 'seo-agent-7', privateJwk: fixtureKey('seo-agent-7'), now: Date.now() })}`;
    const inject = (method: 'POST' | 'DELETE', url: string, payload: object, headers: Record<string, string>) => app.inject({ method, url, payload, headers }).then((r) => ({ status: r.statusCode, body: r.json() }));
    const eager = store.stats().eagerRuns;
    const d = await decide(['title']);
    const used = await token();
    const first = await inject('POST', '/v1/leases', { decisions: [d.body.token], ttl_ms: 10_000 }, { authorization: used });
    expect(first.status, JSON.stringify(first.body)).toBe(201);
    await inject('DELETE', `/v1/leases/${first.body.lease_id}`, { token: first.body.token }, { authorization: await token() });
    const keys = await store.read((tx) => tx.leases.listKeys({}).then((p) => p.keys));
    // A free key: the acquisition is granted in the transaction, the deferred spend fails at the
    // COMMIT, the transaction runs again without deferring and refuses; the key stays as it was.
    const free = await inject('POST', '/v1/leases', { decisions: [d.body.token], ttl_ms: 10_000 }, { authorization: used });
    expect([free.status, free.body.detail]).toEqual([401, expect.stringMatching(/replayed/)]);
    expect(await store.read((tx) => tx.leases.listKeys({}).then((p) => p.keys))).toEqual(keys);
    // Twice: the acquisition, then the spend a refused operation makes afterwards (which finds it spent: 401).
    expect(store.stats().eagerRuns).toBe(eager + 2);
    // A busy key: the replay learns nothing about the holder (401, not 423).
    const held = await inject('POST', '/v1/leases', { decisions: [d.body.token], ttl_ms: 10_000 }, { authorization: await token() });
    expect(held.status).toBe(201);
    const busy = await inject('POST', '/v1/leases', { decisions: [d.body.token], ttl_ms: 10_000 }, { authorization: used });
    expect([busy.status, busy.body.detail, busy.body.holder]).toEqual([401, expect.stringMatching(/replayed/), undefined]);
    // A write: no receipt, nothing forwarded, and its decision is not burned.
    const w = await decide(['meta_description']);
    const heads = await store.read((tx) => tx.receipts.heads());
    const body = { action: 'update_post', resource: 'wp:post:1024', fields: ['meta_description'], payload: { meta_description: 'replayed' }, expected_version: 1 };
    const replayedWrite = await inject('POST', '/v1/actions', body, { authorization: used, 'writ-decision': w.body.token });
    expect([replayedWrite.status, replayedWrite.body.detail]).toEqual([401, expect.stringMatching(/replayed/)]);
    expect(await store.read((tx) => tx.receipts.heads())).toEqual(heads);
    const fresh = await inject('POST', '/v1/actions', body, { authorization: await token(), 'writ-decision': w.body.token });
    expect(fresh.status, JSON.stringify(fresh.body)).toBe(201);
  }, 60_000);

  // Last: it revokes part of the example graph.
  it('a renewal or release by someone else, and a renewal after the chain was revoked: refused with nothing renewed, the revoked lease released', async () => {
    const d = await decide(['title'], 'wp:post:2048');
    const lease = await call('POST', '/v1/leases', { decisions: [d.body.token], ttl_ms: 10_000 });
    expect(lease.status, JSON.stringify(lease.body)).toBe(201);
    const asOther = async (url: string, method: 'POST' | 'DELETE') => {
      const authorization = `Bearer ${await createCallerAssertion({ principal: 'content-agent-3', privateJwk: fixtureKey('content-agent-3'), now: Date.now() })}`;
      const r = await app.inject({ method, url, payload: { token: lease.body.token }, headers: { authorization } });
      return r.json().code;
    };
    const before = await store.read((tx) => tx.leases.listKeys({ key: 'wp:post:2048#title' }).then((p) => p.keys));
    expect(await asOther(`/v1/leases/${lease.body.lease_id}/renew`, 'POST')).toBe('LEASE_TOKEN_MISMATCH');
    expect(await asOther(`/v1/leases/${lease.body.lease_id}`, 'DELETE')).toBe('LEASE_TOKEN_MISMATCH');
    expect(await store.read((tx) => tx.leases.listKeys({ key: 'wp:post:2048#title' }).then((p) => p.keys))).toEqual(before);
    const admin = readAdminCredential(dataDir);
    const governance = `Bearer ${await createCallerAssertion({ principal: GOVERNANCE_ID, privateJwk: admin.privateJwk as never, now: Date.now() })}`;
    const revoked = await app.inject({ method: 'DELETE', url: '/v1/edges/d-orch-seo', headers: { authorization: governance } });
    expect(revoked.statusCode, revoked.body).toBeLessThan(300);
    // A replayed assertion on that renewal: 401, not the revocation, and the lease is not released by
    // it (the release that would have carried its spend rolled back, so nothing was spent by the call).
    const used = `Bearer ${await createCallerAssertion({ principal: 'seo-agent-7', privateJwk: fixtureKey('seo-agent-7'), now: Date.now() })}`;
    expect((await app.inject({ method: 'POST', url: '/v1/decisions', payload: { action: 'read_post', resource: 'wp:post:1', environment: 'production', fields: [] }, headers: { authorization: used } })).statusCode).toBeLessThan(500);
    const replayed = await app.inject({ method: 'POST', url: `/v1/leases/${lease.body.lease_id}/renew`, payload: { token: lease.body.token, ttl_ms: 300_000 }, headers: { authorization: used } });
    expect([replayed.statusCode, replayed.json().code]).toEqual([401, 'UNAUTHENTICATED']);
    expect((await store.read((tx) => tx.leases.listKeys({ key: 'wp:post:2048#title' }).then((p) => p.keys)))[0]).toMatchObject({ holder: 'seo-agent-7' });
    const renewed = await call('POST', `/v1/leases/${lease.body.lease_id}/renew`, { token: lease.body.token, ttl_ms: 300_000 });
    expect([renewed.status, renewed.body.code]).toEqual([403, 'AUTHORITY_REVOKED']);
    expect((await store.read((tx) => tx.leases.listKeys({ key: 'wp:post:2048#title' }).then((p) => p.keys)))[0]).toMatchObject({ holder: null });
  }, 60_000);
});
