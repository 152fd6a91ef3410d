/**
 * One durable commit on the SQLite store when nothing else runs, at the gateway bench's pace (one every
 * 20 ms): what a write's intent or settlement waits for beyond the disk. Each commit is one single-use
 * spend through the store's group commit (BEGIN IMMEDIATE, the statement, COMMIT, then an fdatasync of
 * the WAL on libuv's thread pool); the sync is timed inside (the store's `sync` hook, on the main
 * thread: from handing the fdatasync to the pool until its callback runs, so the two hand-offs between
 * the event loop and the pool are in it), so each commit splits into its sync and the rest (the turn
 * the group commit waits for, BEGIN, the statement and COMMIT on cold caches, reading the WAL-index
 * header and checking the WAL's inode before the sync, the promise chain). Rounds alternate with the
 * paced 4 KiB write + fdatasync probe that bench/gateway.ts budgets against (inline: no hand-off).
 *
 *   npx tsc -p tsconfig.json && node dist/bench/commit-latency.js [--write]
 */
import { fdatasync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { openSqliteStore } from '../src/store/sqlite/sqlite-store.js';
import { pacedSyncProbe } from './disk-probe.js';
import { machineLine, summarize, writeResultsSection } from './results-file.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const TMP = join(ROOT, 'bench', 'tmp');
const EVERY_MS = 20;
const PER_ROUND = 100;
const ROUNDS = 4;

async function main(): Promise<void> {
  mkdirSync(TMP, { recursive: true });
  const dir = mkdtempSync(join(TMP, 'commit-latency-'));
  const syncs: number[] = [];
  const store = await openSqliteStore(join(dir, 'writ.sqlite'), {
    sync: (fd, done) => {
      const t = performance.now();
      fdatasync(fd, (e) => {
        syncs.push((performance.now() - t) * 1000);
        done(e);
      });
    },
  });
  const commits: number[] = [];
  const rest: number[] = [];
  const probe: number[] = [];
  try {
    for (let round = 0; round < ROUNDS; round++) {
      for (let i = 0; i < PER_ROUND; i++) {
        await new Promise((r) => setTimeout(r, EVERY_MS));
        const before = syncs.length;
        const t = performance.now();
        await store.readWrite((tx) => tx.singleUse.spend('bench', `${round}-${i}-${t}`, Date.now() + 3_600_000, Date.now()));
        const total = (performance.now() - t) * 1000;
        commits.push(total);
        if (syncs.length === before + 1) rest.push(total - syncs[before]!);
      }
      probe.push(...(await pacedSyncProbe(dir, PER_ROUND, EVERY_MS)));
    }
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
  const us = (n: number) => Math.round(n).toLocaleString('en-US');
  const row = (name: string, x: number[]) => {
    const s = summarize(x);
    return `| ${name} | ${s.n} | ${us(s.p50)} | ${us(s.p90)} | ${us(s.p99)} |`;
  };
  const section = [
    '## One durable commit, idle, at 50 a second (bench/commit-latency.ts)',
    '',
    '```',
    'npx tsc -p tsconfig.json && node dist/bench/commit-latency.js --write',
    '```',
    '',
    machineLine(),
    '',
    `A single-use spend through the SQLite store's group commit, one every ${EVERY_MS} ms with nothing else running (as each of a gateway write's two commits at 50 writes/s), ${ROUNDS} rounds of ${PER_ROUND} alternating with the paced 4 KiB write + fdatasync probe of bench/gateway.ts. The WAL's fdatasync is timed inside the store; "the rest" is each commit less its own sync. µs:`,
    '',
    '| | n | p50 | p90 | p99 |',
    '|---|---:|---:|---:|---:|',
    row('commit, from readWrite to its answer', commits),
    row('  its fdatasync of the WAL, with the hand-off to the thread pool and back', syncs),
    row('  the rest: the next turn, BEGIN, statement, COMMIT, header read and WAL stat, promise chain', rest),
    row('probe: 4 KiB write + fdatasync on the main thread, same pace', probe),
  ].join('\n');
  console.log(section);
  if (process.argv.includes('--write')) writeResultsSection('commit-latency', section);
}

await main();
