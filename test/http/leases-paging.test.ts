import { afterEach, describe, expect, it } from 'vitest';
import { LEASE_PAGE } from '../../src/lease/index.js';
import { take } from '../store/conformance/helpers.js';
import { startHarness, type Harness } from '../support/harness.js';

/**
 * GET /v1/leases without state=HELD: every key ever leased, in key order (bytewise), a page at a time:
 * `limit` (default LEASE_PAGE.defaultLimit, at most maxLimit) and `after` (the `next` of the previous
 * page), as GET /v1/receipts pages. On both engines.
 */
describe.each(['sqlite', 'postgres'] as const)('%s: GET /v1/leases pages', (engine) => {
  let h: Harness;
  afterEach(async () => h?.close());

  /** Keys k:000 … k:(n-1), taken straight through the store (several per acquisition), by `holder`. */
  async function keys(n: number, holder = 'seo-agent-7'): Promise<string[]> {
    const all = Array.from({ length: n }, (_, i) => `k:${String(i).padStart(3, '0')}`);
    for (let i = 0; i < n; i += 50) await take(h.ctx.store, all.slice(i, i + 50), holder, { ttlMs: 600_000, now: h.clock.now() });
    return all;
  }

  /** Every key's row and the lease history, for "nothing changed". */
  const view = () => h.ctx.store.read(async (tx) => ({ keys: (await tx.leases.listKeys({})).keys, history: await tx.leases.history({}) }));
  const get = (url: string) => h.call('governance', { method: 'GET', url });

  it('follows `next` through every key, in key order, once each; the last page says null', async () => {
    h = await startHarness({ engine });
    const all = await keys(7);
    const seen: string[] = [];
    let url = '/v1/leases?limit=3';
    const sizes: number[] = [];
    for (;;) {
      const r = await get(url);
      expect(r.status, r.raw).toBe(200);
      seen.push(...r.body.leases.map((l: any) => l.key));
      sizes.push(r.body.leases.length);
      if (r.body.next === null) break;
      expect(r.body.next).toBe(r.body.leases.at(-1).key);
      url = `/v1/leases?limit=3&after=${encodeURIComponent(r.body.next)}`;
    }
    expect(seen).toEqual(all);
    expect(sizes).toEqual([3, 3, 1]);
    // A page that ends exactly at the last key says null, not a next page that would be empty.
    expect((await get('/v1/leases?limit=7')).body.next).toBeNull();
    expect((await get(`/v1/leases?after=${encodeURIComponent('k:006')}`)).body).toEqual({ leases: [], next: null });
    // Narrowed by holder, paged the same way.
    const byHolder = await get('/v1/leases?holder=seo-agent-7&limit=5');
    expect([byHolder.body.leases.length, byHolder.body.next]).toEqual([5, 'k:004']);
    expect((await get('/v1/leases?holder=editor-alice&limit=5')).body).toEqual({ leases: [], next: null });
  });

  it(`without a limit, ${LEASE_PAGE.defaultLimit} records and the next; at most ${LEASE_PAGE.maxLimit}`, async () => {
    h = await startHarness({ engine });
    const all = await keys(LEASE_PAGE.defaultLimit + 1);
    const first = await get('/v1/leases');
    expect(first.body.leases.map((l: any) => l.key)).toEqual(all.slice(0, LEASE_PAGE.defaultLimit));
    expect(first.body.next).toBe(all[LEASE_PAGE.defaultLimit - 1]);
    const rest = await get(`/v1/leases?after=${encodeURIComponent(first.body.next)}`);
    expect(rest.body).toMatchObject({ leases: [{ key: all.at(-1) }], next: null });
    expect((await get(`/v1/leases?limit=${LEASE_PAGE.maxLimit}`)).body.leases).toHaveLength(all.length);
  });

  it('a bad limit or cursor is MALFORMED_REQUEST, paging the held keys UNPROCESSABLE; nothing changes', async () => {
    h = await startHarness({ engine });
    await keys(3);
    const before = await view();
    for (const q of ['limit=0', `limit=${LEASE_PAGE.maxLimit + 1}`, 'limit=-1', 'limit=x', 'limit=1.5', 'after=', `after=${'k'.repeat(513)}`, 'cursor=k:001']) {
      const r = await get(`/v1/leases?${q}`);
      expect(r.status, `${q}: ${r.raw}`).toBe(400);
      expect(r.body.code, q).toBe('MALFORMED_REQUEST');
    }
    for (const q of ['state=HELD&limit=1', 'state=HELD&after=k:000']) {
      const r = await get(`/v1/leases?${q}`);
      expect(r.status, `${q}: ${r.raw}`).toBe(422);
      expect(r.body.code, q).toBe('UNPROCESSABLE');
    }
    expect(await view()).toEqual(before);
    // The held read is one answer: next is always null.
    expect((await get('/v1/leases?state=HELD')).body).toMatchObject({ next: null });
  });

  it('is described in the OpenAPI document', async () => {
    h = await startHarness({ engine });
    const op = (await get('/openapi.json')).body.paths['/v1/leases'].get;
    const param = (name: string) => op.parameters.find((p: any) => p.name === name && p.in === 'query');
    expect(param('limit').schema).toMatchObject({ type: 'integer', minimum: 1, maximum: LEASE_PAGE.maxLimit });
    expect(param('after').schema).toMatchObject({ type: 'string', minLength: 1 });
    const ok = op.responses['200'].content['application/json'].schema;
    expect(ok.required).toEqual(['leases', 'next']);
    expect(ok.properties.next.type).toEqual(['string', 'null']);
  });
});
