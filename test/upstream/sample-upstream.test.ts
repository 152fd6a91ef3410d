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

function put(id: string, fields: Record<string, unknown>, headers: Record<string, string> = {}) {
  return app.inject({ method: 'PUT', url: `/posts/${id}`, headers, payload: { fields } });
}
async function json<T = Record<string, any>>(url: string): Promise<T> {
  return (await app.inject({ method: 'GET', url })).json() as T;
}

describe('sample upstream', () => {
  it('says it is the sample upstream on every response', async () => {
    const res = await app.inject({ method: 'GET', url: '/posts/1' });
    expect(res.statusCode).toBe(404);
    expect(res.headers['x-sample-upstream']).toBe('writ');
  });

  it('creates a post with If-Match "0" and serves it with its revision as ETag', async () => {
    const created = await put('100', { title: 'Hello', tags: ['a'] }, { 'if-match': '"0"', 'writ-principal': 'seo-agent-7', 'writ-fencing-epoch': '3' });
    expect(created.statusCode).toBe(201);
    expect(created.headers.etag).toBe('"1"');
    const got = await app.inject({ method: 'GET', url: '/posts/100' });
    expect(got.headers.etag).toBe('"1"');
    expect(got.json()).toMatchObject({ id: '100', revision: 1, fields: { title: 'Hello', tags: ['a'] }, updated_by: 'seo-agent-7', fencing_epoch: 3 });
  });

  it('refuses a write without If-Match (428) and with a stale one (412), changing nothing', async () => {
    await put('100', { title: 'v1' }, { 'if-match': '"0"' });
    const missing = await put('100', { title: 'blind' });
    expect(missing.statusCode).toBe(428);
    expect(missing.json().code).toBe('PRECONDITION_REQUIRED');
    await put('100', { title: 'v2' }, { 'if-match': '"1"' });
    const stale = await put('100', { title: 'lost update' }, { 'if-match': '"1"' });
    expect(stale.statusCode).toBe(412);
    expect(stale.json()).toMatchObject({ code: 'PRECONDITION_FAILED', current_revision: 2, changed_fields: ['title'] });
    const creatingOverExisting = await put('100', { title: 'again' }, { 'if-match': '"0"' });
    expect(creatingOverExisting.statusCode).toBe(412);
    expect((await json('/posts/100')).fields.title).toBe('v2');
    expect((await json('/writes')).per_post).toEqual({ '100': 2 });
  });

  it('applies partial updates: fields not sent keep their values', async () => {
    await put('7', { title: 'T', body: 'B' }, { 'if-match': '"0"' });
    await put('7', { meta_description: 'M' }, { 'if-match': '"1"' });
    expect((await json('/posts/7')).fields).toEqual({ title: 'T', body: 'B', meta_description: 'M' });
  });

  it('refuses a fencing epoch lower than the highest accepted one (409), accepts equal and higher', async () => {
    await put('100', { title: 'by B' }, { 'if-match': '"0"', 'writ-fencing-epoch': '5' });
    const sameLease = await put('100', { body: 'still B' }, { 'if-match': '"1"', 'writ-fencing-epoch': '5' });
    expect(sameLease.statusCode).toBe(200);
    const stale = await put('100', { title: 'by A' }, { 'if-match': '"2"', 'writ-fencing-epoch': '4' });
    expect(stale.statusCode).toBe(409);
    expect(stale.json()).toMatchObject({ code: 'STALE_FENCING_EPOCH', key: '*', highest: 5 });
    const newer = await put('100', { title: 'by C' }, { 'if-match': '"2"', 'writ-fencing-epoch': '6' });
    expect(newer.statusCode).toBe(200);
    expect((await json('/posts/100')).fencing_epoch).toBe(6);
  });

  it('checks the fence before the revision, and a refused write does not raise the remembered epoch', async () => {
    await put('1', { title: 'x' }, { 'if-match': '"0"', 'writ-fencing-epoch': '2' });
    const staleAndWrongRevision = await put('1', { title: 'y' }, { 'if-match': '"9"', 'writ-fencing-epoch': '1' });
    expect(staleAndWrongRevision.statusCode).toBe(409);
    const higherButWrongRevision = await put('1', { title: 'y' }, { 'if-match': '"9"', 'writ-fencing-epoch': '8' });
    expect(higherButWrongRevision.statusCode).toBe(412);
    expect((await json('/posts/1')).fencing_epoch).toBe(2);
  });

  it('keeps a history that shows who wrote each revision under which epoch, and no refused write', async () => {
    await put('100', { title: 'n+1' }, { 'if-match': '"0"', 'writ-fencing-epoch': '2', 'writ-principal': 'B', 'writ-receipt-id': 'r-b' });
    await put('100', { title: 'n' }, { 'if-match': '"1"', 'writ-fencing-epoch': '1', 'writ-principal': 'A', 'writ-receipt-id': 'r-a' });
    const history = await json<{ revisions: { revision: number; written_by: string; fencing_epoch: number; fencing: string; receipt_id: string; fields: any }[] }>('/posts/100/history');
    expect(history.revisions).toHaveLength(1);
    expect(history.revisions[0]).toMatchObject({ revision: 1, written_by: 'B', fencing_epoch: 2, fencing: '2', receipt_id: 'r-b', fields: { title: 'n+1' } });
    expect(history.revisions.some((r) => r.written_by === 'A')).toBe(false);
  });

  it('logs every request received, refused ones included, but not its own inspection endpoints', async () => {
    await put('100', { title: 'x' }, { 'if-match': '"0"', 'writ-fencing-epoch': '2', 'writ-principal': 'B' });
    await put('100', { title: 'y' }, { 'if-match': '"1"', 'writ-fencing-epoch': '1', 'writ-principal': 'A' });
    await app.inject({ method: 'GET', url: '/posts/100' });
    await json('/writes');
    const { requests } = await json<{ requests: { method: string; post_id: string; status: number; code: string | null; principal: string }[] }>('/requests');
    expect(requests.map((r) => [r.method, r.post_id, r.status, r.code, r.principal])).toEqual([
      ['PUT', '100', 201, null, 'B'],
      ['PUT', '100', 409, 'STALE_FENCING_EPOCH', 'A'],
      ['GET', '100', 200, null, null],
    ]);
    expect((await json('/requests?post=200')).requests).toEqual([]);
  });

  it('finds a write by its receipt id, and answers a repeated receipt id without writing again', async () => {
    await put('5', { title: 'x' }, { 'if-match': '"0"', 'writ-receipt-id': 'rcpt_1' });
    await put('5', { title: 'y' }, { 'if-match': '"1"', 'writ-receipt-id': 'rcpt_2' });
    expect(await json('/posts/5/writes/rcpt_1')).toEqual({ applied: true, revision: 1 });
    expect(await json('/posts/5/writes/rcpt_2')).toEqual({ applied: true, revision: 2 });
    expect(await json('/posts/5/writes/rcpt_3')).toEqual({ applied: false });
    expect(await json('/posts/6/writes/rcpt_1')).toEqual({ applied: false });
    const retry = await put('5', { title: 'x' }, { 'if-match': '"0"', 'writ-receipt-id': 'rcpt_1' });
    expect(retry.statusCode).toBe(200);
    expect(retry.headers['writ-replayed']).toBe('true');
    expect(retry.json()).toMatchObject({ revision: 1, current_revision: 2, replayed: true });
    expect((await json('/writes')).total).toBe(2);
  });

  it('refuses unknown fields, wrong types and malformed headers with 400, changing nothing', async () => {
    expect((await put('1', { author: 'me' }, { 'if-match': '"0"' })).statusCode).toBe(400);
    expect((await put('1', { tags: 'a,b' }, { 'if-match': '"0"' })).statusCode).toBe(400);
    expect((await put('1', { title: 'x' }, { 'if-match': 'W/"0"' })).statusCode).toBe(400);
    expect((await put('1', { title: 'x' }, { 'if-match': '"0"', 'writ-fencing-epoch': '-1' })).statusCode).toBe(400);
    expect((await put('1', { title: 'x' }, { 'if-match': '"0"' })).statusCode).toBe(201);
    expect((await json('/writes')).total).toBe(1);
  });

  it('merges tags without a revision precondition, still fenced', async () => {
    await put('9', { tags: ['a', 'b'] }, { 'if-match': '"0"', 'writ-fencing-epoch': '3' });
    const merged = await app.inject({ method: 'POST', url: '/posts/9/merge', payload: { tags: { add: ['c', 'a'], remove: ['b'] } } });
    expect(merged.statusCode).toBe(200);
    expect(merged.json()).toMatchObject({ revision: 2, fields: { tags: ['a', 'c'] } });
    const stale = await app.inject({ method: 'POST', url: '/posts/9/merge', headers: { 'writ-fencing-epoch': '2' }, payload: { tags: { add: ['z'] } } });
    expect(stale.statusCode).toBe(409);
  });
});
