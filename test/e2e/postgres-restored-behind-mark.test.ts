import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { WritClient } from '../../src/sdk/index.js';
import { ADMIN_URL, createTestDatabase, sql } from '../store/conformance/engines.js';
import { fixtureKey } from '../support/harness.js';
import { runWrit } from '../support/cli.js';
import { startServerProcess, type ServerProcess } from '../support/server-process.js';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const alice = (url: string) => new WritClient({ baseUrl: url, principal: 'editor-alice', privateJwk: fixtureKey('editor-alice') });

/** Takes and releases a lease on the title of `resource`; returns its fencing epoch. */
async function leaseEpoch(c: WritClient, resource: string): Promise<number> {
  const d = await c.decide({ action: 'update_post', resource, environment: 'production', fields: ['title'] });
  const lease = await c.acquireLease([d], { ttlMs: 5_000 });
  await c.releaseLease(lease);
  return Math.max(...Object.values(lease.epochs));
}

/** What the database holds that the check must not change. */
async function fingerprint(url: string) {
  const [row] = await sql<{ epoch: string; bumps: string; graph: string }>(url, `SELECT
      (SELECT coalesce(max(epoch), 0) FROM lease_keys)::text AS epoch,
      (SELECT count(*) FROM lease_epoch_bumps)::text AS bumps,
      (SELECT count(*) FROM graph_events)::text AS graph`);
  return row;
}

describe('a replica notices its PostgreSQL database restored to an earlier point (real processes)', () => {
  it('refuses to start (STORE_BEHIND_MARK, nothing changed) until epochs are bumped; then new epochs are above every epoch issued before', { timeout: 180_000 }, async () => {
    const db = await createTestDatabase('writ_mark');
    cleanups.push(db.drop);
    const work = mkdtempSync(join(tmpdir(), 'writ-mark-'));
    cleanups.push(() => rmSync(work, { recursive: true, force: true }));
    const dataDir = join(work, 'data');
    const env = { WRIT_DATABASE_URL: db.url };
    let server: ServerProcess | undefined = await startServerProcess({ dataDir, env });
    cleanups.push(async () => server?.stop());

    // A second replica with its own data directory (the first one's keys/ and admin.jwk, as README says).
    const dataDir2 = join(work, 'data2');
    cpSync(join(dataDir, 'keys'), join(dataDir2, 'keys'), { recursive: true });
    cpSync(join(dataDir, 'admin.jwk'), join(dataDir2, 'admin.jwk'));
    let replica2: ServerProcess | undefined = await startServerProcess({ dataDir: dataDir2, env });
    cleanups.push(async () => replica2?.stop());

    const issued: number[] = [];
    for (const post of ['wp:post:1', 'wp:post:2']) issued.push(await leaseEpoch(alice(server.url), post));
    const dump = join(work, 'writ.dump');
    execFileSync('pg_dump', ['-Fc', '-f', dump, db.url]);
    // After the backup: the same keys again (on both replicas) and a key the backup never saw. All lost by the restore.
    for (let i = 0; i < 4; i++) issued.push(await leaseEpoch(alice(i % 2 === 0 ? server.url : replica2.url), 'wp:post:1'));
    issued.push(await leaseEpoch(alice(server.url), 'wp:post:3'));
    await replica2.stop();
    replica2 = undefined;
    await server.stop();
    server = undefined;
    const highest = Math.max(...issued);
    const mark = JSON.parse(readFileSync(join(dataDir, 'store-mark.json'), 'utf8')) as { stores: Record<string, { max_epoch: number }> };
    expect(Object.values(mark.stores).map((m) => m.max_epoch)).toEqual([highest]);

    // The database goes back to the backup: dropped, made again, restored.
    const name = new URL(db.url).pathname.slice(1);
    execFileSync('psql', [ADMIN_URL, '-q', '-c', `DROP DATABASE ${name} WITH (FORCE)`, '-c', `CREATE DATABASE ${name}`]);
    execFileSync('pg_restore', ['--no-owner', '-d', db.url, dump]);
    const restored = await fingerprint(db.url);
    expect(Number(restored.epoch)).toBeLessThan(highest);

    const markBefore = readFileSync(join(dataDir, 'store-mark.json'), 'utf8');
    const filesBefore = readdirSync(dataDir).sort();
    const refused = await startServerProcess({ dataDir, env }).then(
      (s) => {
        server = s;
        return '';
      },
      (e: Error) => e.message,
    );
    expect(refused).toContain('STORE_BEHIND_MARK');
    expect(refused).toContain(`the highest fencing epoch from ${highest} to ${restored.epoch}`);
    const by = /writ lease bump-epochs --by (\d+) --reason/.exec(refused)?.[1];
    expect(Number(by)).toBeGreaterThanOrEqual(highest);
    // Nothing was created or changed: not in the database, not in the data directory.
    expect(await fingerprint(db.url)).toEqual(restored);
    expect(readdirSync(dataDir).sort()).toEqual(filesBefore);
    expect(readFileSync(join(dataDir, 'store-mark.json'), 'utf8')).toBe(markBefore);

    // The other replica refuses too, against its own mark.
    const refused2 = await startServerProcess({ dataDir: dataDir2, env }).then(
      (s) => {
        replica2 = s;
        return '';
      },
      (e: Error) => e.message,
    );
    expect(refused2).toContain('STORE_BEHIND_MARK');
    expect(await fingerprint(db.url)).toEqual(restored);

    const bump = await runWrit(dataDir, 'lease', 'bump-epochs', '--by', String(by), '--reason', 'pg_restore of last backup', '--database', db.url);
    expect(bump.code, bump.output).toBe(0);
    server = await startServerProcess({ dataDir, env });
    replica2 = await startServerProcess({ dataDir: dataDir2, env });
    const after = [await leaseEpoch(alice(server.url), 'wp:post:1'), await leaseEpoch(alice(replica2.url), 'wp:post:3')];
    for (const e of after) expect(e).toBeGreaterThan(highest);
    await replica2.stop();
    replica2 = undefined;
    await server.stop();
    server = undefined;
    // The mark followed the database: the next start compares with it, and starts.
    const followed = JSON.parse(readFileSync(join(dataDir, 'store-mark.json'), 'utf8')) as { stores: Record<string, { max_epoch: number; bumps: string[] }> };
    expect(Object.values(followed.stores).map((m) => m.max_epoch)).toEqual([Math.max(...after)]);
    server = await startServerProcess({ dataDir, env });
    await server.stop();
    server = undefined;
  });

  it('the refusal names the database without its password, and the mark keeps none (a password with an "@" in it)', { timeout: 60_000 }, async () => {
    const db = await createTestDatabase('writ_mark');
    cleanups.push(db.drop);
    const dataDir = mkdtempSync(join(tmpdir(), 'writ-mark-'));
    cleanups.push(() => rmSync(dataDir, { recursive: true, force: true }));
    // The test PostgreSQL trusts local connections: the password is sent, never checked.
    const url = db.url.replace('://postgres@', '://postgres:pre@fix-s3cret@');
    expect(url).toContain('pre@fix-s3cret@');
    const env = { WRIT_DATABASE_URL: url };
    const server = await startServerProcess({ dataDir, env });
    await server.stop();
    const markFile = join(dataDir, 'store-mark.json');
    expect(readFileSync(markFile, 'utf8')).not.toContain('s3cret');
    // This replica saw more than the database now holds (as after a restore).
    const mark = JSON.parse(readFileSync(markFile, 'utf8')) as { stores: Record<string, { max_epoch: number }> };
    for (const m of Object.values(mark.stores)) m.max_epoch = 50;
    writeFileSync(markFile, JSON.stringify(mark));
    const refused = await startServerProcess({ dataDir, env }).then(
      async (s) => {
        await s.stop();
        return '';
      },
      (e: Error) => e.message,
    );
    expect(refused).toContain('STORE_BEHIND_MARK');
    expect(refused).toContain(`--database ${db.url.replace('://postgres@', '://postgres:…@')}\``);
    expect(refused).not.toContain('s3cret');
  });

  it('a mark that cannot be read refuses the start with a clear error, nothing created', { timeout: 60_000 }, async () => {
    const db = await createTestDatabase('writ_mark');
    cleanups.push(db.drop);
    const dataDir = mkdtempSync(join(tmpdir(), 'writ-mark-'));
    cleanups.push(() => rmSync(dataDir, { recursive: true, force: true }));
    writeFileSync(join(dataDir, 'store-mark.json'), '{"version":1,"stores":{"abc":');
    const refused = await startServerProcess({ dataDir, env: { WRIT_DATABASE_URL: db.url } }).then(
      async (s) => {
        await s.stop();
        return '';
      },
      (e: Error) => e.message,
    );
    expect(refused).toContain('UNPROCESSABLE');
    expect(refused).toContain(`the store mark ${join(dataDir, 'store-mark.json')} cannot be read: not JSON`);
    expect(readdirSync(dataDir)).toEqual(['store-mark.json']);
    expect(existsSync(join(dataDir, 'keys'))).toBe(false);
  });
});
