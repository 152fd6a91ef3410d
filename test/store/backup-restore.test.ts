import type { GraphEvent } from '../../src/graph/model.js';
import Database from 'better-sqlite3';
import { existsSync, mkdtempSync, readFileSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/clock.js';
import { ReceiptLog } from '../../src/audit/index.js';
import { LeaseManager } from '../../src/lease/index.js';
import { WritError } from '../../src/errors.js';
import { backupSqliteStore, openForBackup, restoreSqliteStore, summarize } from '../../src/store/sqlite/backup.js';
import { openSqliteStore, type SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { syncNow } from '../support/sync-now.js';
import { REPO, requireDist } from '../../scripts/server-process.js';
import { damageSqlite } from '../support/damage-sqlite.js';

const dirs: string[] = [];
afterAll(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));

function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'writ-backup-'));
  dirs.push(d);
  return d;
}

function services(store: SqliteStore) {
  return { leases: new LeaseManager(store, systemClock), receipts: new ReceiptLog({ store, clock: systemClock }) };
}

/** One write's worth of coordination state: a lease taken and released on `key`, and a receipt. */
async function writeOnce(s: ReturnType<typeof services>, key: string, i: number): Promise<number> {
  const grant = await s.leases.acquire({ resources: [key], holder: 'agent-a', priority: 0, ttlMs: 5_000 });
  await s.receipts.recordIntent({ principal: 'agent-a', action: 'update_post', resource_key: key, fields: ['title'], request_hash: `h${i}`, lease_epoch: grant.epochs[key]! });
  await s.leases.release(grant.lease_id, grant.token);
  return grant.epochs[key]!;
}

async function codeOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return 'resolved';
  } catch (e) {
    return e instanceof WritError ? e.code : `not a WritError: ${String(e)}`;
  }
}

/** The files of `dir` (a store's -wal and -shm come and go with its journal mode, so they are left out). */
function listing(dir: string): string[] {
  return readdirSync(dir).filter((f) => !f.endsWith('-wal') && !f.endsWith('-shm')).sort();
}

describe('online backup of the SQLite store', () => {
  it('copies a consistent store while writes continue on it, and never overwrites a file', async () => {
    const dir = tempDir();
    const file = join(dir, 'writ.sqlite');
    // Commits settle in the turn they are made (synced on this thread), so writes land between backup steps.
    const store = await openSqliteStore(file, { sync: syncNow });
    const s = services(store);
    // Enough pages that the copy takes several steps, so writes land between them.
    for (let i = 0; i < 400; i++) await writeOnce(s, `wp:post:${i % 40}`, i);
    const before = summarize(file).receipt_head.seq;
    let writes = 0;
    let stop = false;
    const load = (async () => {
      for (let i = 0; !stop; i++) {
        await writeOnce(s, `wp:post:${i % 7}`, 10_000 + i);
        writes++;
      }
    })();
    const source = openForBackup(file);
    // A copy during which no write landed proves nothing (on a loaded machine a write can take longer
    // than the whole copy): copy again, to a new name, until one did.
    let b!: Awaited<ReturnType<typeof backupSqliteStore>>;
    let writesDuring = 0;
    let copyName = 'copy.sqlite';
    for (let attempt = 1; attempt <= 20 && writesDuring === 0; attempt++) {
      copyName = attempt === 1 ? 'copy.sqlite' : `copy-${attempt}.sqlite`;
      const writesAtStart = writes;
      b = await backupSqliteStore(source, join(dir, copyName));
      writesDuring = writes - writesAtStart;
    }
    await new Promise((r) => setTimeout(r, 50));
    stop = true;
    await load;
    source.close();
    expect(writesDuring).toBeGreaterThan(0);
    // The copy holds a prefix of the chain: at least what was there before, less than what is there now.
    expect(b.receipt_head.seq).toBeGreaterThanOrEqual(before);
    expect(b.receipt_head.seq).toBeLessThan(summarize(file).receipt_head.seq);
    expect(existsSync(join(dir, `${copyName}-wal`))).toBe(false);
    expect(listing(dir).filter((f) => f.includes('partial'))).toEqual([]);
    const copy = await openSqliteStore(join(dir, copyName), { checkpointer: false });
    const verdict = await new ReceiptLog({ store: copy, clock: systemClock }).verifyChain();
    expect(verdict).toMatchObject({ ok: true, entries: b.receipt_head.seq });
    await copy.close();

    const again = openForBackup(file);
    expect(await codeOf(backupSqliteStore(again, join(dir, 'copy.sqlite')))).toBe('UNPROCESSABLE');
    again.close();
    await store.close();
  }, 60_000);
});

describe('online backup from the serving connection itself', () => {
  it('copies a consistent store from SqliteStore.writer while the same store keeps committing', async () => {
    const dir = tempDir();
    const file = join(dir, 'writ.sqlite');
    // Commits settle in the turn they are made (synced on this thread), so writes land between backup steps.
    const store = await openSqliteStore(file, { sync: syncNow });
    const s = services(store);
    for (let i = 0; i < 400; i++) await writeOnce(s, `wp:post:${i % 40}`, i);
    let writes = 0;
    let stop = false;
    const load = (async () => {
      for (let i = 0; !stop; i++) {
        await writeOnce(s, `wp:post:${i % 7}`, 10_000 + i);
        writes++;
      }
    })();
    const writesAtStart = writes;
    const b = await backupSqliteStore(store.writer, join(dir, 'copy.sqlite'));
    const writesDuring = writes - writesAtStart;
    stop = true;
    await load;
    expect(writesDuring).toBeGreaterThan(0);
    const copy = await openSqliteStore(join(dir, 'copy.sqlite'), { checkpointer: false });
    expect(await new ReceiptLog({ store: copy, clock: systemClock }).verifyChain()).toMatchObject({ ok: true, entries: b.receipt_head.seq });
    await copy.close();
    await store.close();
  }, 60_000);
});

describe('restoring a backup never lets a fencing epoch repeat', () => {
  async function storyWithLostWrites() {
    const dir = tempDir();
    const file = join(dir, 'writ.sqlite');
    let store = await openSqliteStore(file);
    let s = services(store);
    for (let i = 0; i < 3; i++) await writeOnce(s, 'k:old', i);
    const principal = (id: string) => ({ type: 'principal.upsert', principal: { id, kind: 'agent' } }) as unknown as GraphEvent;
    await store.readWrite((tx) => tx.graph.append([principal('agent-a'), principal('agent-h')], 'governance', Date.now()));
    // A lease held when the backup is taken: its holder still has the token after the restore.
    const held = await s.leases.acquire({ resources: ['k:held'], holder: 'agent-h', priority: 0, ttlMs: 120_000 });
    const source = openForBackup(file);
    const backup = await backupSqliteStore(source, join(dir, 'backup.sqlite'));
    source.close();
    // After the backup: more epochs on known keys, and a key the backup never saw. All of this is lost.
    const issuedAfter: Record<string, number> = {};
    for (let i = 0; i < 5; i++) issuedAfter['k:old'] = await writeOnce(s, 'k:old', 100 + i);
    for (let i = 0; i < 2; i++) issuedAfter['k:new'] = await writeOnce(s, 'k:new', 200 + i);
    await store.readWrite((tx) => tx.graph.append([principal('agent-lost')], 'governance', Date.now()));
    await store.close();
    return { dir, file, backup, held, issuedAfter, reopen: async () => ((store = await openSqliteStore(file)), (s = services(store)), { store, s }) };
  }

  it('with --epoch-margin: old epochs and old leases are refused, new epochs are above every epoch issued before, the chain verifies', async () => {
    const t = await storyWithLostWrites();
    expect(t.backup.max_epoch).toBe(3);
    expect(t.issuedAfter).toEqual({ 'k:old': 8, 'k:new': 2 });
    const lostHead = summarize(t.file).receipt_head;

    const r = await restoreSqliteStore(t.backup.file, t.file, { epochMargin: 1000, actor: 'operator:test', reason: 'disk lost', now: Date.now() });
    // The margin is added above the replaced store's epochs too (k:old reached 8 there, the backup holds 3).
    expect(r.bump).toMatchObject({ kind: 'RESTORE', margin: 1000, floor: 1000, leases_ended: 1, max_epoch: 1008, detail: { backup_receipt_head: t.backup.receipt_head, replaced_max_epoch: 8 } });
    // Nothing is deleted: the replaced file is kept, with the lost timeline in it.
    expect(r.previous_kept_at).not.toBeNull();
    expect(summarize(r.previous_kept_at!).receipt_head).toEqual(lostHead);

    const { store, s } = await t.reopen();
    // The lease held at backup time is over, and its epoch is below the key's high-water mark.
    await expect(s.leases.renew(t.held.lease_id, t.held.token)).rejects.toMatchObject({ code: 'LEASE_EXPIRED' });
    await expect(s.leases.validateFence({ key: 'k:held', principal: 'agent-h', token: t.held.token, lease_id: t.held.lease_id, epoch: t.held.epochs['k:held']! })).rejects.toMatchObject({ code: 'STALE_FENCING_EPOCH' });
    // Every epoch handed out from now on is above anything issued before the restore, on known and unknown keys.
    for (const [key, lost] of Object.entries({ ...t.issuedAfter, 'k:held': 1 })) {
      const epoch = await writeOnce(s, key, 999);
      expect(epoch, key).toBeGreaterThan(lost);
      expect(epoch, key).toBeGreaterThan(1000);
    }
    const verdict = await s.receipts.verifyChain();
    expect(verdict.ok).toBe(true);
    expect(verdict.entries).toBe(t.backup.receipt_head.seq + 3);
    // The graph log's hash chain came with the backup: every event of it verifies, hashed as it was written.
    expect(t.backup.graph_revision).toBeGreaterThan(0);
    expect(verdict.graph).toMatchObject({ ok: true, events: t.backup.graph_revision, revision: t.backup.graph_revision, unhashed: 0 });
    expect((await s.leases.epochBumps()).map((b) => b.kind)).toEqual(['RESTORE']);
    await store.close();
  }, 60_000);

  it('restores into a data directory that has no store yet (a new machine)', async () => {
    const t = await storyWithLostWrites();
    const fresh = join(tempDir(), 'new-host', 'data', 'writ.sqlite');
    const r = await restoreSqliteStore(t.backup.file, fresh, { epochMargin: 500, actor: 'operator:test', reason: 'moved', now: Date.now() });
    expect(r.previous_kept_at).toBeNull();
    expect(summarize(fresh)).toMatchObject({ receipt_head: t.backup.receipt_head, max_epoch: 503 });
  }, 60_000);

  it('--trust-backup (margin 0) keeps the epochs: with the store that issued more lost, the next one repeats an epoch issued after the backup (why a margin is needed)', async () => {
    const t = await storyWithLostWrites();
    const fresh = join(tempDir(), 'writ.sqlite');
    await restoreSqliteStore(t.backup.file, fresh, { epochMargin: 0, actor: 'operator:test', reason: 'trusted', now: Date.now() });
    const store = await openSqliteStore(fresh);
    const s = services(store);
    expect(await writeOnce(s, 'k:old', 1)).toBe(4);
    expect(await writeOnce(s, 'k:new', 1)).toBe(1);
    expect((await s.leases.epochBumps())[0]).toMatchObject({ kind: 'RESTORE', margin: 0 });
    await store.close();
  }, 60_000);

  it('--trust-backup over the store it replaces still takes that store\'s higher epochs: nothing it issued repeats', async () => {
    const t = await storyWithLostWrites();
    await restoreSqliteStore(t.backup.file, t.file, { epochMargin: 0, actor: 'operator:test', reason: 'trusted', now: Date.now() });
    const { store, s } = await t.reopen();
    expect(await writeOnce(s, 'k:old', 1)).toBe(9);
    expect(await writeOnce(s, 'k:new', 1)).toBe(3);
    await store.close();
  }, 60_000);

  it('a key the backup never saw, carried from the replaced store, starts above the highest floor of the merged record, not the latest row\'s', async () => {
    const dir = tempDir();
    let store = await openSqliteStore(join(dir, 'writ.sqlite'));
    await writeOnce(services(store), 'k:a', 1);
    const older = await backupSqliteStore(store.writer, join(dir, 'older.sqlite'));
    await store.readWrite((tx) => tx.leases.bumpEpochs({ kind: 'BUMP', margin: 1000, actor: 'operator:test', reason: 'PITR', detail: {}, now: Date.now() }));
    const newer = await backupSqliteStore(store.writer, join(dir, 'newer.sqlite'));
    await store.close();
    // That machine is lost. A new one gets the older backup first (floor 5), and leases a key the newer backup never saw.
    const file = join(tempDir(), 'writ.sqlite');
    await restoreSqliteStore(older.file, file, { epochMargin: 5, actor: 'operator:test', reason: 'first try', now: Date.now() });
    store = await openSqliteStore(file);
    expect(await writeOnce(services(store), 'k:x', 1)).toBe(6);
    await store.close();
    // Then the newer one: its record (floor 1000) and the replaced store's (floor 5) carried after it.
    const r = await restoreSqliteStore(newer.file, file, { epochMargin: 10, actor: 'operator:test', reason: 'the newer backup', now: Date.now() });
    expect(r.bump).toMatchObject({ floor: 1010 });
    store = await openSqliteStore(file);
    const s = services(store);
    expect((await s.leases.epochBumps()).map((b) => [b.kind, b.floor])).toEqual([['BUMP', 1000], ['RESTORE', 5], ['RESTORE', 1010]]);
    // In the newer backup's timeline k:x would have started above 1000: after a margin of 10, above 1010, as any new key.
    expect(await writeOnce(s, 'k:x', 2)).toBe(1011);
    expect(await writeOnce(s, 'k:never', 1)).toBe(1011);
    await store.close();
  }, 60_000);

  it('refuses while another connection has the store open (STORE_IN_USE), and a file that is not a backup, changing nothing', async () => {
    const t = await storyWithLostWrites();
    const head = summarize(t.file).receipt_head;
    const files = listing(t.dir);
    const running = await openSqliteStore(t.file);
    const options = { epochMargin: 10, actor: 'operator:test', reason: 'x', now: Date.now() };
    expect(await codeOf(restoreSqliteStore(t.backup.file, t.file, options))).toBe('STORE_IN_USE');
    await running.close();

    writeFileSync(join(t.dir, 'junk.sqlite'), 'not a database at all');
    expect(await codeOf(restoreSqliteStore(join(t.dir, 'junk.sqlite'), t.file, options))).toBe('UNPROCESSABLE');
    const other = new Database(join(t.dir, 'other.sqlite'));
    other.exec('CREATE TABLE t (x)');
    other.close();
    expect(await codeOf(restoreSqliteStore(join(t.dir, 'other.sqlite'), t.file, options))).toBe('UNPROCESSABLE');
    // A live database (a -wal beside it) is not a backup.
    const live = await openSqliteStore(join(t.dir, 'live.sqlite'), { checkpointer: false });
    await live.readWrite((tx) => tx.leases.bumpEpochs({ kind: 'BUMP', margin: 1, actor: 'a', reason: 'r', detail: {}, now: 1 }));
    expect(await codeOf(restoreSqliteStore(join(t.dir, 'live.sqlite'), t.file, options))).toBe('UNPROCESSABLE');
    await live.close();
    expect(await codeOf(restoreSqliteStore(join(t.dir, 'missing.sqlite'), t.file, options))).toBe('NOT_FOUND');
    // Another application's WAL-mode database, closed cleanly: refused the same way twice, nothing made beside it (no -wal, no -shm).
    const walApp = join(t.dir, 'app-wal.sqlite');
    const app = new Database(walApp);
    app.pragma('journal_mode = WAL');
    app.exec('CREATE TABLE t (x)');
    app.close();
    for (let i = 0; i < 2; i++) await expect(restoreSqliteStore(walApp, t.file, options)).rejects.toMatchObject({ code: 'UNPROCESSABLE', message: `${walApp} is not a Writ store (it has no schema_migrations table)` });
    expect(readdirSync(t.dir).filter((f) => f.startsWith('app-wal'))).toEqual(['app-wal.sqlite']);

    expect(summarize(t.file).receipt_head).toEqual(head);
    expect(listing(t.dir).filter((f) => !['junk.sqlite', 'other.sqlite', 'live.sqlite', 'app-wal.sqlite'].includes(f))).toEqual(files);
  }, 60_000);
});

/**
 * The file's bytes but those a refused restore's check may change: the journal mode (header bytes
 * 18-19, WAL to rollback, its WAL folded in) and the change counters that go with it (24-27, 92-95).
 */
function content(file: string): Buffer {
  const b = readFileSync(file);
  b.fill(0, 18, 20);
  b.fill(0, 24, 28);
  b.fill(0, 92, 96);
  return b;
}


describe('restoring over a damaged store', () => {
  async function storyWithDamage(what: { table: string } | 'header') {
    const dir = tempDir();
    const file = join(dir, 'writ.sqlite');
    const store = await openSqliteStore(file);
    const s = services(store);
    for (let i = 0; i < 3; i++) await writeOnce(s, 'k:old', i);
    const backup = await backupSqliteStore(store.writer, join(dir, 'backup.sqlite'));
    for (let i = 0; i < 5; i++) await writeOnce(s, 'k:old', 100 + i);
    await store.close();
    damageSqlite(file, what);
    return { dir, file, backup, bytes: content(file) };
  }
  const options = (over: Partial<Parameters<typeof restoreSqliteStore>[2]> = {}) => ({ epochMargin: 1000, actor: 'operator:test', reason: 'disk failing', now: Date.now(), ...over });

  for (const what of [{ table: 'lease_keys' }, { table: 'lease_epoch_bumps' }, 'header'] as const) {
    const name = what === 'header' ? 'not a database (its header overwritten)' : `malformed (the ${what.table} table's root page overwritten)`;
    it(`${name}: refused with STORE_DAMAGED, saying why and what to do, changing nothing; --replace-damaged with a margin replaces it, kept aside, and records it`, async () => {
      const t = await storyWithDamage(what);
      const files = listing(t.dir);
      const refused = await restoreSqliteStore(t.backup.file, t.file, options()).then(() => null, (e: unknown) => e);
      expect(refused).toBeInstanceOf(WritError);
      expect(refused).toMatchObject({ code: 'STORE_DAMAGED', message: expect.stringContaining(`the current store ${t.file} is damaged`) });
      expect((refused as Error).message).toContain('--replace-damaged');
      expect((refused as Error).message).toContain('so that epochs keep rising above them');
      expect(content(t.file).equals(t.bytes)).toBe(true);
      expect(listing(t.dir)).toEqual(files);
      // Without its epochs, only a margin keeps them from repeating: --trust-backup is refused.
      expect(await codeOf(restoreSqliteStore(t.backup.file, t.file, options({ epochMargin: 0, replaceDamaged: true })))).toBe('UNPROCESSABLE');
      expect(listing(t.dir)).toEqual(files);

      const r = await restoreSqliteStore(t.backup.file, t.file, options({ replaceDamaged: true }));
      expect(r.previous_kept_at).not.toBeNull();
      expect(content(r.previous_kept_at!).equals(t.bytes)).toBe(true);
      expect(r.bump).toMatchObject({ kind: 'RESTORE', margin: 1000, floor: 1000, detail: { replaced_file_kept_at: r.previous_kept_at, replaced_damaged: expect.stringMatching(/^SQLITE_(CORRUPT|NOTADB)/) } });
      const store = await openSqliteStore(t.file);
      // The damaged store issued 4..8 on k:old after the backup (epoch 3): the margin is above them.
      expect(await writeOnce(services(store), 'k:old', 1)).toBe(1004);
      await store.close();
    }, 60_000);
  }

  it('not a database, with a -shm beside it (a process may still have it open): refused even with --replace-damaged', async () => {
    const t = await storyWithDamage('header');
    writeFileSync(`${t.file}-shm`, Buffer.alloc(32_768));
    const files = listing(t.dir);
    await expect(restoreSqliteStore(t.backup.file, t.file, options({ replaceDamaged: true }))).rejects.toMatchObject({
      code: 'STORE_DAMAGED',
      message: expect.stringContaining('writ.sqlite-shm beside it may belong to a process that still has it open'),
    });
    expect(content(t.file).equals(t.bytes)).toBe(true);
    expect(listing(t.dir)).toEqual(files);
    expect(existsSync(`${t.file}-shm`)).toBe(true);
  }, 60_000);

  it('moved aside by hand without its -wal: refused, since SQLite would apply that WAL to the restored file', async () => {
    const t = await storyWithDamage('header');
    renameSync(t.file, join(t.dir, 'damaged.sqlite'));
    writeFileSync(`${t.file}-wal`, 'the moved store\'s WAL');
    await expect(restoreSqliteStore(t.backup.file, t.file, options())).rejects.toMatchObject({ code: 'UNPROCESSABLE', message: expect.stringContaining('writ.sqlite-wal is there without writ.sqlite') });
    expect(existsSync(t.file)).toBe(false);
  }, 60_000);
});

describe('a Writ starting while the restore swaps the files', () => {
  it('ends up on the restored store, never on the replaced file (a real process, started once the restore found the store not in use)', async () => {
    requireDist();
    const dir = tempDir();
    const file = join(dir, 'writ.sqlite');
    const store = await openSqliteStore(file);
    const s = services(store);
    await writeOnce(s, 'k:a', 1);
    const backup = await backupSqliteStore(store.writer, join(dir, 'backup.sqlite'));
    await store.close();
    let opener: Promise<string> | undefined;
    const r = await restoreSqliteStore(backup.file, file, {
      epochMargin: 1000, actor: 'operator:test', reason: 'race', now: Date.now(),
      beforeSwap: async () => {
        const child = spawn(process.execPath, [join(dirname(fileURLToPath(import.meta.url)), 'fixtures/store-opener.mjs'), join(REPO, 'dist'), file, 'k:new'], { stdio: ['ignore', 'pipe', 'pipe'] });
        let out = '';
        let err = '';
        child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
        let opening!: () => void;
        const started = new Promise<void>((resolve) => (opening = resolve));
        child.stdout!.on('data', (d: Buffer) => {
          out += d.toString();
          if (out.includes('opening\n')) opening();
        });
        opener = new Promise((resolve) => child.on('exit', (code) => resolve(`${code}\n${out}${err}`)));
        await started;
        // Long enough for it to open the file and, unless held off, take it over.
        await new Promise((res) => setTimeout(res, 500));
      },
    });
    expect(r.bump.kind).toBe('RESTORE');
    const result = await opener!;
    const [code, , line] = result.split('\n');
    expect(code, result).toBe('0');
    // It runs on the restored store: the restore's record is there, and a new key starts above its floor.
    expect(JSON.parse(line!)).toEqual({ bumps: ['RESTORE'], epoch: 1001 });
    // The replaced file, kept aside, was not written by it.
    expect(summarize(r.previous_kept_at!).max_epoch).toBe(1);
  }, 60_000);
});
