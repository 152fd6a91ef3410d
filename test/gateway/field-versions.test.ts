import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { decideLeaseWrite, upstreamGet } from '../support/agent.js';
import { startHarness, type Harness } from '../support/harness.js';

let h: Harness;
beforeEach(async () => {
  h = await startHarness({ upstream: true });
});
afterEach(async () => h?.close());

/** One write of `field` by editor-alice through the gateway, made from version `expected`. */
async function write(field: string, value: string, expected: number) {
  return (await decideLeaseWrite(h, 'editor-alice', { resource: 'wp:post:1024', payload: { [field]: value }, expected_version: expected }, { release: true })).answer;
}

describe('versions are per field (the README\'s example, row by row)', () => {
  it('a stale expected_version is accepted when the written fields did not change since it, refused when one did or when it is ahead', async () => {
    const rows = [
      await write('title', 'first title', 0),
      await write('body', 'first body', 1),
      await write('title', 'second title', 1),
      await write('body', 'stale body', 1),
      await write('title', 'from the future', 4),
    ];
    expect(rows.map((r) => r.status)).toEqual([201, 201, 201, 409, 409]);
    expect(rows.slice(0, 3).map((r) => r.body.receipt.final_version)).toEqual([1, 2, 3]);
    expect(rows[3]!.body).toMatchObject({ code: 'VERSION_CONFLICT', current_version: 3 });
    expect(rows[3]!.body.detail).toContain('changed since version 1 (now 3; changed: body)');
    expect(rows[4]!.body).toMatchObject({ code: 'VERSION_CONFLICT', current_version: 3 });
    const post = await upstreamGet(h, '/posts/1024');
    expect(post.revision).toBe(3);
    expect(post.fields).toMatchObject({ title: 'second title', body: 'first body' });
  });
});
