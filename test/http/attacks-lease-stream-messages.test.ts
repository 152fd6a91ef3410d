/**
 * The lease stream's messages and lease tokens tried as an attacker would: ids repeated or out of range,
 * operations pipelined out of order, tokens that nearly match.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { GOVERNANCE_ID } from '../../src/graph/model.js';
import { leaseIdOfToken } from '../../src/lease/token.js';
import { newLeaseToken } from '../../src/wire/lease-token.js';
import { decideOk, leaseOk } from '../support/agent.js';
import type { Harness } from '../support/harness.js';
import { closeOpened, listening, rawStream } from '../support/lease-stream.js';

afterEach(closeOpened);

const SEO = 'seo-agent-7';
const ALICE = 'editor-alice';
const title = async (h: Harness, principal: string, post: number) => (await decideOk(h, principal, { resource: `wp:post:${post}`, fields: ['title'] })).token;
const held = async (h: Harness) => (await h.call(GOVERNANCE_ID, { method: 'GET', url: '/v1/leases?state=HELD' })).body.leases.map((l: any) => [l.key, l.leaseId ?? l.lease_id]).sort();

describe('stream message ids', () => {
  it('ids out of range (2^53 and past it, negative, fractional, a string, 1e308) are refused with id null and change nothing; the largest safe id is echoed exactly', async () => {
    const { h, url } = await listening();
    const raw = await rawStream(url, await h.auth(SEO));
    const d = await title(h, SEO, 601);
    for (const id of ['9007199254740992', '9007199254740993', '-1', '1.5', '"7"', '1e308', '-0.5', 'null']) {
      raw.send(`{"id":${id},"op":"acquire","decisions":["${d}"],"ttl_ms":5000}`);
      const r = await raw.next();
      expect(r, id).toMatchObject({ id: null, ok: false, problem: { code: 'MALFORMED_REQUEST' } });
    }
    expect(await held(h)).toEqual([]);
    raw.send(`{"id":9007199254740991,"op":"acquire","decisions":["${d}"],"ttl_ms":5000}`);
    const r = await raw.next();
    expect(r.id).toBe(Number.MAX_SAFE_INTEGER);
    expect(r.ok).toBe(true);
    // The JSON text of the answer names the id as sent, digit for digit.
    expect(raw.ws.readyState).toBe(raw.ws.OPEN);
  });

  it('two requests in flight with one id are each answered once, with that id and a lease of their own: nothing is keyed by the caller\'s id', async () => {
    const { h, url } = await listening();
    const raw = await rawStream(url, await h.auth(SEO));
    const [d1, d2] = [await title(h, SEO, 602), await title(h, SEO, 603)];
    raw.send({ id: 5, op: 'acquire', decisions: [d1], ttl_ms: 5_000 });
    raw.send({ id: 5, op: 'acquire', decisions: [d2], ttl_ms: 5_000 });
    const answers = [await raw.next(), await raw.next()];
    expect(answers.map((a) => [a.id, a.ok])).toEqual([[5, true], [5, true]]);
    expect(answers.map((a) => a.result.keys[0]).sort()).toEqual(['wp:post:602#title', 'wp:post:603#title']);
    expect(new Set(answers.map((a) => a.result.lease_id)).size).toBe(2);
    await new Promise((r) => setTimeout(r, 300));
    expect(raw.replies).toHaveLength(2);
  });
});

describe('stream operations pipelined out of order', () => {
  it('a release sent with an acquire, before its answer (the lease id computed from the caller\'s own token): the state is what the two answers say', async () => {
    const { h, url } = await listening();
    const raw = await rawStream(url, await h.auth(SEO));
    for (let round = 0; round < 10; round++) {
      const token = newLeaseToken();
      const leaseId = leaseIdOfToken(token)!;
      raw.send({ id: 2 * round, op: 'acquire', decisions: [await title(h, SEO, 610 + round)], ttl_ms: 5_000, token });
      raw.send({ id: 2 * round + 1, op: 'release', lease_id: leaseId, token });
      const answers = [await raw.next(), await raw.next()].sort((x, y) => x.id - y.id);
      expect(answers[0]).toMatchObject({ ok: true, result: { lease_id: leaseId } });
      const stillHeld = (await held(h)).some(([, id]: [string, string]) => id === leaseId);
      if (answers[1].ok) expect(stillHeld, `round ${round}: released, yet held`).toBe(false);
      else {
        // The release ran first: it found no lease, and the acquire's lease stands (the caller knows both).
        expect(answers[1].problem.code).toBe('LEASE_NOT_FOUND');
        expect(stillHeld, `round ${round}: release refused, yet not held`).toBe(true);
      }
    }
  });

  it('renewals pipelined behind a release of their lease: each answered after the release is refused, and none extends the released lease', async () => {
    const { h, url } = await listening();
    const raw = await rawStream(url, await h.auth(SEO));
    raw.send({ id: 1, op: 'acquire', decisions: [await title(h, SEO, 620)], ttl_ms: 5_000 });
    const g = (await raw.next()).result;
    raw.send({ id: 2, op: 'release', lease_id: g.lease_id, token: g.token });
    for (let i = 3; i < 13; i++) raw.send({ id: i, op: 'renew', lease_id: g.lease_id, token: g.token, ttl_ms: 60_000 });
    const answers = [];
    for (let i = 0; i < 11; i++) answers.push(await raw.next());
    const release = answers.find((a) => a.id === 2);
    expect(release.ok).toBe(true);
    expect(await held(h)).toEqual([]);
    // Every renewal answered after the release is refused.
    const releaseAt = answers.indexOf(release);
    for (const a of answers.slice(releaseAt + 1)) expect(a.ok, JSON.stringify(a)).toBe(false);
  });
});

describe('lease tokens that nearly match', () => {
  it('a token one character off (first, middle or last) is refused exactly as a random one: no prefix oracle, and the lease is unchanged', async () => {
    const { h } = await listening();
    const lease = await leaseOk(h, ALICE, [await title(h, ALICE, 630)]);
    const flip = (i: number) => lease.token.slice(0, i) + (lease.token[i] === 'A' ? 'B' : 'A') + lease.token.slice(i + 1);
    const tries = [flip(0), flip(21), flip(42), newLeaseToken()];
    const before = await held(h);
    const bodies = [];
    for (const token of tries) {
      const r = await h.call(ALICE, { method: 'POST', url: `/v1/leases/${lease.lease_id}/renew`, payload: { token, ttl_ms: 60_000 } });
      const d = await h.call(ALICE, { method: 'DELETE', url: `/v1/leases/${lease.lease_id}`, payload: { token } });
      bodies.push(JSON.stringify([r.status, r.body.code, r.body.detail, d.status, d.body.code, d.body.detail]));
    }
    expect(new Set(bodies).size, bodies.join('\n')).toBe(1);
    expect(JSON.parse(bodies[0]!)[1]).toBe('LEASE_TOKEN_MISMATCH');
    expect(await held(h)).toEqual(before);
    // The holder's own token still works.
    const ok = await h.call(ALICE, { method: 'DELETE', url: `/v1/leases/${lease.lease_id}`, payload: { token: lease.token } });
    expect(ok.status).toBe(200);
  });
});
