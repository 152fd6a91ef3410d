/**
 * Attacks on key families above the stores: the keys requests can reach. A conflict domain's key
 * (`domain:NAME:SCOPE`, coordinationKeys) is a key of the lease stores like any other, so a resource
 * key spelt the same would share its lease, its family and its fence.
 */
import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { coordinationKeys } from '../../src/gateway/coordination-keys.js';
import { formatFencingEpochs, parseFencingEpochs } from '../../src/wire/fencing-header.js';
import { startHarness, type Harness } from '../support/harness.js';
import type { Obligations, PolicyData } from '../../src/policy/types.js';
import { canonicalResource } from '../../src/service/resources.js';

const example = (JSON.parse(readFileSync(new URL('../../policies/data.json', import.meta.url), 'utf8')) as PolicyData).writ;
/** The example's registry with a catch-all class last, as a registry that governs every key might have. */
const withCatchAll = (): PolicyData => ({ writ: { ...example, resource_classes: [...example.resource_classes, { pattern: '**', class: 'WRITE_EXCLUSIVE' }] } } as unknown as PolicyData);

describe('conflict domain keys', () => {
  it('a resource key spelt as a conflict domain\'s key is refused where keys enter, not leased as that domain', () => {
    const obligations = { lease_required: true, resource_class: 'WRITE_EXCLUSIVE', field_classes: {}, conflict_domain: 'SEO_METADATA:example.com' } as unknown as Obligations;
    const domainKey = coordinationKeys('site:example.com:template:canonical', [], obligations).find((k) => k.startsWith('domain:'))!;
    expect(domainKey).toBe('domain:SEO_METADATA:example.com');
    for (const key of [domainKey, `${domainKey}:x`, 'domain:anything']) {
      let refused: unknown;
      try {
        canonicalResource(withCatchAll(), key);
      } catch (e) {
        refused = e;
      }
      expect(refused, key).toMatchObject({ code: 'UNPROCESSABLE', message: expect.stringContaining('conflict domain') });
    }
    // A key that only begins with the word is another key.
    expect(canonicalResource(withCatchAll(), 'domains:x')).toBe('domains:x');
  });
});

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

describe('field names and the fencing header', () => {
  // A field's key is resource#field, and Writ sends the upstream its epochs as key=epoch pairs separated
  // by commas (Writ-Fencing-Epoch). A field named 'x=1,deploy:site:www' under a class with open fields
  // (deploy:**) made a key that the upstream reads as two: R#x at 1 and the resource's own key R at the
  // writer's epoch, a fence on the whole resource set by a field's write, past every sibling holder's
  // lease (their writes then stale), without a lease on R.
  it('a field that would read as other keys in Writ-Fencing-Epoch is refused where fields enter (422), so no such key is leased', async () => {
    const obligations = { lease_required: true, resource_class: 'WRITE_EXCLUSIVE', field_classes: {}, conflict_domain: null } as unknown as Obligations;
    const [key] = coordinationKeys('deploy:site:www', ['x=1,deploy:site:www'], obligations);
    expect(parseFencingEpochs(formatFencingEpochs({ [key!]: 5 }))).toEqual({ 'deploy:site:www#x': 1, 'deploy:site:www': 5 });

    h = await startHarness({ example: true });
    for (const field of ['x=1,deploy:site:www', 'a;b']) {
      const r = await h.call('release-controller', { method: 'POST', url: '/v1/decisions', payload: { action: 'deploy', resource: 'deploy:site:www', environment: 'production', fields: [field] } });
      expect(r.status, r.raw).toBe(422);
      expect(r.body).toMatchObject({ code: 'UNPROCESSABLE', detail: expect.stringContaining('Writ-Fencing-Epoch') });
    }
    // A resource key so spelt could never be fenced either.
    const whole = await h.call('release-controller', { method: 'POST', url: '/v1/decisions', payload: { action: 'deploy', resource: 'deploy:a=1,deploy:b', environment: 'production', fields: [] } });
    expect(whole.status, whole.raw).toBe(422);
    // Nor can a scope name such a field or key: it would never apply.
    for (const scope of [{ fields: ['x=1,deploy:site:www'] }, { resources: ['deploy:a,b'] }]) {
      const g = await h.call('governance', { method: 'POST', url: '/v1/grants', payload: { id: 'g-odd', to: 'release-controller', reason: 'odd', max_depth: 0, scope: { actions: ['deploy'], resources: ['deploy:**'], environments: ['production'], risk_max: 1, ...scope } } });
      expect([g.status, g.body.code], g.raw).toEqual([422, 'UNPROCESSABLE']);
    }
    // '=' alone is read right (each pair splits on its last '='): such a field stays usable.
    const eq = await h.call('release-controller', { method: 'POST', url: '/v1/decisions', payload: { action: 'deploy', resource: 'deploy:site:www', environment: 'production', fields: ['a=b'] } });
    expect(eq.status, eq.raw).toBe(200);
  });
});

describe('the field "*"', () => {
  // The policy reads a request's field "*" as a scope does, every field (a grant of [title] does not allow
  // it); coordination reads it so too: it coordinates on the resource's key R (coordinationKeys), never on a
  // key R#* leased beside a holder of R#config, whose fence would not stop a field's late write.
  it('a request for field "*" is not leased beside a holder of one of the resource\'s fields', async () => {
    h = await startHarness({ example: true });
    const decide = (principal: string, fields: string[]) =>
      h!.call(principal, { method: 'POST', url: '/v1/decisions', payload: { action: 'deploy', resource: 'deploy:site:www', environment: 'production', fields } });
    const config = await decide('release-controller', ['config']);
    expect(config.body.allow, config.raw).toBe(true);
    const held = await h.call('release-controller', { method: 'POST', url: '/v1/leases', payload: { decisions: [config.body.token], ttl_ms: 10_000 } });
    expect(held.status, held.raw).toBe(201);
    const star = await decide('release-controller', ['*']);
    if (star.status === 422) return;
    const second = await h.call('release-controller', { method: 'POST', url: '/v1/leases', payload: { decisions: [star.body.token], ttl_ms: 10_000 } });
    expect(second.status, second.raw).toBe(423);
  });
});
