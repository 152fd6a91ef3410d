import type { FastifyInstance } from 'fastify';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { createSampleUpstream } from '../../src/upstream/index.js';

let app: FastifyInstance;
beforeEach(() => {
  app = createSampleUpstream({ dbFile: ':memory:', clock: new ManualClock() });
});
afterEach(async () => {
  await app.close();
});

function put(fields: Record<string, unknown>, ifMatch: number) {
  return app.inject({ method: 'PUT', url: '/posts/1', headers: { 'if-match': `"${ifMatch}"` }, payload: { fields } });
}
async function post(): Promise<Record<string, any>> {
  return (await app.inject({ method: 'GET', url: '/posts/1' })).json();
}

describe('sample upstream field-versioned revisions', () => {
  it('records per field the revision that last wrote it', async () => {
    await put({ title: 'T', body: 'B' }, 0);
    await put({ title: 'T2' }, 1);
    await app.inject({ method: 'POST', url: '/posts/1/merge', payload: { tags: { add: ['x'] } } });
    expect(await post()).toMatchObject({ revision: 3, field_revisions: { title: 2, body: 1, tags: 3 } });
  });

  it('lets two writers who read the same revision write different fields, both applied in turn', async () => {
    await put({ title: 'T', body: 'B', meta_description: 'M' }, 0);
    const a = await put({ title: 'by A' }, 1);
    const b = await put({ meta_description: 'by B' }, 1);
    expect([a.statusCode, a.headers.etag, b.statusCode, b.headers.etag]).toEqual([200, '"2"', 200, '"3"']);
    expect(await post()).toMatchObject({ revision: 3, fields: { title: 'by A', body: 'B', meta_description: 'by B' }, field_revisions: { title: 2, meta_description: 3, body: 1 } });
  });

  it('refuses a write of a field someone changed after the revision read, naming the changed fields', async () => {
    await put({ title: 'T', body: 'B' }, 0);
    await put({ title: 'by A', body: 'by A' }, 1);
    const blind = await put({ title: 'by B', body: 'by B', status: 'draft' }, 1);
    expect(blind.statusCode).toBe(412);
    expect(blind.headers.etag).toBe('"2"');
    expect(blind.json()).toMatchObject({ code: 'PRECONDITION_FAILED', current_revision: 2, changed_fields: ['body', 'title'] });
    expect((await post()).fields).toEqual({ title: 'by A', body: 'by A' });
    expect((await put({ title: 'by B' }, 2)).statusCode).toBe(200);
  });

  it('counts a rewrite with the same value as a change, and a tag merge as a change of tags', async () => {
    await put({ title: 'T', tags: ['a'] }, 0);
    await put({ title: 'T' }, 1);
    expect((await put({ title: 'U' }, 1)).json().changed_fields).toEqual(['title']);
    await app.inject({ method: 'POST', url: '/posts/1/merge', payload: { tags: { add: ['b'] } } });
    expect((await put({ tags: ['c'] }, 2)).json()).toMatchObject({ code: 'PRECONDITION_FAILED', current_revision: 3, changed_fields: ['tags'] });
  });

  it('refuses a revision ahead of the current one, with no changed fields', async () => {
    await put({ title: 'T' }, 0);
    const ahead = await put({ body: 'B' }, 5);
    expect(ahead.statusCode).toBe(412);
    expect(ahead.json()).toMatchObject({ current_revision: 1, changed_fields: [] });
    const missing = await app.inject({ method: 'PUT', url: '/posts/2', headers: { 'if-match': '"1"' }, payload: { fields: { title: 'x' } } });
    expect(missing.json()).toMatchObject({ code: 'PRECONDITION_FAILED', current_revision: 0, changed_fields: [] });
  });

  it('treats If-Match "0" as "read nothing": it creates, and on an existing post writes only fields never written', async () => {
    expect((await put({ title: 'T' }, 0)).statusCode).toBe(201);
    expect((await put({ title: 'again' }, 0)).json()).toMatchObject({ code: 'PRECONDITION_FAILED', current_revision: 1, changed_fields: ['title'] });
    const fresh = await put({ canonical: 'https://example.com/1' }, 0);
    expect([fresh.statusCode, fresh.json().revision]).toEqual([200, 2]);
  });

  it('still refuses a stale fencing epoch before looking at revisions', async () => {
    await app.inject({ method: 'PUT', url: '/posts/1', headers: { 'if-match': '"0"', 'writ-fencing-epoch': 'k=3' }, payload: { fields: { title: 'T' } } });
    const both = await app.inject({ method: 'PUT', url: '/posts/1', headers: { 'if-match': '"0"', 'writ-fencing-epoch': 'k=2' }, payload: { fields: { title: 'x' } } });
    expect(both.json().code).toBe('STALE_FENCING_EPOCH');
  });
});
