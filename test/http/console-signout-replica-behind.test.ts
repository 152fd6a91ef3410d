import { afterEach, describe, expect, it } from 'vitest';
import { createTestDatabase } from '../../scripts/test-database.js';
import { ManualClock } from '../../src/clock.js';
import { GOVERNANCE_ID } from '../../src/graph/model.js';
import { issueLoginToken } from '../../src/service/index.js';
import { sql } from '../store/conformance/engines.js';
import { startHarness, type Harness } from '../support/harness.js';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/**
 * A console session is signed out by spending its id until the session's expiry; on PostgreSQL that spend
 * is live until the expiry by the database's clock. A replica whose clock is behind the database's by more
 * than the session's remaining life found the spend gone (expired by the database's clock) while the
 * session was still live by its own, and honoured the signed-out cookie for up to that gap. Now the
 * session check reads the database's clock in the statement it already ran: a session expired by it is
 * refused, saying the replica's clock is behind; a signed-out one is refused on every replica.
 */
describe('PostgreSQL: a console session signed out, on a replica whose clock is behind the database\'s by more than its remaining life', () => {
  it('is refused, and so is a session expired by the database\'s clock, saying this replica\'s clock is behind', { timeout: 60_000 }, async () => {
    const db = await createTestDatabase('writ_console_clock');
    cleanups.push(db.drop);
    const clock = new ManualClock(Date.now());
    const h: Harness = await startHarness({ databaseUrl: db.url, clock });
    cleanups.push(() => h.close());
    // The database's clock made settable: writ_now_ms() plus an offset, as if time passed for the database
    // (and every replica on NTP) while this replica's clock stood still.
    await sql(db.url, `CREATE TABLE test_clock_offset (ms bigint NOT NULL); INSERT INTO test_clock_offset VALUES (0);
      CREATE OR REPLACE FUNCTION writ_now_ms() RETURNS bigint LANGUAGE sql VOLATILE
        AS $$ SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint + (SELECT ms FROM test_clock_offset) $$`);

    const signIn = async () => {
      const { token } = await issueLoginToken(h.ctx, GOVERNANCE_ID);
      const r = await h.call(null, { method: 'POST', url: '/v1/console/session', payload: { token } });
      expect(r.status, r.raw).toBe(201);
      return { cookie: String(r.headers['set-cookie']).split(';')[0]! };
    };
    const session = (headers: Record<string, string>) => h.call(null, { method: 'GET', url: '/v1/console/session', headers });

    const signedOut = await signIn();
    const kept = await signIn();
    expect((await h.call(null, { method: 'DELETE', url: '/v1/console/session', headers: signedOut })).status).toBe(200);
    expect((await session(signedOut)).body).toMatchObject({ code: 'UNAUTHENTICATED', detail: 'console session was signed out' });
    expect((await session(kept)).status).toBe(200);

    // 31 minutes pass for the database; this replica's clock moves one: 30 minutes behind, and both
    // sessions (30 min) are still live by it.
    await sql(db.url, 'UPDATE test_clock_offset SET ms = $1', [31 * 60_000]);
    clock.set(clock.now() + 60_000);
    for (const cookie of [signedOut, kept]) {
      const r = await session(cookie);
      expect(r.status, r.raw).toBe(401);
      expect(r.body.code).toBe('UNAUTHENTICATED');
      expect(r.body.detail).toMatch(/^console session expired by the database's clock: it was good until \S+, \d+\.\d s before the database's time \S+, while this replica's clock said \S+, 1[78]\d\d\.\d s behind the database's\. .*set this replica's clock right \(NTP\).*; sign in again with a link from `writ console`$/);
      expect(r.body.clock_offset_ms).toBeLessThan(-1_700_000);
      // Nothing else is read with it either.
      expect((await h.call(null, { method: 'GET', url: '/v1/receipts', headers: cookie })).status).toBe(401);
    }
  });
});
