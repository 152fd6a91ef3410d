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
import { canonicalJson, chainEntryHash, entryHash, GENESIS_HASH, ReceiptLog, verifyArchiveFile } from '../src/audit/index.js';
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
  const insertEntry = db.prepare('INSERT INTO receipt_entries (seq, chain, pos, receipt_id, kind, body, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?)');
  const insertRow = db.prepare(`INSERT INTO receipts (receipt_id, principal, resource_key, status, idempotency_key, request_hash, created_at, completed_at, first_seq, last_seq)
    VALUES (?, ?, ?, 'COMPLETED', ?, ?, ?, ?, ?, ?)`);
  // One chain per resource key (5,000 of them), as the gateway writes them.
  const heads = new Map<string, { pos: number; hash: string }>();
  const fill = db.transaction((from: number, to: number) => {
    for (let seq = from; seq < to; seq += 2) {
      const id = `rcpt_${seq}`;
      const at = seq > N - RECENT ? clock.now() - 1_000 : clock.now() - 60 * DAY + seq;
      const principal = `agent-${seq % 97}`;
      const resource = `wp:post:${seq % 5000}`;
      const reqHash = entryHash(GENESIS_HASH, id, seq, 'intent', 'r');
      const intent = canonicalJson({
        at, principal, action: 'post.update', resource_key: resource, fields: ['title'], owners: ['content-team'], authority_epoch: 12, ownership_epoch: 3,
        decision_id: `dec_${seq}`, policy_revision: 'sha256:4f0c3a9d', graph_revision: 1200, chain: ['e_grant_1', 'e_delegate_7'], lease_id: null, lease_epoch: null,
        expected_version: 31, idempotency_key: `k-${seq}`, request_hash: reqHash,
      });
      const head = heads.get(resource) ?? { pos: 0, hash: GENESIS_HASH };
      const h1 = chainEntryHash(head.hash, intent, resource, head.pos + 1, seq, 'intent', id);
      insertEntry.run(seq, resource, head.pos + 1, id, 'intent', intent, head.hash, h1);
      const done = canonicalJson({ at: at + 20, status: 'COMPLETED', final_version: 32, upstream_status: 200, error: null, conflicts: [] });
      const h2 = chainEntryHash(h1, done, resource, head.pos + 2, seq + 1, 'completed', id);
      insertEntry.run(seq + 1, resource, head.pos + 2, id, 'completed', done, h1, h2);
      insertRow.run(id, principal, resource, `k-${seq}`, reqHash, at, at + 20, seq, seq + 1);
      heads.set(resource, { pos: head.pos + 2, hash: h2 });
    }
  });
  for (let seq = 1; seq <= N; seq += 100_000) fill(seq, Math.min(N + 1, seq + 100_000));
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
