import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSampleUpstream } from '../../src/upstream/index.js';

let app: ReturnType<typeof createSampleUpstream>;
beforeAll(async () => {
  app = createSampleUpstream({ dbFile: ':memory:' });
  await app.ready();
});
afterAll(async () => app?.close());

const put = (id: string, deadline: number) =>
  app.inject({ method: 'PUT', url: `/posts/${id}`, headers: { 'if-match': '"0"', 'writ-deadline': String(deadline), 'writ-receipt-id': `r-${id}` }, payload: { fields: { title: 't' } } });

describe('Writ-Deadline: a write that arrives late is never applied', () => {
  it('refuses a write past its deadline with DEADLINE_PASSED and applies nothing', async () => {
    const late = await put('41', Date.now() - 1);
    expect(late.statusCode).toBe(409);
    expect(late.json().code).toBe('DEADLINE_PASSED');
    expect((await app.inject({ method: 'GET', url: '/posts/41' })).statusCode).toBe(404);
    expect((await app.inject({ method: 'GET', url: '/posts/41/writes/r-41' })).json()).toEqual({ applied: false });
  });
  it('applies a write before its deadline', async () => {
    const ok = await put('42', Date.now() + 60_000);
    expect(ok.statusCode).toBe(201);
  });
});
