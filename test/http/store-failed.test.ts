import { fdatasync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import type { SyncFn } from '../../src/store/sqlite/wal-sync.js';
import { startHarness, type Harness } from '../support/harness.js';

const harnesses: Harness[] = [];
afterAll(async () => {
  for (const h of harnesses) await h.close().catch(() => {});
});

const DECISION = { action: 'update_post', resource: 'wp:post:1024', environment: 'production', fields: ['title'] };

describe('a store whose WAL sync fails (EIO)', () => {
  it('answers the request whose commit it was 503 STORE_FAILED with no decision, and every later request that touches the store too', async () => {
    let failing = false;
    const sync: SyncFn = (fd, done) => (failing ? setImmediate(() => done(Object.assign(new Error('EIO: i/o error, fdatasync'), { code: 'EIO' }))) : fdatasync(fd, done));
    const h = await startHarness({ sync });
    harnesses.push(h);
    const ok = await h.call('seo-agent-7', { method: 'POST', url: '/v1/decisions', payload: DECISION });
    expect(ok.status).toBe(200);
    expect(ok.body.token).toEqual(expect.any(String));

    failing = true;
    const refused = await h.call('seo-agent-7', { method: 'POST', url: '/v1/decisions', payload: DECISION });
    expect(refused.status).toBe(503);
    expect(refused.body).toMatchObject({ code: 'STORE_FAILED' });
    expect(refused.body.token).toBeUndefined();
    expect(refused.body.detail).toMatch(/EIO/);

    failing = false; // a later sync that would succeed changes nothing: the process refuses until restarted
    const after = await h.call('seo-agent-7', { method: 'POST', url: '/v1/decisions', payload: DECISION });
    expect(after.body).toMatchObject({ code: 'STORE_FAILED' });
    const lease = await h.call('seo-agent-7', { method: 'POST', url: '/v1/leases', payload: { decisions: [ok.body.token] } });
    expect(lease.body).toMatchObject({ code: 'STORE_FAILED' });
  });
});
