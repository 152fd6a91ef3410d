/**
 * `writ store copy`: how long the move from the embedded SQLite file to PostgreSQL takes, which is how
 * long Writ is stopped for it. Builds a SQLite store of N receipt entries (N/2 receipts, intent and
 * completion, gateway-shaped bodies, on 5,000 keys) with lease keys, lease history, spent single-use
 * ids and graph events beside them, copies it into a PostgreSQL database of its own (created and
 * dropped here, on the local server), then verifies the copy's receipt chains as the command does.
 *
 *   npx tsc -p tsconfig.json && node dist/bench/store-copy.js [--entries 200000] [--write]
 *
 * Files go to bench/tmp (git-ignored) and are removed at the end.
 */
import { mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { canonicalJson } from '../src/audit/index.js';
import { fillReceipts } from './receipt-fill.js';
import { openDatabase } from '../src/store/sqlite/database.js';
import { copySqliteToPostgres } from '../src/store/copy-to-postgres.js';
import { verifyPostgresReceipts } from '../src/service/index.js';
import { createTestDatabase } from '../scripts/test-database.js';
import { machineLine, writeResultsSection } from './results-file.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const { values } = parseArgs({ options: { entries: { type: 'string', default: '200000' }, write: { type: 'boolean', default: false } } });
const N = Math.floor(Number(values.entries) / 2) * 2;
const KEYS = 5_000;
const HISTORY = N / 2;
const SPENT = N / 2;
const EVENTS = 2_000;

mkdirSync(join(ROOT, 'bench', 'tmp'), { recursive: true });
const dir = mkdtempSync(join(ROOT, 'bench', 'tmp', 'store-copy-'));
const target = await createTestDatabase('writ_bench_copy');
try {
  const file = join(dir, 'writ.sqlite');
  const db = openDatabase(file);
  const now = Date.now();
  const t0 = performance.now();
  fillReceipts(db, { entries: N, keys: KEYS, at: (seq) => now - 86_400_000 + seq });
  db.transaction(() => {
    const event = db.prepare('INSERT INTO graph_events (revision, at, actor, type, payload) VALUES (?, ?, ?, ?, ?)');
    for (let r = 1; r <= EVENTS; r++) event.run(r, now - 86_400_000 + r, 'governance', 'principal.created', canonicalJson({ principal: { id: `agent-${r}`, kind: 'agent', keys: [], attributes: {}, priority_class: 0, created_at: now, revoked_at: null } }));
    const key = db.prepare('INSERT INTO lease_keys (key, epoch, transitions, last_holder) VALUES (?, ?, 0, ?)');
    for (let k = 0; k < KEYS; k++) key.run(`wp:post:${k}#title`, 1 + Math.floor(HISTORY / KEYS), `agent-${k % 97}`);
    const history = db.prepare('INSERT INTO lease_history (at, event, key, epoch, lease_id, holder, actor) VALUES (?, ?, ?, ?, ?, ?, NULL)');
    for (let i = 0; i < HISTORY; i++) history.run(now - 86_400_000 + i, i % 2 === 0 ? 'ACQUIRE' : 'RELEASE', `wp:post:${i % KEYS}#title`, 1 + Math.floor(i / KEYS), `lease_${i}`, `agent-${i % 97}`);
    const spent = db.prepare('INSERT INTO seen_ids (namespace, id, expires_at) VALUES (?, ?, ?)');
    for (let i = 0; i < SPENT; i++) spent.run('assertion', `agent-${i % 97}\u0000jti-${i}`, now + 60_000);
  })();
  db.close();
  const built = performance.now() - t0;
  const bytes = statSync(file).size;

  const c0 = performance.now();
  const r = await copySqliteToPostgres(file, target.url);
  const copyMs = performance.now() - c0;
  const v0 = performance.now();
  const verdict = await verifyPostgresReceipts(target.url, null);
  const verifyMs = performance.now() - v0;
  if (!verdict.ok || r.copied.receipt_entries !== N) throw new Error(`unexpected: ${JSON.stringify({ verdict, copied: r.copied })}`);

  const rows = Object.entries(r.copied).filter(([, n]) => n > 0).map(([t, n]) => `${t} ${n.toLocaleString('en')}`).join(', ');
  const section = [
    '## Moving an embedded Writ to PostgreSQL: writ store copy (bench/store-copy.ts)',
    '',
    '```',
    `npx tsc -p tsconfig.json && node dist/bench/store-copy.js --entries ${N} --write`,
    '```',
    '',
    machineLine(),
    '',
    `A SQLite store of ${(bytes / 2 ** 20).toFixed(0)} MB (built in ${(built / 1000).toFixed(1)} s): ${(N / 2).toLocaleString('en')} receipts (${N.toLocaleString('en')} entries, gateway-shaped bodies, on ${KEYS.toLocaleString('en')} chains), ${KEYS.toLocaleString('en')} lease keys, ${HISTORY.toLocaleString('en')} lease history events, ${SPENT.toLocaleString('en')} spent single-use ids, ${EVENTS.toLocaleString('en')} graph events; copied into a new database on the local PostgreSQL (synchronous_commit on), in one transaction. Writ is stopped for the copy: this is the downtime of the move.`,
    '',
    '| step | time |',
    '|---|---|',
    `| copy (checks, migrations, every row in batches of 500, heads, commit) | ${(copyMs / 1000).toFixed(1)} s (${Math.round(N / (copyMs / 1000)).toLocaleString('en')} receipt entries/s with the rest) |`,
    `| verify the copy's receipt chains (as the command does after the commit) | ${(verifyMs / 1000).toFixed(1)} s |`,
    '',
    `Rows written: ${rows}.`,
  ].join('\n');
  console.log(section);
  if (values.write) writeResultsSection('store-copy', section);
} finally {
  await target.drop();
  rmSync(dir, { recursive: true, force: true });
}
