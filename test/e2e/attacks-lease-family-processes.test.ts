/**
 * A resource and its fields, tried with real processes: two `writ serve` processes share one store (one
 * SQLite file, or one PostgreSQL database as two replicas); on each, clients over the lease stream and over
 * HTTP race whole-resource leases (`deploy:site:www`, fields []) against field leases (`deploy:site:www#config`,
 * `#env`) of the one resource. The store's history must show that the resource's key and a field's key were
 * never held by two leases at once (src/wire/key-family.ts), while the two fields were (siblings run in
 * parallel), and that the family's grants took increasing epochs. As attacks-lease-mixed-processes, without
 * the kill. The clients run in this test process, so every hold is timed on one clock too.
 */
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/clock.js';
import { LeaseManager, type LeaseEvent } from '../../src/lease/index.js';
import { LeaseStreamClosedError, WritApiError, WritClient, type LeaseStream } from '../../src/sdk/index.js';
import { openPostgresStore } from '../../src/store/postgres/index.js';
import { keysConflict } from '../../src/wire/key-family.js';
import { fixtureKey } from '../support/harness.js';
import { twoServersOnOneStore, type ServerProcess } from '../support/server-process.js';
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

const RESOURCE = 'deploy:site:www';
const TTL_MS = 3_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** What each client leases: the whole resource, or one field, as one of two principals. */
const WANTS = {
  whole: { principal: 'release-controller', fields: [] as string[] },
  config: { principal: 'incident-commander', fields: ['config'] },
  env: { principal: 'release-controller', fields: ['env'] },
};
type Want = keyof typeof WANTS;

interface Hold {
  who: string;
  key: string;
  t1: number;
  t2: number | null;
}

/**
 * Replays the history in order: at each ACQUIRE, a key related to it (or itself) still held by another
 * lease — acquired, not yet released, preempted or expired, and within its TTL at the acquisition's time —
 * is a violation.
 */
function overlapsInHistory(history: LeaseEvent[]): string[] {
  const open = new Map<string, { lease_id: string; until: number; seq: number }>();
  const found: string[] = [];
  for (const e of history) {
    if (e.event === 'ACQUIRE') {
      for (const [key, o] of open) {
        if (o.lease_id !== e.lease_id && o.until > e.at && keysConflict(key, e.key)) found.push(`${e.key} by ${e.lease_id} (seq ${e.seq}) while ${key} held by ${o.lease_id} (seq ${o.seq})`);
      }
      open.set(e.key, { lease_id: e.lease_id, until: e.at + TTL_MS, seq: e.seq });
    } else if (e.event !== 'RENEW' && open.get(e.key)?.lease_id === e.lease_id) {
      open.delete(e.key);
    }
  }
  return found;
}

describe.each(['sqlite', 'postgres'] as const)('a resource and its fields, leased from two server processes at once [%s]', (engine) => {
  it('a whole-resource lease and a field lease are never held at once (from the history and by the clients\' clocks); fields run in parallel; family epochs increase', { timeout: 60_000 }, async () => {
    const { a, b, env } = await twoServersOnOneStore(engine, 'writ_family', { servers, drops }, { WRIT_DECISION_TTL_MS: '600000' });
    const urls: Record<'A' | 'B', string> = { A: a.url, B: b.url };

    const decisions = {} as Record<Want, string>;
    for (const want of Object.keys(WANTS) as Want[]) {
      const { principal, fields } = WANTS[want];
      const d = await new WritClient({ baseUrl: b.url, principal, privateJwk: fixtureKey(principal) }).decide({ action: 'deploy', resource: RESOURCE, environment: 'production', fields });
      decisions[want] = d.token!;
    }

    const holds: Hold[] = [];
    const counts: Record<string, number> = {};
    const unexpected: string[] = [];
    const phase = { stop: false };

    const run = async (want: Want, transport: 'stream' | 'http', server: 'A' | 'B') => {
      const { principal } = WANTS[want];
      const who = `${server}-${want}-${transport}`;
      const client = new WritClient({ baseUrl: urls[server], principal, privateJwk: fixtureKey(principal) });
      let stream: LeaseStream | null = null;
      while (!phase.stop) {
        try {
          if (transport === 'stream' && stream === null) {
            stream = await client.openLeaseStream();
            streams.push(stream);
          }
          const g = stream ? await stream.acquire([decisions[want]], { ttlMs: TTL_MS, waitMs: 100 }) : await client.acquireLease([decisions[want]], { ttlMs: TTL_MS, waitMs: 100 });
          const hold: Hold = { who, key: g.keys[0]!, t1: Date.now(), t2: null };
          holds.push(hold);
          await sleep(1 + Math.random() * 4);
          hold.t2 = Date.now();
          if (stream) await stream.release(g);
          else await client.releaseLease(g);
        } catch (e) {
          const code = e instanceof WritApiError ? e.code : e instanceof LeaseStreamClosedError ? `closed ${e.closeCode}` : (e as Error).name;
          counts[`${want} ${code}`] = (counts[`${want} ${code}`] ?? 0) + 1;
          if (!(e instanceof WritApiError && (e.code === 'RESOURCE_BUSY' || e.code === 'LEASE_WAIT_TIMEOUT'))) unexpected.push(`${who}: ${code}: ${(e as Error).message}`);
          if (!(e instanceof WritApiError)) stream = null;
          await sleep(Math.random() * 3);
        }
      }
    };

    const runs = [
      run('whole', 'http', 'A'), run('config', 'stream', 'A'), run('env', 'http', 'A'), run('whole', 'stream', 'A'),
      run('whole', 'stream', 'B'), run('config', 'http', 'B'), run('env', 'stream', 'B'), run('whole', 'http', 'B'),
    ];
    await sleep(4_000);
    // Each kind of key held from each server, and the two fields held at once at least once (bounded: a loaded machine).
    const both = () => holds.some((x) => x.key.endsWith('#config') && holds.some((y) => y.key.endsWith('#env') && y.t1 < (x.t2 ?? Infinity) && x.t1 < (y.t2 ?? Infinity)));
    await until('each kind held from each server, and the two fields at once', () =>
      ['A', 'B'].every((s) => (Object.keys(WANTS) as Want[]).every((w) => holds.some((h) => h.who.startsWith(`${s}-${w}-`)))) && both(), 25_000, 50);
    phase.stop = true;
    await Promise.all(runs);

    console.log(`whole and field leases on two processes [${engine}]: ${holds.length} holds; ${JSON.stringify(counts)}`);
    expect(unexpected, JSON.stringify(counts)).toEqual([]);
    // By the clients' clock: a whole hold never overlaps a field hold (each hold is inside its lease).
    const whole = holds.filter((h) => h.key === RESOURCE);
    const fields = holds.filter((h) => h.key !== RESOURCE);
    const clientOverlaps = whole.flatMap((w) => fields.filter((f) => f.t1 < (w.t2 ?? Infinity) && w.t1 < (f.t2 ?? Infinity)).map((f) => `${w.who} [${w.t1}, ${w.t2}] and ${f.who} ${f.key} [${f.t1}, ${f.t2}]`));
    expect(clientOverlaps, 'a whole and a field hold at once').toEqual([]);

    const pg = engine === 'postgres' ? await openPostgresStore(env.WRIT_DATABASE_URL!) : null;
    const { db, leases } = pg ? { db: { close: () => void pg.close() }, leases: new LeaseManager(pg, systemClock) } : observer(join(a.dataDir, 'writ.sqlite'));
    try {
      const history = (await leases.history({})).filter((e) => e.key === RESOURCE || e.key.startsWith(`${RESOURCE}#`));
      expect(history.filter((e) => e.event === 'ACQUIRE').length).toBeGreaterThanOrEqual(holds.length);
      expect(overlapsInHistory(history), 'a root and a child held by two leases at once').toEqual([]);
      // One epoch counter for the family: its grants, in the order recorded, take increasing epochs.
      const acquired = history.filter((e) => e.event === 'ACQUIRE').map((e) => e.epoch);
      expect(acquired.slice(1).filter((ep, i) => ep <= acquired[i]!), 'a family epoch not above the one before').toEqual([]);
    } finally {
      db.close();
    }
  });
});
