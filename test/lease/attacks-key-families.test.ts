/**
 * Attacks on key families above the stores: the keys requests can reach. A conflict domain's key
 * (`domain:NAME:SCOPE`, coordinationKeys) is a key of the lease stores like any other, so a resource
 * key spelt the same would share its lease, its family and its fence.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { coordinationKeys } from '../../src/gateway/coordination-keys.js';
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
