import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { decideOk, snapshot, upstreamGet } from '../support/agent.js';
import { startHarness, type Harness } from '../support/harness.js';
import { openDatabase } from '../../src/store/sqlite/database.js';
import { SqliteSingleUseStore } from '../../src/store/sqlite/single-use-store.js';

/**
 * POST /v1/actions spends the caller assertion's jti in the same transaction that records what the
 * request did (the intent, or the rejection), not in a commit of its own. These tests pin that it is
 * still spent on every path, and that two requests racing with one assertion get one write.
 */
let h: Harness;
beforeEach(async () => {
  h = await startHarness({ upstream: true });
});
afterEach(async () => h?.close());

const meta = (v: string, expected = 0) => ({ action: 'update_post', resource: 'wp:post:1024', fields: ['meta_description'], payload: { meta_description: v }, expected_version: expected });

/** A write with a given Authorization header (so one assertion can be sent twice). */
const write = (auth: Record<string, string>, decision: string, body: Record<string, unknown>, extra: Record<string, string> = {}) =>
  h.call(null, { method: 'POST', url: '/v1/actions', headers: { ...auth, 'writ-decision': decision, ...extra }, payload: body });

const receiptCount = () => h.db.prepare('SELECT COUNT(*) FROM receipts').pluck().get() as number;

describe('the caller assertion of a write is spent with the write', () => {
  it('after a completed write, the same assertion is refused (401) and nothing more is recorded or forwarded', async () => {
    const auth = await h.auth('seo-agent-7');
    const d1 = await decideOk(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['meta_description'] });
    const first = await write(auth, d1.token, meta('one'));
    expect(first.status, JSON.stringify(first.body)).toBe(201);
    const d2 = await decideOk(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['meta_description'] });
    const before = await snapshot(h);
    const receipts = receiptCount();
    const again = await write(auth, d2.token, meta('two', first.body.receipt.final_version));
    expect(again.status).toBe(401);
    expect(again.body.code).toBe('UNAUTHENTICATED');
    expect(again.body.detail).toMatch(/replayed/);
    expect(await snapshot(h)).toEqual(before);
    expect(receiptCount()).toBe(receipts);
    // The second decision was not burned by the refused request: a fresh assertion can use it.
    const fresh = await write(await h.auth('seo-agent-7'), d2.token, meta('two', first.body.receipt.final_version));
    expect(fresh.status, JSON.stringify(fresh.body)).toBe(201);
  });

  it('a rejected write spends it too (with its REJECTED receipt), and so do a malformed payload and an unknown resource', async () => {
    const auth = await h.auth('seo-agent-7');
    const rejected = await write(auth, 'not-a-decision', meta('x'));
    expect(rejected.body.code).toBe('DECISION_INVALID');
    expect(rejected.body.receipt_id).toEqual(expect.any(String));
    const receipts = receiptCount();
    const d = await decideOk(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['meta_description'] });
    const replay = await write(auth, d.token, meta('x'));
    expect(replay.status).toBe(401);
    expect(replay.body.detail).toMatch(/replayed/);
    expect(receiptCount()).toBe(receipts);

    const auth2 = await h.auth('seo-agent-7');
    const bad = await write(auth2, d.token, { ...meta('x'), payload: { title: 'not the named field' } });
    expect(bad.status).toBe(422);
    expect((await write(auth2, d.token, meta('x'))).status).toBe(401);

    const auth3 = await h.auth('seo-agent-7');
    const unknown = await write(auth3, d.token, { ...meta('x'), resource: 'nothing:registered' });
    expect(unknown.body.code).toBe('UNKNOWN_RESOURCE');
    expect((await write(auth3, d.token, meta('x'))).status).toBe(401);
  });

  it('a request refused for reusing an Idempotency-Key for another request spends it too', async () => {
    const d1 = await decideOk(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['meta_description'] });
    const first = await write(await h.auth('seo-agent-7'), d1.token, meta('one'), { 'idempotency-key': 'k-x' });
    expect(first.status).toBe(201);
    const auth = await h.auth('seo-agent-7');
    const d2 = await decideOk(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['meta_description'] });
    const mismatch = await write(auth, d2.token, meta('two', first.body.receipt.final_version), { 'idempotency-key': 'k-x' });
    expect(mismatch.body.code).toBe('IDEMPOTENCY_MISMATCH');
    const again = await write(auth, d2.token, meta('two', first.body.receipt.final_version));
    expect(again.status).toBe(401);
  });

  it('an Idempotency-Key retry spends its own assertion', async () => {
    const d = await decideOk(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['meta_description'] });
    const key = { 'idempotency-key': 'k-1' };
    expect((await write(await h.auth('seo-agent-7'), d.token, meta('x'), key)).status).toBe(201);
    const auth = await h.auth('seo-agent-7');
    const retry = await write(auth, d.token, meta('x'), key);
    expect(retry.status).toBe(200);
    expect(retry.headers['idempotent-replayed']).toBe('true');
    expect((await write(auth, d.token, meta('x'), key)).status).toBe(401);
  });

  it('two writes racing with one assertion: exactly one is forwarded, the other is 401 and spends nothing else', async () => {
    const auth = await h.auth('seo-agent-7');
    const [d1, d2] = [
      await decideOk(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['meta_description'] }),
      await decideOk(h, 'seo-agent-7', { resource: 'wp:post:1025', fields: ['meta_description'] }),
    ];
    const before = receiptCount();
    // Both pass verification (the jti is not spent yet when either checks); the spend inside the
    // intent transaction decides.
    const [a, b] = await Promise.all([write(auth, d1.token, meta('a')), write(auth, d2.token, { ...meta('b'), resource: 'wp:post:1025' })]);
    expect([a.status, b.status].sort()).toEqual([201, 401]);
    expect(receiptCount()).toBe(before + 1);
    expect((await upstreamGet(h, '/writes')).total).toBe(1);
  });
});

describe('the caller assertion of a lease acquisition is spent with it', () => {
  const take = (auth: Record<string, string>, decision: string) =>
    h.call(null, { method: 'POST', url: '/v1/leases', headers: auth, payload: { decisions: [decision], ttl_ms: 10_000 } });

  it('a granted lease has its authority recorded, and the assertion cannot be used again', async () => {
    const auth = await h.auth('seo-agent-7');
    const d = await decideOk(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['title'] });
    const lease = await take(auth, d.token);
    expect(lease.status, JSON.stringify(lease.body)).toBe(201);
    expect(await h.ctx.store.read((tx) => tx.leaseAuthority.get(lease.body.lease_id))).toMatchObject({ holder: 'seo-agent-7' });
    const again = await take(auth, d.token);
    expect(again.status).toBe(401);
    expect(again.body.detail).toMatch(/replayed/);
  });

  it('a refused acquisition (busy) spends it too, and changes no lease', async () => {
    const d = await decideOk(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['title'] });
    expect((await take(await h.auth('seo-agent-7'), d.token)).status).toBe(201);
    const other = await decideOk(h, 'editor-alice', { resource: 'wp:post:1024', fields: ['title'] });
    const auth = await h.auth('editor-alice');
    const before = await snapshot(h);
    const busy = await take(auth, other.token);
    expect(busy.body.code).toBe('RESOURCE_BUSY');
    expect(await snapshot(h)).toEqual(before);
    expect((await take(auth, other.token)).status).toBe(401);
  });

  it('renewals and releases spend theirs too (in their own transaction, or after a refusal)', async () => {
    const d = await decideOk(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['title'] });
    const lease = (await take(await h.auth('seo-agent-7'), d.token)).body;
    const renewAuth = await h.auth('seo-agent-7');
    const renew = (auth: Record<string, string>, token = lease.token) =>
      h.call(null, { method: 'POST', url: `/v1/leases/${lease.lease_id}/renew`, headers: auth, payload: { token, ttl_ms: 10_000 } });
    expect((await renew(renewAuth)).status).toBe(200);
    expect((await renew(renewAuth)).status).toBe(401);
    // A refused renewal (wrong token) spends its assertion as well.
    const wrongAuth = await h.auth('seo-agent-7');
    expect((await renew(wrongAuth, 'x'.repeat(43))).body.code).toBe('LEASE_TOKEN_MISMATCH');
    expect((await renew(wrongAuth)).status).toBe(401);
    const releaseAuth = await h.auth('seo-agent-7');
    const release = () => h.call(null, { method: 'DELETE', url: `/v1/leases/${lease.lease_id}`, headers: releaseAuth, payload: { token: lease.token } });
    expect((await release()).status).toBe(200);
    expect((await release()).status).toBe(401);
  });

  it('an acquisition that will wait in the queue spends it before waiting (another process sharing the store sees it spent)', async () => {
    const held = await take(await h.auth('seo-agent-7'), (await decideOk(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['title'] })).token);
    expect(held.status).toBe(201);
    const auth = await h.auth('editor-alice');
    const jti = JSON.parse(Buffer.from(auth.authorization!.split('.')[1]!, 'base64url').toString()).jti as string;
    const d = await decideOk(h, 'editor-alice', { resource: 'wp:post:1024', fields: ['title'] });
    const waiting = h.call(null, { method: 'POST', url: '/v1/leases', headers: auth, payload: { decisions: [d.token], ttl_ms: 10_000, wait_ms: 5_000 } });
    // Another process's view of the same file: its own connection and replay guard.
    const otherDb = openDatabase(h.config.dbFile);
    const other = new SqliteSingleUseStore(otherDb);
    let spent = false;
    for (let i = 0; i < 200 && !spent; i++) {
      spent = await other.isSpent('assertion', `editor-alice\u0000${jti}`, h.clock.now());
      if (!spent) await new Promise((r) => setTimeout(r, 10));
    }
    otherDb.close();
    expect(spent).toBe(true);
    await h.call(null, { method: 'DELETE', url: `/v1/leases/${held.body.lease_id}`, headers: await h.auth('seo-agent-7'), payload: { token: held.body.token } });
    expect((await waiting).status).toBe(201);
  });
});
