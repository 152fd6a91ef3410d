import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCallerAssertion, newLeaseToken, WritClient } from '../../src/sdk/index.js';
import { createTestDatabase } from '../store/conformance/engines.js';
import { fixtureKey } from '../support/harness.js';
import { startServerProcess, type ServerProcess } from '../support/server-process.js';

/**
 * Twins: two POST /v1/leases with one caller token in flight at once, as an SDK's retry after a lost
 * answer races its original that is still under way (on PostgreSQL maybe on another replica). Each
 * pair must give exactly one 201 (the lease granted) and one 200 (replayed: the same lease id and
 * epochs, Idempotent-Replayed), never RESOURCE_BUSY naming the lease itself as holder. Real `writ
 * serve` processes, each engine: SQLite serializes the two; on PostgreSQL both could pass the check
 * that the token is unused before either committed (migration 11).
 */
const PRINCIPAL = 'editor-alice';
const PAIRS = 40;
const ENGINES = [
  { name: 'SQLite, one writ serve', replicas: 1, database: async () => null },
  { name: 'PostgreSQL, two replicas on one database', replicas: 2, database: async () => createTestDatabase('writ_lease_twins') },
];

interface Answer { status: number; replayed: string | null; body: Record<string, any> }

async function postLease(url: string, decision: string, token: string, waitMs?: number): Promise<Answer> {
  const assertion = await createCallerAssertion({ principal: PRINCIPAL, privateJwk: fixtureKey(PRINCIPAL) });
  const res = await fetch(`${url}/v1/leases`, {
    method: 'POST',
    headers: { authorization: `Bearer ${assertion}`, 'content-type': 'application/json' },
    body: JSON.stringify({ decisions: [decision], ttl_ms: 30_000, token, ...(waitMs === undefined ? {} : { wait_ms: waitMs }) }),
  });
  return { status: res.status, replayed: res.headers.get('idempotent-replayed'), body: (await res.json()) as Record<string, any> };
}

describe.each(ENGINES)('lease acquisitions with one token in flight at once, on $name', ({ replicas, database }) => {
  const servers: ServerProcess[] = [];
  const cleanups: (() => Promise<void> | void)[] = [];
  beforeAll(async () => {
    const db = await database();
    if (db) cleanups.push(db.drop);
    const work = mkdtempSync(join(tmpdir(), 'writ-twins-'));
    cleanups.push(() => rmSync(work, { recursive: true, force: true }));
    // Round 2 keeps 2 × PAIRS acquisitions of one principal waiting at once, past the default bound (16).
    const env: Record<string, string> = { WRIT_LEASE_MAX_WAITERS_PER_PRINCIPAL: String(4 * PAIRS), ...(db ? { WRIT_DATABASE_URL: db.url } : {}) };
    servers.push(await startServerProcess({ dataDir: join(work, 'data0'), env }));
    for (let i = 1; i < replicas; i++) {
      // Another replica: its own data directory with the first one's keys/ and admin.jwk (as README says).
      const dir = join(work, `data${i}`);
      cpSync(join(servers[0]!.dataDir, 'keys'), join(dir, 'keys'), { recursive: true });
      cpSync(join(servers[0]!.dataDir, 'admin.jwk'), join(dir, 'admin.jwk'));
      servers.push(await startServerProcess({ dataDir: dir, env }));
    }
  }, 120_000);
  afterAll(async () => {
    for (const s of servers.splice(0).reverse()) await s.stop();
    for (const c of cleanups.splice(0).reverse()) await c();
  });

  it(`${PAIRS} pairs on fresh keys, on the same keys released, then waiting for them: each pair is one 201 and one 200 replay of that lease, never RESOURCE_BUSY`, { timeout: 120_000 }, async () => {
    const client = new WritClient({ baseUrl: servers[0]!.url, principal: PRINCIPAL, privateJwk: fixtureKey(PRINCIPAL) });
    const posts = Array.from({ length: PAIRS }, (_, i) => 7_000 + i);
    const wrong: string[] = [];
    const epochs: number[] = [];
    // Round 0: keys never leased (a new key row); round 1: the same keys, released (the key row taken over);
    // round 2: the same keys held by another lease, both twins waiting in the queue (wait_ms) until it is released.
    for (const round of [0, 1, 2]) {
      // Decisions first (a lease spends none, so both twins present the same one), then the pairs all at once.
      const decisions = await Promise.all(posts.map(async (post) => {
        const d = await client.decide({ action: 'update_post', resource: `wp:post:${post}`, environment: 'production', fields: ['title'] });
        expect(d.allow, d.reasons.join('; ')).toBe(true);
        return d.token!;
      }));
      const blockers = round === 2 ? await Promise.all(decisions.map((d) => client.acquireLease([d], { ttlMs: 30_000 }))) : [];
      const waitMs = round === 2 ? 20_000 : undefined;
      const sent = Promise.all(decisions.map(async (decision, i) => {
        const token = newLeaseToken();
        // On two replicas the twins go to different ones in every other pair, and to the same one otherwise.
        const [a, b] = [servers[0]!, servers[(i % 2) % servers.length]!];
        return { token, answers: await Promise.all([postLease(a.url, decision, token, waitMs), postLease(b.url, decision, token, waitMs)]) };
      }));
      if (round === 2) {
        await new Promise((r) => setTimeout(r, 500));
        for (const blocker of blockers) await client.releaseLease(blocker);
      }
      const pairs = await sent;
      for (const [i, { token, answers }] of pairs.entries()) {
        const key = `wp:post:${posts[i]}#title`;
        const granted = answers.find((a) => a.status === 201);
        // Released after each pair (also a wrong one), so that the next round finds the key free.
        if (granted) await client.releaseLease({ lease_id: granted.body.lease_id, token });
        if (answers.map((a) => a.status).sort().join() !== '200,201' || !granted) {
          wrong.push(`round ${round} ${key}: ${answers.map((a) => `${a.status} ${a.body.code ?? ''} ${a.body.detail ?? ''}`).join(' | ')}`);
          continue;
        }
        const replayed = answers.find((a) => a.status === 200)!;
        expect(granted.body).toMatchObject({ token, replayed: false, keys: [key], holder: PRINCIPAL, epochs: { [key]: [1, 2, 4][round]! } });
        expect(granted.replayed).toBeNull();
        expect(replayed.replayed).toBe('true');
        expect(replayed.body).toMatchObject({ lease_id: granted.body.lease_id, token, replayed: true, epochs: granted.body.epochs, expires_at: granted.body.expires_at });
        epochs.push(granted.body.epochs[key]);
      }
    }
    expect(wrong).toEqual([]);
    // Round 2's blockers took epoch 3.
    expect(epochs).toEqual([...posts.map(() => 1), ...posts.map(() => 2), ...posts.map(() => 4)]);
  });
});
