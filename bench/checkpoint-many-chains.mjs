// The periodic receipt checkpoint with many chains on PostgreSQL, through a given build (bench/RESULTS.md,
// "The periodic checkpoint at a million chains"). A throwaway database of its own, dropped at the end.
//
//   node bench/checkpoint-many-chains.mjs <dist folder> [chains=1000000] [rounds=3] [moved=100]
//
// Fills receipt_chains with `chains` heads (generate_series, sha256 hashes, no entries: as the earlier
// measurements did), takes the first checkpoint (it signs every chain), then `rounds` times: `moved` new
// chains (first receipts, in random places of the chain order) and a checkpoint; `rounds` times: the same
// chains moved on (a receipt each) and a checkpoint; and a checkpoint with nothing moved. Prints one JSON
// line per checkpoint: its wall time, this process's CPU time meanwhile (not the database's: on a shared machine
// the wall time is mostly waiting for a core), the process's resident memory after it and at its peak (sampled every
// 20 ms), and the longest pause of the event loop during it.
import pg from 'pg';

const [dist, chainsArg, roundsArg, movedArg] = process.argv.slice(2);
if (!dist) throw new Error('usage: node bench/checkpoint-many-chains.mjs <dist folder> [chains] [rounds] [moved]');
const CHAINS = Number(chainsArg ?? 1_000_000);
const ROUNDS = Number(roundsArg ?? 3);
const MOVED = Number(movedArg ?? 100);
const ADMIN = process.env.WRIT_TEST_PG_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

const { openPostgresStore } = await import(`${dist}/src/store/postgres/index.js`);
const { ReceiptLog, requestHash } = await import(`${dist}/src/audit/index.js`);
const { KeyRing } = await import(`${dist}/src/decision/index.js`);
const { keyRingCheckpointSigner } = await import(`${dist}/src/service/checkpoint-signer.js`);
const { mkdtempSync, rmSync } = await import('node:fs');
const { tmpdir } = await import('node:os');
const { join } = await import('node:path');

const name = `writ_bench_ckpt_${process.pid}`;
const admin = new pg.Client(ADMIN);
await admin.connect();
await admin.query(`CREATE DATABASE ${name}`);
const url = ADMIN.replace(/\/[^/]*$/, `/${name}`);
const dir = mkdtempSync(join(tmpdir(), 'writ-bench-ckpt-'));
const clock = { now: () => Date.now() };
const store = await openPostgresStore(url, { poolSize: 2 });
try {
  const c = new pg.Client(url);
  await c.connect();
  await c.query(`INSERT INTO receipt_chains (chain, pos, hash) SELECT 'k:' || lpad(g::text, 7, '0'), 1 + g % 5, encode(sha256(g::text::bytea), 'hex') FROM generate_series(1, ${CHAINS}) g`);
  await c.query('VACUUM ANALYZE');
  await c.end();
  const log = new ReceiptLog({ store, clock, checkpoints: keyRingCheckpointSigner(await KeyRing.open(join(dir, 'keys'), clock)) });
  let n = 0;
  const append = (key) => log.recordIntent({ principal: 'bench', action: 'post.update', resource_key: key, fields: ['title'], request_hash: requestHash({ n: ++n }) });
  const measure = async (what, fn) => {
    let peak = process.memoryUsage().rss;
    let stall = 0;
    let last = performance.now();
    const timer = setInterval(() => {
      const now = performance.now();
      stall = Math.max(stall, now - last - 20);
      last = now;
      peak = Math.max(peak, process.memoryUsage().rss);
    }, 20);
    const t0 = performance.now();
    const cpu0 = process.cpuUsage();
    const c = await fn();
    const ms = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    clearInterval(timer);
    const rss = process.memoryUsage().rss;
    console.log(JSON.stringify({ what, ms: Math.round(ms), cpu_ms: Math.round((cpu.user + cpu.system) / 1000), signed: c?.seq ?? null, chains: c?.chains ?? null, rss_mb: Math.round(rss / 2 ** 20), peak_mb: Math.round(Math.max(peak, rss) / 2 ** 20), longest_pause_ms: Math.round(stall) }));
  };
  await measure('first (signs every chain)', () => log.checkpoint());
  const keys = [];
  for (let r = 0; r < ROUNDS; r++) {
    for (let i = 0; i < MOVED; i++) {
      const key = `k:${String(Math.floor(Math.random() * CHAINS)).padStart(7, '0')}~${r}.${i}`;
      keys.push(key);
      await append(key);
    }
    await measure(`${MOVED} new chains`, () => log.checkpoint());
  }
  for (let r = 0; r < ROUNDS; r++) {
    for (const key of keys.slice(0, MOVED)) await append(key);
    await measure(`${MOVED} chains moved on`, () => log.checkpoint());
  }
  await measure('nothing moved', () => log.checkpoint());
} finally {
  await store.close();
  await admin.query(`DROP DATABASE ${name} WITH (FORCE)`);
  await admin.end();
  rmSync(dir, { recursive: true, force: true });
}
