/**
 * Two holders at once, tried with real processes: two `writ serve` processes share one store (one SQLite
 * file in one data directory, or one PostgreSQL database as two replicas); on each, clients over the lease stream and clients over HTTP (POST /v1/leases, DELETE
 * /v1/leases/{id}) contend for one key at once. Mid-run server A is killed with SIGKILL, with acquisitions
 * in flight, then started again on the same directory, and the clients go back to it. The clients run in
 * this test process, so every hold is timed on one clock.
 */
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/clock.js';
import { LeaseManager } from '../../src/lease/index.js';
import { LeaseStreamClosedError, WritApiError, WritClient, type LeaseStream } from '../../src/sdk/index.js';
import { openPostgresStore } from '../../src/store/postgres/index.js';
import { fixtureKey } from '../support/harness.js';
import { startServerProcess, twoServersOnOneStore, type ServerProcess } from '../support/server-process.js';
import { until } from '../support/wait.js';
import { observer } from '../lease/fixtures/in-process.js';

const servers: ServerProcess[] = [];
const streams: LeaseStream[] = [];
const drops: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const s of streams) await Promise.race([s.close(), new Promise((r) => setTimeout(r, 1_000))]).catch(() => undefined);
  for (const s of servers) await s.stop().catch(() => undefined);
  for (const s of servers) rmSync(s.dataDir, { recursive: true, force: true });
  for (const d of drops) await d().catch(() => undefined);
});

const PRINCIPALS = ['seo-agent-7', 'editor-alice'];
const TTL_MS = 1_500;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Hold {
  who: string;
  epoch: number;
  lease_id: string;
  t1: number;
  t2: number | null;
}

describe.each(['sqlite', 'postgres'] as const)('one key, lease streams and HTTP on two server processes, one of them killed -9 and restarted [%s]', (engine) => {
  it('never two holders at once, every epoch granted once and in grant order, and the restarted server continues above every epoch', { timeout: 90_000 }, async () => {
    // The decisions are asked once, up front, and the run may go on past their default 30 s (see KINDS below).
    const { a, b, env } = await twoServersOnOneStore(engine, 'writ_mixed', { servers, drops }, { WRIT_DECISION_TTL_MS: '600000' });
    const urls: Record<'A' | 'B', string> = { A: a.url, B: b.url };

    const decisions: Record<string, string> = {};
    for (const p of PRINCIPALS) {
      const d = await new WritClient({ baseUrl: b.url, principal: p, privateJwk: fixtureKey(p) }).decide({ action: 'update_post', resource: 'wp:post:1', environment: 'production', fields: ['title'] });
      decisions[p] = d.token!;
    }

    const holds: Hold[] = [];
    const counts: Record<string, number> = {};
    const unexpected: string[] = [];
    const phase = { aDown: false, stop: false };
    let key = '';

    // transport: 'stream' | 'http'; server: which process it talks to (A's clients wait while A is down, then reconnect).
    const run = async (n: number, transport: 'stream' | 'http', server: 'A' | 'B') => {
      // Each kind of client (stream, HTTP; A, B) has one client of each principal: the queue serves by governed
      // priority, and editor-alice (a human) comes before seo-agent-7 (an agent), so a kind made of agents
      // alone could wait all run long behind the other kinds (as every stream client did when n % 2 chose).
      const principal = PRINCIPALS[Math.floor(n / 2) % PRINCIPALS.length]!;
      const who = `${server}${transport}${n}`;
      let stream: LeaseStream | null = null;
      while (!phase.stop) {
        if (server === 'A' && phase.aDown) {
          stream = null;
          await sleep(20);
          continue;
        }
        const client = new WritClient({ baseUrl: urls[server], principal, privateJwk: fixtureKey(principal) });
        let hold: Hold | undefined;
        try {
          if (transport === 'stream' && stream === null) {
            stream = await client.openLeaseStream();
            streams.push(stream);
          }
          const g = stream ? await stream.acquire([decisions[principal]!], { ttlMs: TTL_MS, waitMs: 100 }) : await client.acquireLease([decisions[principal]!], { ttlMs: TTL_MS, waitMs: 100 });
          key = g.keys[0]!;
          hold = { who, epoch: g.epochs[key]!, lease_id: g.lease_id, t1: Date.now(), t2: null };
          holds.push(hold);
          await sleep(1 + Math.random() * 4);
          hold.t2 = Date.now();
          if (stream) await stream.release(g);
          else await client.releaseLease(g);
        } catch (e) {
          const code = e instanceof WritApiError ? e.code : e instanceof LeaseStreamClosedError ? `closed ${e.closeCode}` : (e as Error).name;
          counts[`${server} ${transport} ${code}`] = (counts[`${server} ${transport} ${code}`] ?? 0) + 1;
          const busy = e instanceof WritApiError && (e.code === 'RESOURCE_BUSY' || e.code === 'LEASE_WAIT_TIMEOUT');
          // A lease released after the holder's TTL ran out (a loaded machine) is LEASE_EXPIRED: its hold ended at t2 all the same.
          const lapsed = e instanceof WritApiError && e.code === 'LEASE_EXPIRED' && hold !== undefined;
          if (!busy && !lapsed && !(server === 'A' && phase.aDown)) unexpected.push(`${who}: ${code}: ${(e as Error).message}`);
          if (e instanceof LeaseStreamClosedError || !(e instanceof WritApiError)) stream = null;
          await sleep(Math.random() * 3);
        }
      }
    };

    const runs = [
      run(0, 'stream', 'A'), run(1, 'http', 'A'), run(2, 'stream', 'A'), run(3, 'http', 'A'),
      run(4, 'stream', 'B'), run(5, 'http', 'B'), run(6, 'stream', 'B'), run(7, 'http', 'B'),
    ];
    // Eight clients contend for one key with short waits: on a loaded machine one kind can go seconds
    // without a grant, so the run goes on until each kind has held the key (bounded), then A is killed.
    const KINDS = ['Astream', 'Ahttp', 'Bstream', 'Bhttp'];
    await sleep(3_000);
    await until('a hold by each kind of client before the kill', () => KINDS.every((k) => holds.some((h) => h.who.startsWith(k))), 30_000, 50);
    phase.aDown = true;
    const killedAt = Date.now();
    await a.kill9();
    // The store is left as SIGKILL left it; A's last lease lapses at its TTL while B carries on.
    await sleep(TTL_MS + 500);
    const a2 = await startServerProcess({ dataDir: a.dataDir, env });
    servers.push(a2);
    urls.A = a2.url;
    const restartedAt = Date.now();
    phase.aDown = false;
    await sleep(3_000);
    await until('a hold granted by the restarted A', () => holds.some((h) => h.who.startsWith('A') && h.t1 > restartedAt), 30_000, 50);
    phase.stop = true;
    await Promise.all(runs);

    console.log(`mixed lease clients on two processes [${engine}]: ${holds.length} holds; ${JSON.stringify(counts)}`);
    expect(unexpected, JSON.stringify(counts)).toEqual([]);
    const holdsOf = (p: string) => holds.filter((h) => h.who.startsWith(p));
    for (const p of KINDS) expect(holdsOf(p).length, p).toBeGreaterThan(0);

    const epochs = holds.map((h) => h.epoch);
    expect(new Set(epochs).size, 'an epoch granted twice').toBe(epochs.length);
    const byGrant = [...holds].sort((x, y) => x.t1 - y.t1 || x.epoch - y.epoch);
    expect(byGrant.slice(1).filter((h, i) => h.epoch <= byGrant[i]!.epoch), 'epochs out of grant order').toEqual([]);
    const byEpoch = [...holds].sort((x, y) => x.epoch - y.epoch);
    const overlaps = byEpoch.slice(1).flatMap((h, i) => {
      const prev = byEpoch[i]!;
      return prev.t2 !== null && h.t1 < prev.t2 ? [`${prev.who} ${prev.epoch} [${prev.t1}, ${prev.t2}] and ${h.who} ${h.epoch} from ${h.t1}`] : [];
    });
    expect(overlaps, 'two holders at once').toEqual([]);
    // The restarted A granted, above every epoch granted before the kill.
    const beforeKill = Math.max(...holds.filter((h) => h.t1 <= killedAt).map((h) => h.epoch));
    const byA2 = holds.filter((h) => h.who.startsWith('A') && h.t1 > restartedAt);
    expect(byA2.length).toBeGreaterThan(0);
    for (const h of byA2) expect(h.epoch).toBeGreaterThan(beforeKill);

    // The store's history agrees: every grant is there with its epoch, and ACQUIRE epochs run 1, 2, … without a gap or a repeat.
    const pg = engine === 'postgres' ? await openPostgresStore(env.WRIT_DATABASE_URL!) : null;
    const { db, leases } = pg ? { db: { close: () => void pg.close() }, leases: new LeaseManager(pg, systemClock) } : observer(join(a.dataDir, 'writ.sqlite'));
    try {
      const history = await leases.history({ key });
      const acquired = new Map(history.filter((e) => e.event === 'ACQUIRE').map((e) => [e.lease_id, e.epoch]));
      for (const h of holds) expect(acquired.get(h.lease_id), h.lease_id).toBe(h.epoch);
      const acquireEpochs = history.filter((e) => e.event === 'ACQUIRE').map((e) => e.epoch);
      expect(acquireEpochs).toEqual(Array.from({ length: acquireEpochs.length }, (_, i) => i + 1));
    } finally {
      db.close();
    }
  });
});
