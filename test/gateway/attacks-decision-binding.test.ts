import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { act, decideOk, snapshot } from '../support/agent.js';
import { startHarness, type Harness } from '../support/harness.js';

let h: Harness;
beforeEach(async () => {
  h = await startHarness({ upstream: true });
});
afterEach(async () => h?.close());

const meta = { resource: 'wp:post:1024', fields: ['meta_description'], payload: { meta_description: 'm' }, expected_version: 0 };

/** A write refused with `code` (REJECTED receipt), nothing forwarded, no lease changed; the decision stays unspent. */
async function refused(body: Record<string, unknown>, decision: string, code: string) {
  const before = await snapshot(h);
  const r = await h.call('seo-agent-7', { method: 'POST', url: '/v1/actions', payload: { action: 'update_post', ...body }, headers: { 'writ-decision': decision } });
  expect(r.body.code, `${JSON.stringify(body)}: ${r.raw}`).toBe(code);
  expect(await snapshot(h)).toEqual(before);
}

describe('a decision is used only for the resource, fields and environment it was made for', () => {
  it('another environment in the body (a case or whitespace variant too) → DECISION_MISMATCH', async () => {
    const d = await decideOk(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['meta_description'] });
    for (const environment of ['staging', 'Production', 'production ', 'prod']) await refused({ ...meta, environment }, d.token, 'DECISION_MISMATCH');
    // Unspent by the refusals: it still writes, once.
    expect((await act(h, 'seo-agent-7', meta, { decision: d.token })).status).toBe(201);
  });

  it('resource key variants (case, percent-encoding, a Cyrillic lookalike, fullwidth digits, a trailing or extra segment, whitespace, a field in the key) are not the decided key', async () => {
    const d = await decideOk(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['meta_description'] });
    const cases: [string, string][] = [
      ['WP:POST:1024', 'UNKNOWN_RESOURCE'],
      ['wp:p\u043est:1024', 'UNKNOWN_RESOURCE'],
      ['wp:post:%31024', 'DECISION_MISMATCH'],
      ['wp:post:１０２４', 'DECISION_MISMATCH'],
      ['wp:post:01024', 'DECISION_MISMATCH'],
      ['wp:post:1024:', 'UNPROCESSABLE'],
      ['wp:post:1024:x', 'UNKNOWN_RESOURCE'],
      ['wp:post::1024', 'UNPROCESSABLE'],
      ['wp:post:1024 ', 'UNPROCESSABLE'],
      ['wp:post:1024#title', 'UNPROCESSABLE'],
      ['wp:post:*', 'UNPROCESSABLE'],
      ['wp:post:..', 'DECISION_MISMATCH'],
    ];
    for (const [resource, code] of cases) await refused({ ...meta, resource }, d.token, code);
    // An alias of the decided key is the decided key.
    expect((await act(h, 'seo-agent-7', { ...meta, resource: 'wordpress:article:1024' }, { decision: d.token })).status).toBe(201);
  });

  it('fields beyond the decision, a case variant of a decided field, or a decided field left out → DECISION_MISMATCH (a repeated field is the same set)', async () => {
    const d = await decideOk(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['meta_description'] });
    await refused({ ...meta, fields: ['meta_description', 'title'], payload: { meta_description: 'm', title: 't' } }, d.token, 'DECISION_MISMATCH');
    await refused({ ...meta, fields: ['Meta_description'], payload: { Meta_description: 'm' } }, d.token, 'DECISION_MISMATCH');
    await refused({ ...meta, fields: [], payload: {} }, d.token, 'DECISION_MISMATCH');
    const r = await act(h, 'seo-agent-7', { ...meta, fields: ['meta_description', 'meta_description'] }, { decision: d.token });
    expect(r.status, r.raw).toBe(201);
  });

  it('a variant of a field cannot be decided at all (wp:post closes its fields): no decision that would dodge the field\'s lease key', async () => {
    for (const fields of [['Title'], ['title '], ['TITLE'], ['title', 'Title'], ['__proto__'], ['constructor']]) {
      const r = await h.call('editor-alice', { method: 'POST', url: '/v1/decisions', payload: { action: 'update_post', environment: 'production', resource: 'wp:post:1024', fields } });
      expect(r.body.code, JSON.stringify(fields)).toBe('UNPROCESSABLE');
    }
  });
});
