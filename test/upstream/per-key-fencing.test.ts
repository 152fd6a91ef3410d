import type { FastifyInstance } from 'fastify';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { createSampleUpstream, formatFencingEpochs, parseFencingEpochs } from '../../src/upstream/index.js';

const TITLE = 'wp:post:1024#title';
const BODY = 'wp:post:1024#body';
const SEO = 'domain:SEO_METADATA';

let app: FastifyInstance;
beforeEach(() => {
  app = createSampleUpstream({ dbFile: ':memory:', clock: new ManualClock() });
});
afterEach(async () => {
  await app.close();
});

let revision = 0;
async function put(fields: Record<string, unknown>, fencing: string) {
  const res = await app.inject({ method: 'PUT', url: '/posts/1024', headers: { 'if-match': `"${revision}"`, 'writ-fencing-epoch': fencing }, payload: { fields } });
  if (res.statusCode < 300) revision = res.json().revision;
  return res;
}
async function post(): Promise<Record<string, any>> {
  return (await app.inject({ method: 'GET', url: '/posts/1024' })).json();
}
beforeEach(() => {
  revision = 0;
});

describe('sample upstream fencing per coordination key', () => {
  it('remembers the highest accepted epoch per key and shows them, with fencing_epoch the highest of all', async () => {
    expect((await put({ title: 'a' }, `${TITLE}=5, ${SEO}=3`)).statusCode).toBe(201);
    expect((await put({ body: 'b' }, `${BODY}=2`)).statusCode).toBe(200);
    expect(await post()).toMatchObject({ fences: { [TITLE]: 5, [SEO]: 3, [BODY]: 2 }, fencing_epoch: 5 });
  });

  it('refuses a write whose epoch on one key is stale even when its other keys are fine, naming that key', async () => {
    await put({ title: 'a' }, `${TITLE}=5, ${SEO}=3`);
    const stale = await put({ title: 'late' }, `${TITLE}=6, ${SEO}=2`);
    expect(stale.statusCode).toBe(409);
    expect(stale.json()).toMatchObject({ code: 'STALE_FENCING_EPOCH', key: SEO, highest: 3 });
    expect((await post()).fields.title).toBe('a');
    // Refused, so the good key's epoch was not raised either.
    expect((await post()).fences).toEqual({ [TITLE]: 5, [SEO]: 3 });
  });

  it('accepts an equal epoch and keys it has never seen, and raises only the keys of accepted writes', async () => {
    await put({ title: 'a' }, `${TITLE}=5`);
    expect((await put({ title: 'same lease' }, `${TITLE}=5`)).statusCode).toBe(200);
    expect((await put({ body: 'new key' }, `${BODY}=1, ${TITLE}=5`)).statusCode).toBe(200);
    expect((await put({ title: 'x' }, `${TITLE}=4, ${SEO}=9`)).statusCode).toBe(409);
    expect((await post()).fences).toEqual({ [TITLE]: 5, [BODY]: 1 });
    expect((await put({ title: 'newer' }, `${TITLE}=7, ${SEO}=1`)).statusCode).toBe(200);
    expect((await post()).fences).toEqual({ [TITLE]: 7, [BODY]: 1, [SEO]: 1 });
  });

  it('fences keys independently: a low epoch on one key is no concern of another', async () => {
    await put({ title: 'a' }, `${TITLE}=50`);
    expect((await put({ body: 'b' }, `${BODY}=1`)).statusCode).toBe(200);
  });

  it('fences a whole-resource write by every field of it, and a field write by the whole resource (one family)', async () => {
    const WHOLE = 'wp:post:1024';
    // A field holder (epoch 6, granted after the whole lease 5 ended) wrote: the whole lease's late write is stale.
    expect((await put({ title: 'whole' }, `${WHOLE}=5`)).statusCode).toBe(201);
    expect((await put({ title: 'field' }, `${TITLE}=6`)).statusCode).toBe(200);
    expect((await put({ title: 'late whole' }, `${WHOLE}=5`)).json()).toMatchObject({ code: 'STALE_FENCING_EPOCH', key: WHOLE, highest: 6 });
    // A whole holder (epoch 8) wrote: the field lease 6's late write is stale, and so is a sibling's older one.
    expect((await put({ title: 'whole again' }, `${WHOLE}=8`)).statusCode).toBe(200);
    expect((await put({ title: 'late field' }, `${TITLE}=6`)).json()).toMatchObject({ code: 'STALE_FENCING_EPOCH', key: TITLE, highest: 8 });
    expect((await put({ body: 'late sibling' }, `${BODY}=7`)).json()).toMatchObject({ code: 'STALE_FENCING_EPOCH', key: BODY, highest: 8 });
    // Siblings do not fence each other: body 9 after title 10.
    expect((await put({ title: 't' }, `${TITLE}=10`)).statusCode).toBe(200);
    expect((await put({ body: 'b' }, `${BODY}=9`)).statusCode).toBe(200);
    expect((await post()).fields).toMatchObject({ title: 't', body: 'b' });
  });

  it('treats a bare number as the whole-post key *', async () => {
    await put({ title: 'a' }, '4');
    expect((await post()).fences).toEqual({ '*': 4 });
    expect((await put({ title: 'b' }, '*=3')).json()).toMatchObject({ code: 'STALE_FENCING_EPOCH', key: '*', highest: 4 });
    expect((await put({ title: 'b' }, '3')).statusCode).toBe(409);
    expect((await put({ title: 'c' }, `4`)).statusCode).toBe(200);
  });

  it('fences tag merges per key too', async () => {
    await put({ tags: ['a'] }, `${SEO}=3`);
    const merge = (fencing: string) => app.inject({ method: 'POST', url: '/posts/1024/merge', headers: { 'writ-fencing-epoch': fencing }, payload: { tags: { add: ['b'] } } });
    expect((await merge(`${SEO}=2`)).json()).toMatchObject({ code: 'STALE_FENCING_EPOCH', key: SEO, highest: 3 });
    expect((await merge(`${SEO}=3, ${TITLE}=1`)).statusCode).toBe(200);
    expect((await post()).fences).toEqual({ [SEO]: 3, [TITLE]: 1 });
  });

  it('refuses a malformed header with 400 and writes nothing', async () => {
    for (const bad of ['', '-1', 'x', `${TITLE}=`, `=5`, `${TITLE}=5,`, `${TITLE}=5, ${TITLE}=6`, `${TITLE}=1.5`, '5, 6', `${TITLE}=5; ${SEO}=3`, 'a b=1']) {
      const res = await put({ title: 'x' }, bad);
      expect([bad, res.statusCode, res.json().code]).toEqual([bad, 400, 'MALFORMED_REQUEST']);
    }
    expect((await app.inject({ method: 'GET', url: '/writes' })).json().total).toBe(0);
  });

  it('records the raw header in the history and the request log', async () => {
    const raw = `${TITLE}=5,${SEO}=3`;
    await put({ title: 'a' }, raw);
    const history = (await app.inject({ method: 'GET', url: '/posts/1024/history' })).json().revisions;
    expect(history[0]).toMatchObject({ fencing: raw, fencing_epoch: 5 });
    const requests = (await app.inject({ method: 'GET', url: '/requests?post=1024' })).json().requests;
    expect(requests[0].fencing_epoch).toBe(raw);
  });
});

describe('the Writ-Fencing-Epoch header', () => {
  it('splits each pair on its last "=", so keys may hold ":", "#" and "="', () => {
    expect(parseFencingEpochs(' wp:post:1#title = 5 , a=b=7 ')).toEqual({ 'wp:post:1#title': 5, 'a=b': 7 });
    expect(parseFencingEpochs('12')).toEqual({ '*': 12 });
    expect(parseFencingEpochs('__proto__=3')).toEqual(JSON.parse('{"__proto__":3}'));
    expect(parseFencingEpochs('a=1,')).toBeNull();
  });

  it('formats pairs sorted by key, and parses back what it formats', () => {
    const epochs = { [TITLE]: 5, [SEO]: 3, '*': 1 };
    expect(formatFencingEpochs(epochs)).toBe(`*=1, ${SEO}=3, ${TITLE}=5`);
    expect(parseFencingEpochs(formatFencingEpochs(epochs))).toEqual(epochs);
  });
});
