/**
 * An acquisition waiting in the queue whose caller stops being who it was while it waits: its key is
 * replaced (a rotated compromised key, same kid) or its principal revoked. When the holder releases, the
 * waiter is not granted: the caller is checked again in the granting transaction, the acquisition is
 * refused UNAUTHENTICATED (on the lease stream, which then closes with 1008, as for any request of a caller
 * no longer valid), it leaves the queue, and the next acquirer has the key at once. Over a real socket of
 * the in-process harness, on each engine; the same for POST /v1/leases with wait_ms.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { GOVERNANCE_ID, type PublicJwk } from '../../src/graph/model.js';
import { registerPrincipal } from '../../src/service/index.js';
import { generatePrincipalKeyPair } from '../../src/sdk/index.js';
import { decideOk, leaseOk } from '../support/agent.js';
import type { Harness } from '../support/harness.js';
import { closeOpened, listening, rawStream } from '../support/lease-stream.js';

const SEO = 'seo-agent-7';
const ALICE = 'editor-alice';

afterEach(closeOpened);

const titleDecision = async (h: Harness, principal: string, post: number) => (await decideOk(h, principal, { resource: `wp:post:${post}`, fields: ['title'] })).token;

async function untilQueued(h: Harness, key: string): Promise<void> {
  const until = Date.now() + 5_000;
  while (!(await h.ctx.leases.queues()).some((q) => q.key === key && q.waiters.some((w) => w.holder === SEO))) {
    if (Date.now() > until) throw new Error(`no acquisition of ${key} by ${SEO} queued`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Seo-agent-7's key replaced by a fresh one under the same kid (the old private key no longer authenticates). */
async function rotateSeoKey(h: Harness): Promise<void> {
  const p = (await h.ctx.graph.current()).principal(SEO)!;
  const fresh = await generatePrincipalKeyPair();
  await registerPrincipal(h.ctx, GOVERNANCE_ID, { id: SEO, kind: 'agent', priority_class: p.priority_class, attributes: p.attributes, keys: [{ ...fresh.publicJwk, kid: p.keys[0]!.kid } as PublicJwk] });
}

describe.each(['sqlite', 'postgres'] as const)('a queued acquisition whose caller is no longer valid when its turn comes, on %s', (engine) => {
  it('lease stream, key rotated while it waits: not granted when the holder releases; UNAUTHENTICATED, the stream closes with 1008, the key is free for the next acquirer', async () => {
    const { h, url } = await listening({ engine });
    const key = 'wp:post:71#title';
    const held = await leaseOk(h, ALICE, [await titleDecision(h, ALICE, 71)], { ttl_ms: 30_000 });
    const seoDecision = await titleDecision(h, SEO, 71);
    const raw = await rawStream(url, await h.auth(SEO));
    raw.send({ id: 1, op: 'acquire', decisions: [seoDecision], ttl_ms: 30_000, wait_ms: 30_000 });
    await untilQueued(h, key);
    await rotateSeoKey(h);
    const release = await h.call(ALICE, { method: 'DELETE', url: `/v1/leases/${held.lease_id}`, payload: { token: held.token } });
    expect(release.status).toBe(200);
    // Before: granted to the rotated caller (answered ok), and the stream closed only at its next request.
    const reply = await raw.next();
    expect(reply).toMatchObject({ id: 1, ok: false, problem: { code: 'UNAUTHENTICATED', status: 401 } });
    expect(reply.problem.detail).toMatch(/no longer has the key/);
    expect(await raw.closed).toMatchObject({ code: 1008 });
    expect(await h.ctx.leases.queues()).toEqual([]);
    expect((await h.ctx.leases.describe(key))?.holderIdentity ?? null).toBeNull();
    const next = await leaseOk(h, ALICE, [await titleDecision(h, ALICE, 71)]);
    expect(next.epochs[key]).toBe(held.epochs[key]! + 1);
  });

  it('lease stream, principal revoked while it waits: not granted either', async () => {
    const { h, url } = await listening({ engine });
    const key = 'wp:post:72#title';
    const held = await leaseOk(h, ALICE, [await titleDecision(h, ALICE, 72)], { ttl_ms: 30_000 });
    const seoDecision = await titleDecision(h, SEO, 72);
    const raw = await rawStream(url, await h.auth(SEO));
    raw.send({ id: 1, op: 'acquire', decisions: [seoDecision], ttl_ms: 30_000, wait_ms: 30_000 });
    await untilQueued(h, key);
    expect((await h.call(GOVERNANCE_ID, { method: 'DELETE', url: `/v1/principals/${SEO}`, payload: { reason: 'compromised' } })).status).toBe(200);
    await h.call(ALICE, { method: 'DELETE', url: `/v1/leases/${held.lease_id}`, payload: { token: held.token } });
    // (Before, too, not granted: the principal is on its decision's chain, AUTHORITY_REVOKED; now the caller's own check comes first.)
    const reply = await raw.next();
    expect(reply).toMatchObject({ id: 1, ok: false, problem: { code: 'UNAUTHENTICATED' } });
    expect(reply.problem.detail).toMatch(/is revoked/);
    expect(await raw.closed).toMatchObject({ code: 1008 });
    expect((await h.ctx.leases.describe(key))?.holderIdentity ?? null).toBeNull();
  });

  it('POST /v1/leases with wait_ms, key rotated while it waits: 401 UNAUTHENTICATED, not granted, the key free', async () => {
    const { h } = await listening({ engine });
    const key = 'wp:post:73#title';
    const held = await leaseOk(h, ALICE, [await titleDecision(h, ALICE, 73)], { ttl_ms: 30_000 });
    const seoDecision = await titleDecision(h, SEO, 73);
    const waiting = h.call(SEO, { method: 'POST', url: '/v1/leases', payload: { decisions: [seoDecision], ttl_ms: 30_000, wait_ms: 30_000 } });
    await untilQueued(h, key);
    await rotateSeoKey(h);
    await h.call(ALICE, { method: 'DELETE', url: `/v1/leases/${held.lease_id}`, payload: { token: held.token } });
    const answer = await waiting;
    expect(answer.status, JSON.stringify(answer.body)).toBe(401);
    expect(answer.body).toMatchObject({ code: 'UNAUTHENTICATED' });
    expect(answer.body.detail).toMatch(/no longer has the key/);
    expect((await h.ctx.leases.describe(key))?.holderIdentity ?? null).toBeNull();
    expect(await h.ctx.leases.queues()).toEqual([]);
  });
});
