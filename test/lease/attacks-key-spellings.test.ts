/**
 * Coordination keys spelt differently, tried as an attacker would: two principals must never both hold
 * what is one key. Keys come from decisions (agents never name them), so each spelling goes through
 * POST /v1/decisions and POST /v1/leases.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GOVERNANCE_ID } from '../../src/graph/model.js';
import { decideOk, leaseOk } from '../support/agent.js';
import { startHarness, type Harness } from '../support/harness.js';

const ALICE = 'editor-alice';
const SEO = 'seo-agent-7';

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ example: true, upstream: true });
});
afterAll(async () => h.close());

const held = async () => (await h.call(GOVERNANCE_ID, { method: 'GET', url: '/v1/leases?state=HELD' })).body.leases.map((l: any) => [l.key, l.holderIdentity ?? l.holder]);

async function leaseAs(principal: string, req: { action?: string; resource: string; fields: string[] }) {
  const d = await h.call(principal, { method: 'POST', url: '/v1/decisions', payload: { action: 'update_post', environment: 'production', ...req } });
  if (d.status !== 200 || d.body.allow !== true) return { status: d.status, code: d.body.code ?? 'DENIED', keys: null };
  const l = await h.call(principal, { method: 'POST', url: '/v1/leases', payload: { decisions: [d.body.token], ttl_ms: 10_000 } });
  return { status: l.status, code: l.body.code ?? null, keys: l.body.keys ?? null };
}

describe('one key, other spellings', () => {
  it('an alias (wordpress:article) is the canonical key: a second holder is RESOURCE_BUSY', async () => {
    const first = await leaseOk(h, ALICE, [(await decideOk(h, ALICE, { resource: 'wp:post:501', fields: ['title'] })).token]);
    expect(first.keys).toEqual(['wp:post:501#title']);
    expect(await leaseAs(SEO, { resource: 'wordpress:article:501', fields: ['title'] })).toMatchObject({ status: 423, code: 'RESOURCE_BUSY' });
  });

  it('fields repeated, in another order, or the same field list written twice give the same keys: busy, never a second lease', async () => {
    await leaseOk(h, ALICE, [(await decideOk(h, ALICE, { resource: 'wp:post:502', fields: ['body', 'title'] })).token]);
    for (const fields of [['title', 'body'], ['title', 'title'], ['body', 'body', 'title']]) {
      expect(await leaseAs(ALICE, { resource: 'wp:post:502', fields }), fields.join(',')).toMatchObject({ status: 423, code: 'RESOURCE_BUSY' });
    }
  });

  it('a field in another case, or with "#" in it, is no field of a closed class: refused at the decision (422), no key made', async () => {
    for (const fields of [['Title'], ['TITLE'], ['title#x'], ['title '], ['ti\u0074le\u200b']]) {
      expect(await leaseAs(ALICE, { resource: 'wp:post:503', fields }), JSON.stringify(fields)).toMatchObject({ status: 422, keys: null });
    }
  });

  it('a resource with a trailing or doubled separator, "#", a wildcard or whitespace is no key: 422', async () => {
    for (const resource of ['wp:post:504:', 'wp:post::504', 'wp:post:504#title', 'wp:post:*', 'wp:post:504 ', ' wp:post:504']) {
      expect(await leaseAs(ALICE, { resource, fields: ['title'] }), resource).toMatchObject({ status: 422, keys: null });
    }
  });

  it('other case, percent-encodings and Unicode lookalikes of a routed key are no key of its upstream: no lease (404 UNKNOWN_RESOURCE or no resource class)', async () => {
    for (const resource of ['WP:post:505', 'wp:Post:505', 'wp:post:%35%30%35', 'wp:post:\uff15\uff10\uff15', 'wp:post:50\u0665', 'wp:p\u043est:505']) {
      const r = await leaseAs(ALICE, { resource, fields: ['title'] });
      expect(r.keys, resource).toBeNull();
      expect([404, 422], `${resource}: ${JSON.stringify(r)}`).toContain(r.status);
    }
    expect((await held()).filter(([k]: [string]) => k.includes('505'))).toEqual([]);
  });
});

describe('key sets that overlap', () => {
  it('a multi-key lease overlapping a held one on one key is RESOURCE_BUSY and takes none of its other keys', async () => {
    await leaseOk(h, ALICE, [(await decideOk(h, ALICE, { resource: 'wp:post:506', fields: ['title'] })).token]);
    const before = await held();
    expect(await leaseAs(SEO, { resource: 'wp:post:506', fields: ['title', 'meta_description'] })).toMatchObject({ status: 423, code: 'RESOURCE_BUSY' });
    const t = (await decideOk(h, SEO, { resource: 'wp:post:507', fields: ['title'] })).token;
    const u = (await decideOk(h, SEO, { resource: 'wp:post:506', fields: ['title'] })).token;
    const r = await h.call(SEO, { method: 'POST', url: '/v1/leases', payload: { decisions: [t, u], ttl_ms: 10_000 } });
    expect(r.status).toBe(423);
    expect(await held()).toEqual(before);
  });

  it('a conflict domain joins different keys of one site: a canonical field and the site\'s bulk canonical edit never run at once', async () => {
    const canonical = await leaseAs('seo-control-plane', { resource: 'wp:post:508', fields: ['canonical'] });
    expect(canonical.keys).toContain('domain:SEO_METADATA:example.com');
    expect(await leaseAs('seo-control-plane', { action: 'bulk_update_canonical', resource: 'site:example.com:canonical-bulk', fields: [] })).toMatchObject({ status: 423, code: 'RESOURCE_BUSY' });
  });

  it('a whole-resource lease and a field lease of the same resource are never held by two principals at once', async () => {
    const whole = await leaseAs('release-controller', { action: 'deploy', resource: 'deploy:site:www', fields: [] });
    expect(whole.keys).toEqual(['deploy:site:www']);
    const field = await leaseAs('incident-commander', { action: 'deploy', resource: 'deploy:site:www', fields: ['config'] });
    expect(field).toMatchObject({ status: 423, code: 'RESOURCE_BUSY' });
    // And the reverse: a field held, the whole resource is busy; the refusal says which key is held.
    const f = await leaseAs('incident-commander', { action: 'deploy', resource: 'deploy:site:api', fields: ['config'] });
    expect(f.keys).toEqual(['deploy:site:api#config']);
    const d = await h.call('release-controller', { method: 'POST', url: '/v1/decisions', payload: { action: 'deploy', environment: 'production', resource: 'deploy:site:api', fields: [] } });
    const w = await h.call('release-controller', { method: 'POST', url: '/v1/leases', payload: { decisions: [d.body.token], ttl_ms: 10_000 } });
    expect(w.status).toBe(423);
    expect(w.body).toMatchObject({ code: 'RESOURCE_BUSY', key: 'deploy:site:api', held_key: 'deploy:site:api#config', holder: 'incident-commander', queued: false });
    expect(w.body.detail).toBe('deploy:site:api is busy: deploy:site:api#config, held by incident-commander, overlaps deploy:site:api');
    // Two fields of one resource stay independent.
    expect(await leaseAs('release-controller', { action: 'deploy', resource: 'deploy:site:api', fields: ['env'] })).toMatchObject({ status: 201 });
  });

  it('two Unicode normal forms of one key name are one coordination key: the NFD spelling is refused, naming the NFC one', async () => {
    const nfc = await leaseAs('release-controller', { action: 'deploy', resource: 'deploy:site:caf\u00e9', fields: [] });
    expect(nfc.status).toBe(201);
    const nfd = await leaseAs('incident-commander', { action: 'deploy', resource: 'deploy:site:cafe\u0301', fields: [] });
    expect(nfd).toMatchObject({ status: 422, code: 'UNPROCESSABLE', keys: null });
    expect((await held()).filter(([k]: [string]) => k.startsWith('deploy:site:caf'))).toEqual([['deploy:site:caf\u00e9', 'release-controller']]);
  });

  it('a site named in capitals is no second conflict domain: its key is refused, naming the lower-case one, and no domain:SEO_METADATA:EXAMPLE.COM is taken', async () => {
    // (A post's canonical field takes domain:SEO_METADATA:example.com: see the test above.)
    const other = await leaseAs('seo-control-plane', { action: 'update_template', resource: 'site:EXAMPLE.COM:template:canonical', fields: [] });
    expect(other).toMatchObject({ status: 422, code: 'UNPROCESSABLE', keys: null });
    expect((await held()).filter(([k]: [string]) => k.includes('EXAMPLE.COM'))).toEqual([]);
    // The lower-case spelling is the site whose domain the post's canonical field holds.
    expect(await leaseAs('seo-control-plane', { action: 'update_template', resource: 'site:example.com:template:canonical', fields: [] })).toMatchObject({ status: 423, code: 'RESOURCE_BUSY' });
  });
});
