/**
 * `GET /v1/audit/verify` on a long receipt log, with and without a checkpoint: builds a SQLite store
 * of N entries (N/2 receipts, each an intent and its completion, bodies as the gateway writes them, on
 * 5,000 keys: 5,000 chains),
 * then times ReceiptLog.verifyChain over the whole chain, `archive` (older than 30 days: all but the
 * last ~1,000 entries, which are recent), verifyChain from the checkpoint, and the offline verification
 * of the archive file.
 *
 *   npx tsc -p tsconfig.json && node dist/bench/verify.js [--entries 1000000] [--write]
 *
 * Files go to bench/tmp (git-ignored) and are removed at the end.
 */
import { mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { ManualClock } from '../src/clock.js';
import { ReceiptLog, verifyArchiveFile } from '../src/audit/index.js';
import { fillReceipts } from './receipt-fill.js';
import { KeyRing } from '../src/decision/index.js';
import { keyRingCheckpointSigner } from '../src/service/checkpoint-signer.js';
import { openDatabase } from '../src/store/sqlite/database.js';
import { sqliteStoreOn } from '../src/store/sqlite/sqlite-store.js';
import { machineLine, writeResultsSection } from './results-file.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const { values } = parseArgs({ options: { entries: { type: 'string', default: '1000000' }, write: { type: 'boolean', default: false } } });
const N = Math.floor(Number(values.entries) / 2) * 2;
const DAY = 86_400_000;
const RECENT = 1_000;

mkdirSync(join(ROOT, 'bench', 'tmp'), { recursive: true });
const dir = mkdtempSync(join(ROOT, 'bench', 'tmp', 'verify-'));
try {
  const clock = new ManualClock(Date.parse('2026-11-30T00:00:00Z'));
  const db = openDatabase(join(dir, 'writ.sqlite'));
  const t0 = performance.now();
  // One chain per resource key (5,000 of them), as the gateway writes them.
  fillReceipts(db, { entries: N, keys: 5_000, at: (seq) => (seq > N - RECENT ? clock.now() - 1_000 : clock.now() - 60 * DAY + seq) });
  const built = performance.now() - t0;
  const ring = await KeyRing.open(join(dir, 'keys'), clock);
  const signer = keyRingCheckpointSigner(ring);
  const log = new ReceiptLog({ store: sqliteStoreOn(db), clock, checkpoints: signer });
  const timed = async <T>(fn: () => Promise<T> | T): Promise<[T, number]> => {
    const s = performance.now();
    const r = await fn();
    return [r, performance.now() - s];
  };
  const [full, fullMs] = await timed(() => log.verifyChain());
  const file = join(dir, 'archive.jsonl');
  const [archived, archiveMs] = await timed(() => log.archive({ olderThanMs: 30 * DAY, file }));
  const [fromCp, cpMs] = await timed(() => log.verifyChain());
  const [offline, offlineMs] = await timed(() => verifyArchiveFile(file, (jws) => signer.verify(jws)));
  // Appends after the checkpoint: the bound is what was appended since the last archive.
  db.close();
  if (!full.ok || !fromCp.ok || !offline.ok || !archived.archived) throw new Error(`unexpected verdicts: ${JSON.stringify({ full, fromCp, offline, archived })}`);
  const s = (ms: number) => `${(ms / 1000).toFixed(2)} s`;
  const rows = [
    `| verifyChain, whole chain (no checkpoint) | ${full.entries.toLocaleString('en')} | ${s(fullMs)} |`,
    `| archive --older-than 30d (write + sync file, record checkpoint, delete) | ${archived.entries.toLocaleString('en')} entries, ${archived.receipts.toLocaleString('en')} receipts, ${(statSync(file).size / 2 ** 20).toFixed(0)} MB file | ${s(archiveMs)} |`,
    `| verifyChain from the checkpoint | ${fromCp.entries.toLocaleString('en')} | ${(cpMs).toFixed(1)} ms |`,
    `| verify --archive (offline, the file) | ${offline.entries.toLocaleString('en')} | ${s(offlineMs)} |`,
  ];
  const section = [
    '## Audit verify on a long receipt log, with and without a checkpoint (bench/verify.ts)',
    '',
    '```',
    `npx tsc -p tsconfig.json && node dist/bench/verify.js --entries ${N} --write`,
    '```',
    '',
    machineLine(),
    '',
    `SQLite store of ${N.toLocaleString('en')} entries (${(N / 2).toLocaleString('en')} receipts: intent + completion, gateway-shaped bodies, on 5,000 keys, so 5,000 chains), built in ${s(built)}; the last ${RECENT} entries are recent, the rest 60 days old.`,
    '`ReceiptLog.verifyChain` is what `GET /v1/audit/verify` runs (chunks of 1,000 entries, the index cross-check of each chunk, one event-loop turn between chunks).',
    '',
    '| step | entries | time |',
    '|---|---|---|',
    ...rows,
    '',
    'With checkpoints taken regularly (`writ audit archive`, e.g. daily with `--older-than 30d`), verification is bounded by the entries kept in the store (the retention window), not by the length of the history. Every chain keeps its head in the store, so at least one entry per key stays. (The section "Audit verify on a long chain" was measured on the single global chain, before per-key chains.)',
  ].join('\n');
  console.log(section);
  if (values.write) writeResultsSection('verify-chains', section);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
