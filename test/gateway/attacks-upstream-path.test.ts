import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { act, decideOk, snapshot, upstreamGet } from '../support/agent.js';
import { startHarness, type Harness } from '../support/harness.js';
import { HttpUpstreamClient } from '../../src/upstream/client.js';
import { postIdOf, type ResourceKeyAdapter } from '../../src/upstream/resource-key.js';

let h: Harness;
beforeEach(async () => {
  h = await startHarness({ upstream: true });
});
afterEach(async () => h?.close());

/**
 * The resource key picks the upstream path (wp:post:<id> → /posts/<id>). A dot segment in a key ('.' or
 * '..', which the id's character class allows and encodeURIComponent leaves alone) would be resolved by
 * the URL parser before the request is sent: wp:post:.. was PUT to `/`, wp:post:. to `/posts/`, and a
 * reconciliation lookup of wp:post:.. asked `/writes/<id>`. A caller with a decision on wp:post:* could
 * address upstream paths outside /posts/<id>. They are keys no upstream can address: refused before any
 * intent, as wp:post:a@b is.
 */
describe('a resource key cannot choose another upstream path', () => {
  for (const resource of ['wp:post:..', 'wp:post:.']) {
    it(`${resource}: the write is REJECTED (UNKNOWN_RESOURCE) and nothing reaches the upstream; a lease on it is refused`, async () => {
      const before = await snapshot(h);
      const meta = await decideOk(h, 'seo-agent-7', { resource, fields: ['meta_description'] });
      const w = await act(h, 'seo-agent-7', { resource, fields: ['meta_description'], payload: { meta_description: 'm' }, expected_version: 0 }, { decision: meta.token });
      expect(w.status, JSON.stringify(w.body)).toBe(404);
      expect(w.body.code).toBe('UNKNOWN_RESOURCE');
      const rejected = await h.call('governance', { method: 'GET', url: `/v1/receipts/${w.body.receipt_id}` });
      expect(rejected.body.receipt.status).toBe('REJECTED');
      const title = await decideOk(h, 'seo-agent-7', { resource, fields: ['title'] });
      const lease = await h.call('seo-agent-7', { method: 'POST', url: '/v1/leases', payload: { decisions: [title.token], ttl_ms: 5000 } });
      expect(lease.body.code).toBe('UNKNOWN_RESOURCE');
      expect(await snapshot(h)).toEqual(before);
      expect((await upstreamGet(h, '/requests')).requests).toEqual([]);
    });
  }

  it('the sample adapter refuses dot segments; ids that merely contain dots are kept', () => {
    expect(() => postIdOf('wp:post:..')).toThrow(/UNKNOWN_RESOURCE|maps only/);
    expect(() => postIdOf('wp:post:.')).toThrow(/UNKNOWN_RESOURCE|maps only/);
    expect(postIdOf('wp:post:...')).toBe('...');
    expect(postIdOf('wp:post:v1.2')).toBe('v1.2');
    expect(postIdOf('wp:post:~')).toBe('~');
  });

  it('any adapter: a path the URL parser would rewrite (dot segments, a query, a fragment, an authority) is refused by the client', () => {
    const leaky: ResourceKeyAdapter = { pathOf: (key) => `/items/${key.slice(key.lastIndexOf(':') + 1)}` };
    const client = new HttpUpstreamClient({ baseUrl: 'http://127.0.0.1:1/api', adapter: leaky });
    for (const key of ['x:..', 'x:.', 'x:a?b=1', 'x:a#b', 'x:..%2F..', 'x:a\\..\\..']) {
      expect(() => client.check(key), key).toThrow(/UNKNOWN_RESOURCE|cannot address/);
    }
    expect(() => client.check('x:1024')).not.toThrow();
  });
});
