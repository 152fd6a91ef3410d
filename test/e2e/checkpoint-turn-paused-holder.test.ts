import Database from 'better-sqlite3';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { ReceiptLog } from '../../src/audit/index.js';
import { systemClock } from '../../src/clock.js';
import type { WritStore } from '../../src/store/contract.js';
import { openPostgresStore } from '../../src/store/postgres/index.js';
import { openSqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { CLI, onFreePort, REPO, requireDist, spawnListening } from '../../scripts/server-process.js';
import { createTestDatabase, sql } from '../store/conformance/engines.js';
import { intent } from '../audit/helpers.js';
import { until as waitUntil } from '../support/wait.js';

// A replica that takes the periodic checkpoints stops (SIGSTOP) while it holds the turn, another takes over once
// the turn (three intervals) runs out, and the first resumes (SIGCONT): it must sign nothing in the other's turn
// and go back to following. test/e2e/checkpoint-turn-replicas.test.ts covers a holder that dies.

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const TAKES = 'receipt checkpoints: this replica takes them';
const FOLLOWS = 'receipt checkpoints: another replica takes them';

const until = <T>(what: string, probe: () => Promise<T | undefined | false> | T | undefined | false, ms = 30_000) => waitUntil(what, probe, ms, 100);

type Replica = Awaited<ReturnType<typeof spawnListening>>;

/** Two `writ serve` on one store, sharing the data directory's signing keys, and a ReceiptLog to write receipts as their gateways would. */
async function replicas(engine: 'postgres' | 'sqlite', intervalMs: number) {
  requireDist();
  const dir = mkdtempSync(join(tmpdir(), 'writ-turn-pause-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const db = engine === 'postgres' ? await createTestDatabase('writ_turn_pause') : undefined;
  if (db) cleanups.push(db.drop);
  const env = { ...process.env, WRIT_DATABASE_URL: db?.url ?? '', WRIT_RECEIPT_CHECKPOINT_INTERVAL_MS: String(intervalMs) };
  const start = (i: number) => onFreePort((port) => spawnListening(`replica ${i}`, [CLI, 'serve', '--data-dir', dir, '--port', String(port), '--no-upstream', ...(i === 0 ? ['--graph', 'graph/example.yaml'] : [])], env));
  const procs = [await start(0), await start(1)];
  cleanups.push(() => procs.forEach((r) => {
    if (r.proc.exitCode === null && r.proc.signalCode === null) r.proc.kill('SIGKILL');
  }));
  const store: WritStore = db ? await openPostgresStore(db.url, { poolSize: 2 }) : await openSqliteStore(join(dir, 'writ.sqlite'));
  cleanups.push(() => store.close());
  const log = new ReceiptLog({ store, clock: systemClock });
  let n = 0;
  const write = () => log.recordIntent(intent({ resource_key: `wp:post:${n % 20}`, expected_version: n++ }));
  const seqs = async () => (db
    ? (await sql<{ seq: string }>(db.url, 'SELECT seq FROM receipt_head_checkpoints ORDER BY seq')).map((r) => Number(r.seq))
    : sqliteSeqs(join(dir, 'writ.sqlite')));
  const turnHolder = async () => (db
    ? (await sql<{ holder: string }>(db.url, 'SELECT holder FROM receipt_checkpoint_turn'))[0]?.holder
    : sqliteHolder(join(dir, 'writ.sqlite')));
  // The holder is `host:pid:random`: which of the two processes it is.
  const holderIndex = async () => {
    const pid = Number(/:(\d+):[0-9a-f]{8}$/.exec((await turnHolder()) ?? '')?.[1]);
    const i = procs.findIndex((p) => p.proc.pid === pid);
    return i < 0 ? undefined : i;
  };
  const verify = async () => {
    const { stdout } = await promisify(execFile)(process.execPath, [CLI, 'audit', 'verify', '--data-dir', dir, '--json'], { cwd: REPO, env });
    return JSON.parse(stdout) as { ok: boolean };
  };
  return { db, procs, write, seqs, holderIndex, verify };
}

function sqliteSeqs(file: string): number[] {
  const db = new Database(file, { readonly: true });
  try {
    return (db.prepare('SELECT seq FROM receipt_head_checkpoints ORDER BY seq').all() as { seq: number }[]).map((r) => r.seq);
  } finally {
    db.close();
  }
}

function sqliteHolder(file: string): string | undefined {
  const db = new Database(file, { readonly: true });
  try {
    return (db.prepare('SELECT holder FROM receipt_checkpoint_turn').get() as { holder: string } | undefined)?.holder;
  } finally {
    db.close();
  }
}

const contiguous = (seqs: number[]) => seqs.every((s, i) => s === i + 1);

describe('a replica that stops while it holds the checkpoint turn, and resumes after another took over (real processes)', () => {
  it('[postgres] stopped mid-checkpoint, after it claimed its turn and before it records: resumed in the other\'s turn, it records nothing, and follows', async () => {
    const INTERVAL_MS = 2_000;
    const t = await replicas('postgres', INTERVAL_MS);
    const url = t.db!.url;
    // Who wrote each checkpoint (the writing connection's application_name is `writ-<pid>`) and whose turn the
    // turn row said it was, as the inserting transaction saw it.
    await sql(url, `CREATE TABLE test_checkpoint_writers (seq bigint, app text, holder text);
      CREATE FUNCTION test_checkpoint_writer() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
        INSERT INTO test_checkpoint_writers VALUES (NEW.seq, current_setting('application_name'), (SELECT holder FROM receipt_checkpoint_turn WHERE id = 1));
        RETURN NEW; END $$;
      CREATE TRIGGER test_checkpoint_writer AFTER INSERT ON receipt_head_checkpoints FOR EACH ROW EXECUTE FUNCTION test_checkpoint_writer();`);
    for (let i = 0; i < 3; i++) await t.write();
    await until('a first checkpoint', async () => (await t.seqs()).length > 0);
    const a = await until('a turn holder', () => t.holderIndex());
    const b = 1 - a;
    const [A, B] = [t.procs[a]!, t.procs[b]!];
    const waitingOnLock = async () => (await sql<{ app: string }>(url, "SELECT application_name AS app FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'")).map((r) => r.app);

    const signedBefore = Math.max(...(await t.seqs()));
    // The test's connection locks the checkpoints table while each replica reaches it (Writ's connections give up a
    // lock wait after lock_timeout, 5 s: every wait below is shorter). A's next checkpoint (a receipt to sign)
    // claims its turn, then waits to read the latest checkpoint: A is stopped there and the lock released (its
    // read is answered while it is stopped).
    const lock = new pg.Client(url);
    await lock.connect();
    cleanups.push(() => lock.end());
    await lock.query('BEGIN');
    await lock.query('LOCK TABLE receipt_head_checkpoints IN ACCESS EXCLUSIVE MODE');
    await t.write();
    await until('A to wait on the lock mid-checkpoint', async () => (await waitingOnLock()).includes(`writ-${A.proc.pid}`));
    A.proc.kill('SIGSTOP');
    cleanups.push(() => void A.proc.kill('SIGCONT'));
    await lock.query('ROLLBACK');
    await lock.query('BEGIN');
    // Locked again (granted once A's read has ended, which may take A's resuming): A's turn runs out, B takes it
    // and its checkpoint waits on the lock. B is stopped there and A resumed: A finishes the checkpoint it started
    // in its turn (on the latest checkpoint it read before B could sign one) while B holds the turn.
    const relocked = lock.query('LOCK TABLE receipt_head_checkpoints IN ACCESS EXCLUSIVE MODE');
    await until('B to take the turn and wait on the lock', async () => (await t.holderIndex()) === b && (await waitingOnLock()).includes(`writ-${B.proc.pid}`), 30_000);
    B.proc.kill('SIGSTOP');
    cleanups.push(() => void B.proc.kill('SIGCONT'));
    const resumedAt = A.output().length;
    A.proc.kill('SIGCONT');
    await relocked;
    // A records its checkpoint (before the fix: recorded in B's turn) or gives up.
    await until('A to record its checkpoint', async () => (await waitingOnLock()).includes(`writ-${A.proc.pid}`) || A.output().slice(resumedAt).includes('receipt checkpoint'), 4_000);
    await lock.query('ROLLBACK');
    await until('A to see it follows', () => A.output().slice(resumedAt).includes(FOLLOWS), 20_000);
    B.proc.kill('SIGCONT');

    // B goes on signing, one chain of numbers, and A never again.
    for (let i = 0; i < 4; i++) {
      await t.write();
      await sleep(INTERVAL_MS / 2);
    }
    await until('two checkpoints after the pause', async () => (await t.seqs()).filter((s) => s > signedBefore).length >= 2, 30_000);
    const writers = await sql<{ seq: string; app: string; holder: string }>(url, 'SELECT seq, app, holder FROM test_checkpoint_writers ORDER BY seq');
    const writerPid = (w: { app: string }) => Number(/^writ-(\d+)$/.exec(w.app)?.[1]);
    const holderPid = (w: { holder: string }) => Number(/:(\d+):[0-9a-f]{8}$/.exec(w.holder)?.[1]);
    // Every checkpoint was written by the replica whose turn the row named.
    expect(writers.filter((w) => writerPid(w) !== holderPid(w))).toEqual([]);
    expect(writers.filter((w) => Number(w.seq) > signedBefore && writerPid(w) === A.proc.pid)).toEqual([]);
    expect(writers.filter((w) => Number(w.seq) > signedBefore).length).toBeGreaterThanOrEqual(2);
    expect(contiguous(await t.seqs())).toBe(true);
    expect(A.output().slice(resumedAt)).not.toContain(TAKES);
    expect(await t.holderIndex()).toBe(b);
    expect(await t.verify()).toMatchObject({ ok: true });
  }, 180_000);

  it('[sqlite] stopped while it holds the turn (one file, two processes): the other takes over, and the resumed one follows', async () => {
    const INTERVAL_MS = 1_000;
    const t = await replicas('sqlite', INTERVAL_MS);
    let writing = true;
    const writer = (async () => {
      while (writing) {
        await t.write();
        await sleep(100);
      }
    })();
    cleanups.push(async () => {
      writing = false;
      await writer;
    });
    await until('a first checkpoint', () => t.seqs().then((s) => s.length > 0));
    const a = await until('a turn holder', () => t.holderIndex());
    const b = 1 - a;
    const [A, B] = [t.procs[a]!, t.procs[b]!];
    A.proc.kill('SIGSTOP');
    cleanups.push(() => void A.proc.kill('SIGCONT'));
    await until('B to take over', () => B.output().includes(TAKES), 20_000);
    const signedByB = Math.max(...(await t.seqs()));
    await until('B to sign again', async () => Math.max(...(await t.seqs())) > signedByB, 20_000);
    const resumedAt = A.output().length;
    A.proc.kill('SIGCONT');
    await until('A to see it follows', () => A.output().slice(resumedAt).includes(FOLLOWS), 20_000);
    const atResume = Math.max(...(await t.seqs()));
    await until('B to sign twice more', async () => Math.max(...(await t.seqs())) >= atResume + 2, 20_000);
    writing = false;
    await writer;
    expect(A.output().slice(resumedAt)).not.toContain(TAKES);
    expect(await t.holderIndex()).toBe(b);
    expect(contiguous(await t.seqs())).toBe(true);
    expect(await t.verify()).toMatchObject({ ok: true });
  }, 120_000);
});
