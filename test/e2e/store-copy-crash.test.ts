import { spawn } from 'node:child_process';
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { maskDatabaseUrl } from '../../src/config/index.js';
import { copySqliteToPostgres } from '../../src/store/copy-to-postgres.js';
import { migratePostgres } from '../../src/store/postgres/migrate.js';
import { readStoreMove } from '../../src/store/sqlite/database.js';
import { createTestDatabase, sleep, sql } from '../store/conformance/engines.js';
import { runWrit } from '../support/cli.js';
import { REPO } from '../support/harness.js';
import { CLI, requireDist } from '../support/server-process.js';

const dirs: string[] = [];
const drops: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const d of drops.splice(0)) await d().catch(() => undefined);
  dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true }));
});
const tempDir = () => {
  const d = mkdtempSync(join(tmpdir(), 'writ-copy-crash-'));
  dirs.push(d);
  return d;
};

/** A stopped embedded Writ with a graph (its events are what the copy is held on), copied afresh for each kill. */
let template: string;
let events: number;
beforeAll(async () => {
  requireDist();
  template = tempDir();
  const applied = await runWrit(template, 'graph', 'apply', 'graph/example.yaml');
  expect(applied.code, applied.output).toBe(0);
  const db = new Database(join(template, 'writ.sqlite'), { readonly: true });
  events = (db.prepare('SELECT COUNT(*) AS n FROM graph_events').get() as { n: number }).n;
  db.close();
  expect(events).toBeGreaterThan(0);
}, 60_000);

/** Where the copy is held while it is killed. */
type Point = 'before-the-file-is-marked' | 'in-the-database-commit, which then fails' | 'in-the-database-commit, which then succeeds';

/**
 * A database the copy can be held in, at two places, by the test's own PostgreSQL sessions (no hook in
 * Writ): a lock on graph_head makes its LOCK TABLE wait (before anything is written anywhere), and a
 * deferred trigger on graph_events that takes an advisory lock the test holds makes its COMMIT wait (the
 * whole copy written, the commit not yet made). Writ's migrations are run first, as the copy would (an
 * empty Writ schema is a database no Writ has used).
 */
async function heldDatabase(point: Point): Promise<{ url: string; holder: pg.Client }> {
  const db = await createTestDatabase('writ_copy_crash');
  drops.push(db.drop);
  const c = new pg.Client(db.url);
  await c.connect();
  try {
    await migratePostgres(c);
    await c.query(`CREATE FUNCTION writ_test_hold() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_advisory_xact_lock(4242); RETURN NULL; END $$`);
    await c.query('CREATE CONSTRAINT TRIGGER writ_test_hold AFTER INSERT ON graph_events DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION writ_test_hold()');
  } finally {
    await c.end();
  }
  const holder = new pg.Client(db.url);
  await holder.connect();
  if (point === 'before-the-file-is-marked') await holder.query('BEGIN; LOCK TABLE graph_head IN ACCESS SHARE MODE');
  else await holder.query('SELECT pg_advisory_lock(4242)');
  return { url: db.url, holder };
}

/** The copy's session, once it waits where the test holds it. */
async function copyWaiting(url: string, on: 'relation' | 'advisory'): Promise<number> {
  for (let i = 0; i < 600; i++) {
    const rows = await sql<{ pid: number }>(url, "SELECT pid FROM pg_stat_activity WHERE application_name = 'writ store copy' AND wait_event_type = 'Lock' AND wait_event = $1", [on]);
    if (rows.length > 0) return rows[0]!.pid;
    await sleep(50);
  }
  throw new Error(`writ store copy never waited on the ${on} lock`);
}

async function gone(url: string, pid: number): Promise<void> {
  for (let i = 0; i < 600; i++) {
    if ((await sql(url, 'SELECT 1 FROM pg_stat_activity WHERE pid = $1', [pid])).length === 0) return;
    await sleep(50);
  }
  throw new Error(`the killed copy's session ${pid} never ended`);
}

const copiedEvents = async (url: string) => Number((await sql<{ n: string }>(url, 'SELECT COUNT(*) AS n FROM graph_events'))[0]!.n);

describe('kill -9 during writ store copy', () => {
  for (const point of ['before-the-file-is-marked', 'in-the-database-commit, which then fails', 'in-the-database-commit, which then succeeds'] as const) {
    it(`killed ${point}: the file and the database never both serve; the operator is told what to do, and a second copy completes`, { timeout: 120_000 }, async () => {
      const data = tempDir();
      cpSync(template, data, { recursive: true });
      const { url, holder } = await heldDatabase(point);
      try {
        const child = spawn(process.execPath, [CLI, 'store', 'copy', '--to', url, '--data-dir', data], { cwd: REPO, stdio: 'ignore', env: { ...process.env, WRIT_DATABASE_URL: '' } });
        const exited = new Promise((resolve) => child.once('exit', resolve));
        const pid = await copyWaiting(url, point === 'before-the-file-is-marked' ? 'relation' : 'advisory');
        child.kill('SIGKILL');
        await exited;
        if (point === 'in-the-database-commit, which then fails') await sql(url, 'SELECT pg_terminate_backend($1)', [pid]);
        // Released: the killed copy's session goes on alone (a commit in flight completes, a transaction waiting for its next statement is rolled back).
        await holder.query(point === 'before-the-file-is-marked' ? 'ROLLBACK' : 'SELECT pg_advisory_unlock(4242)');
        await gone(url, pid);
      } finally {
        await holder.end();
      }

      const copied = await copiedEvents(url);
      expect([0, events], point).toContain(copied);
      expect(copied, point).toBe(point === 'in-the-database-commit, which then succeeds' ? events : 0);
      // A command that writes to the file: refused whenever the database may hold the copy.
      const onFile = await runWrit(data, 'graph', 'apply', 'graph/example.yaml');
      if (point === 'before-the-file-is-marked') {
        expect(onFile.code, onFile.output).toBe(0);
      } else {
        expect(onFile.code, onFile.output).toBe(1);
        expect(onFile.output).toContain('writ: STORE_MOVED');
        expect(onFile.output).toContain('did not finish');
        expect(onFile.output).toContain(`writ store copy --to`);
      }

      // The way on is the same command again: it finishes the copy, or confirms the one the database committed.
      const again = await runWrit(data, 'store', 'copy', '--to', url);
      expect(again.code, again.output).toBe(0);
      if (point === 'in-the-database-commit, which then succeeds') expect(again.stdout).toContain('had committed');
      const file = new Database(join(data, 'writ.sqlite'), { readonly: true });
      const onTheFile = (file.prepare('SELECT COUNT(*) AS n FROM graph_events').get() as { n: number }).n;
      file.close();
      expect(await copiedEvents(url)).toBe(onTheFile);
      const after = await runWrit(data, 'graph', 'apply', 'graph/example.yaml');
      expect(after.code, after.output).toBe(1);
      expect(after.output).toContain('writ: STORE_MOVED');
      expect(after.output).not.toContain('did not finish');
    });
  }
});

describe('writ store copy whose commit fails', () => {
  it('a commit the database refuses takes the mark back and says so; a lost answer keeps it, and the copy run again finishes', { timeout: 120_000 }, async () => {
    // Refused: a deferred trigger that raises at COMMIT.
    const data = tempDir();
    cpSync(template, data, { recursive: true });
    const file = join(data, 'writ.sqlite');
    const refusing = await createTestDatabase('writ_copy_refused');
    drops.push(refusing.drop);
    const c = new pg.Client(refusing.url);
    await c.connect();
    await migratePostgres(c);
    await c.query(`CREATE FUNCTION writ_test_refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused by the test'; END $$`);
    await c.query('CREATE CONSTRAINT TRIGGER writ_test_refuse AFTER INSERT ON graph_events DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION writ_test_refuse()');
    await c.end();
    await expect(copySqliteToPostgres(file, refusing.url)).rejects.toMatchObject({ code: 'OVERLOADED', message: expect.stringMatching(/refused to commit the copy \(refused by the test\): it holds none of it, and .* is no longer marked as moved; nothing was changed/) });
    expect(readStoreMove(file)).toBeNull();
    expect(await copiedEvents(refusing.url)).toBe(0);

    // Lost: the session ends (FATAL) while its COMMIT waits.
    const { url, holder } = await heldDatabase('in-the-database-commit, which then fails');
    const copying = copySqliteToPostgres(file, url);
    copying.catch(() => undefined);
    const pid = await copyWaiting(url, 'advisory');
    await sql(url, 'SELECT pg_terminate_backend($1)', [pid]);
    await expect(copying).rejects.toMatchObject({ code: 'OVERLOADED', message: expect.stringContaining('stays marked as moved (a server on it refuses it). Run writ store copy --to … again') });
    expect(readStoreMove(file)).toMatchObject({ pending: true });
    // Run again on another database: refused, naming the one the unfinished copy must be finished on.
    const other = await createTestDatabase('writ_copy_other');
    drops.push(other.drop);
    await expect(copySqliteToPostgres(file, other.url)).rejects.toMatchObject({ code: 'STORE_MOVED', message: expect.stringContaining('the copy did not finish') });
    await holder.query('SELECT pg_advisory_unlock(4242)');
    await holder.end();
    expect(await copySqliteToPostgres(file, url)).toMatchObject({ unfinished_copy: 'copied again', graph_revision: events });
    expect(readStoreMove(file)).toMatchObject({ pending: false });
  });

  it('an unfinished copy run again on a database that holds another Writ is refused (ALREADY_EXISTS) and the file stays marked', { timeout: 60_000 }, async () => {
    const data = tempDir();
    cpSync(template, data, { recursive: true });
    const file = join(data, 'writ.sqlite');
    const db = await createTestDatabase('writ_copy_another');
    drops.push(db.drop);
    // Another Writ's state there (the same graph applied straight to it, at other times).
    const applied = await runWrit(tempDir(), 'graph', 'apply', 'graph/example.yaml', '--database', db.url);
    expect(applied.code, applied.output).toBe(0);
    const marked = new Database(file);
    marked.prepare('INSERT INTO store_moves (at, moved_to, pending) VALUES (?, ?, 1)').run(Date.now(), maskDatabaseUrl(db.url));
    marked.close();
    await expect(copySqliteToPostgres(file, db.url)).rejects.toMatchObject({ code: 'ALREADY_EXISTS', message: expect.stringContaining('holds Writ state that is not that copy') });
    expect(readStoreMove(file)).toMatchObject({ pending: true });
  });
});
