import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../../scripts/server-process.js';
import { isWritError, type WritError } from '../../../src/errors.js';
import pg from 'pg';
import { GOVERNANCE_ID } from '../../../src/graph/model.js';
import { migratePostgres, openPostgresStore, POSTGRES_MIGRATIONS, postgresHoldsStore } from '../../../src/store/postgres/index.js';
import { decideLeaseWrite } from '../../support/agent.js';
import { startHarness } from '../../support/harness.js';
import { runWrit } from '../../support/cli.js';
import { takeEpochs } from '../../support/data-dir-epochs.js';
import { requireDist } from '../../support/server-process.js';
import { createTestDatabase, sql } from '../conformance/engines.js';

/**
 * Mistakes in setting up the database (its name, the role, its rights, a restore cut short) are the
 * operator's to fix, not bugs: each is refused with a code and a message that says what to fix, never
 * with INTERNAL, and never with the password of the URL in it.
 */
const cleanups: (() => Promise<void>)[] = [];
beforeAll(() => requireDist());
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

/**
 * A login role of the test's own on the database at `dbUrl` (dropped, with what it owns, after the test),
 * the `setup` statements run as the owner, and that database's URL as the role.
 */
async function roleOn(dbUrl: string, role: string, setup: string[], password?: string): Promise<URL> {
  await sql(dbUrl, `CREATE ROLE ${role} LOGIN${password === undefined ? '' : ` PASSWORD '${password}'`}`);
  cleanups.push(async () => { await sql(dbUrl, `DROP OWNED BY ${role}`); await sql(dbUrl, `DROP ROLE ${role}`); });
  for (const statement of setup) await sql(dbUrl, statement);
  const url = new URL(dbUrl);
  url.username = role;
  if (password !== undefined) url.password = password;
  return url;
}

/**
 * The rights Writ needs at run time on a database another role (its owner) migrated, as the README says:
 * USAGE on the schema, SELECT, INSERT, UPDATE, DELETE on its tables, USAGE on its sequences; and neither
 * CREATE on the schema nor TEMPORARY on the database (both revoked from PUBLIC here).
 */
function runtimeRights(dbUrl: string, role: string): string[] {
  const name = new URL(dbUrl).pathname.slice(1);
  return [
    'REVOKE CREATE ON SCHEMA public FROM PUBLIC',
    `REVOKE TEMPORARY ON DATABASE ${name} FROM PUBLIC`,
    `GRANT USAGE ON SCHEMA public TO ${role}`,
    `GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO ${role}`,
    `GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO ${role}`,
  ];
}

async function refusal(p: Promise<unknown>): Promise<WritError> {
  const e = await p.then(() => undefined, (err: unknown) => err);
  expect(isWritError(e), `not a WritError: ${String(e)}`).toBe(true);
  return e as WritError;
}

describe('PostgreSQL setup mistakes', () => {
  it('a database that does not exist is named, with what to do, and no password', async () => {
    const url = 'postgres://postgres:s3cret-pw@127.0.0.1:5432/writ_no_such_database';
    for (const e of [await refusal(openPostgresStore(url)), await refusal(postgresHoldsStore(url))]) {
      expect(e.code).toBe('UNPROCESSABLE');
      expect(e.message).toMatch(/database "writ_no_such_database" does not exist/);
      expect(e.message).toMatch(/create it|--database/);
      expect(e.message).not.toContain('s3cret-pw');
      expect(e.details).toMatchObject({ sqlstate: '3D000' });
    }
  });

  it('a server that cannot be reached is named, with what to check, and no password (OVERLOADED: it may come back)', async () => {
    const port = await freePort(); // nothing listens there
    const url = `postgres://postgres:s3cret-pw@127.0.0.1:${port}/writ`;
    for (const e of [await refusal(openPostgresStore(url)), await refusal(postgresHoldsStore(url))]) {
      expect(e.code).toBe('OVERLOADED');
      expect(e.message).toContain(`PostgreSQL at postgres://postgres:…@127.0.0.1:${port}/writ cannot be reached`);
      expect(e.message).toMatch(/ECONNREFUSED/);
      expect(e.message).toMatch(/host and port in --database \/ WRIT_DATABASE_URL; nothing was changed$/);
      expect(e.message).not.toContain('s3cret-pw');
    }
  });

  it('an unknown role is named, with what to do, and no password', async () => {
    const e = await refusal(openPostgresStore('postgres://writ_nobody_here:pw-hidden@127.0.0.1:5432/postgres'));
    expect(e.code).toBe('UNPROCESSABLE');
    expect(e.message).toMatch(/writ_nobody_here/);
    expect(e.message).not.toContain('pw-hidden');
    expect(e.details).toMatchObject({ sqlstate: '28000' });
  });

  it('a role without the right to create Writ\'s tables is told so', async () => {
    const db = await createTestDatabase('writ_setup');
    cleanups.push(db.drop);
    const url = await roleOn(db.url, `writ_weak_${process.pid}`, ['REVOKE CREATE ON SCHEMA public FROM PUBLIC']);
    const e = await refusal(openPostgresStore(url.toString()));
    expect(e.code).toBe('UNPROCESSABLE');
    expect(e.message).toMatch(/permission denied/);
    expect(e.message).toMatch(/GRANT|owner/);
    expect(e.details).toMatchObject({ sqlstate: '42501' });
  });

  it('a role with CREATE and USAGE on the schema but without TEMP on the database is told to grant TEMP, for migration 10', async () => {
    const db = await createTestDatabase('writ_setup');
    cleanups.push(db.drop);
    const role = `writ_notemp_${process.pid}`;
    const name = new URL(db.url).pathname.slice(1);
    const url = await roleOn(db.url, role, [`GRANT CREATE, USAGE ON SCHEMA public TO ${role}`, `REVOKE TEMPORARY ON DATABASE ${name} FROM PUBLIC`]);
    const e = await refusal(openPostgresStore(url.toString()));
    expect(e.code).toBe('UNPROCESSABLE');
    expect(e.message).toMatch(/permission denied to create temporary tables/);
    expect(e.message).toContain(`GRANT TEMPORARY ON DATABASE ${name} TO ${role}`);
    expect(e.message).toMatch(/migration 10 \(receipts index: the decision each receipt presented\) changed nothing; migrations up to 9 are applied/);
    expect(e.message).not.toMatch(/nothing was changed/);
    expect(e.details).toMatchObject({ sqlstate: '42501', migration: 10, schema_version: 9 });
    // Granted as told, the next start migrates the rest.
    await sql(db.url, `GRANT TEMPORARY ON DATABASE ${name} TO ${role}`);
    await (await openPostgresStore(url.toString())).close();
  });

  it('a role with only the rights Writ needs at run time starts on a database its owner migrated, and serves: decisions, leases, writes, receipts, checkpoints', { timeout: 120_000 }, async () => {
    const db = await createTestDatabase('writ_setup');
    cleanups.push(db.drop);
    await (await openPostgresStore(db.url)).close(); // migrated by the database's owner
    const role = `writ_runtime_${process.pid}`;
    const url = (await roleOn(db.url, role, runtimeRights(db.url, role))).toString();
    // Starting checked the right to create schema_migrations (CREATE TABLE IF NOT EXISTS) though it was there.
    await (await openPostgresStore(url)).close();
    const data = mkdtempSync(join(tmpdir(), 'writ-runtime-role-'));
    cleanups.push(async () => rmSync(data, { recursive: true, force: true }));
    const migrated = await runWrit(data, 'migrate', '--database', url);
    expect([migrated.code, migrated.output]).toEqual([0, expect.stringMatching(/schema at version \d+/)]);

    const h = await startHarness({ databaseUrl: url, upstream: true });
    cleanups.push(() => h.close());
    const { answer: write } = await decideLeaseWrite(h, 'seo-agent-7', { resource: 'wp:post:1024', payload: { title: 'run-time role' }, expected_version: 0 }, { release: true });
    expect(write.status, JSON.stringify(write.body)).toBe(201);
    await h.ctx.receipts.checkpoint();
    const verified = await h.call(GOVERNANCE_ID, { method: 'GET', url: '/v1/audit/verify' });
    expect([verified.status, verified.body.ok], JSON.stringify(verified.body)).toEqual([200, true]);
    const verify = await runWrit(h.dataDir, 'audit', 'verify', '--database', url);
    expect([verify.code, verify.output]).toEqual([0, expect.stringMatching(/^OK: /)]);
  });

  it('a role with only the run-time rights, on a database with migrations pending, is told the grant to make; nothing was changed', async () => {
    const db = await createTestDatabase('writ_setup');
    cleanups.push(db.drop);
    const last = Math.max(...POSTGRES_MIGRATIONS.map((m) => m.version));
    const owner = new pg.Client(db.url);
    await owner.connect();
    await migratePostgres(owner, POSTGRES_MIGRATIONS.filter((m) => m.version < last)).finally(() => owner.end());
    const role = `writ_runtime_pending_${process.pid}`;
    const url = await roleOn(db.url, role, runtimeRights(db.url, role));
    const e = await refusal(openPostgresStore(url.toString()));
    expect(e.code).toBe('UNPROCESSABLE');
    expect(e.message).toMatch(/permission denied|must be owner/);
    expect(e.message).toMatch(/give the role the rights Writ needs: make it the owner of the database .* or GRANT it CREATE and USAGE on the schema/);
    expect(e.message).toMatch(new RegExp(`migration ${last} \\(.+\\) was not applied; nothing was changed$`));
    expect(e.details).toMatchObject({ sqlstate: '42501', migration: last, schema_version: last - 1 });
    expect((await sql<{ version: number }>(db.url, 'SELECT max(version)::int AS version FROM schema_migrations'))[0]!.version).toBe(last - 1);
  });

  for (const [what, keep] of [['no migration record', 0], ['a partial migration record', 2]] as const) {
    it(`a database holding Writ's objects but ${what} (a restore cut short) is refused, and nothing is changed`, async () => {
      const db = await createTestDatabase('writ_setup');
      cleanups.push(db.drop);
      await (await openPostgresStore(db.url)).close();
      await sql(db.url, 'DELETE FROM schema_migrations WHERE version > $1', [keep]);
      const before = await sql(db.url, "SELECT count(*)::int AS n FROM pg_class WHERE relnamespace = 'public'::regnamespace");
      // Without migrating (a command that must write nothing), a partial record reads as an older schema: `writ migrate` then says this.
      for (const migrate of keep === 0 ? [true, false] : [true]) {
        const e = await refusal(openPostgresStore(db.url, { migrate }));
        expect(e.code).toBe('UNPROCESSABLE');
        expect(e.message).toMatch(/partial or foreign Writ schema/);
        expect(e.message).toMatch(/restore it again|empty database/);
      }
      expect(await sql(db.url, "SELECT count(*)::int AS n FROM pg_class WHERE relnamespace = 'public'::regnamespace")).toEqual(before);
      expect((await sql<{ version: number }>(db.url, 'SELECT version FROM schema_migrations')).map((r) => r.version)).toEqual(keep === 0 ? [] : [1, 2]);
    });
  }

  // writ store copy --to migrates the database before copying (as a start does) and copies in one
  // transaction: a right missing for either is told the same way, and the SQLite file is left as it was.
  it('writ store copy --to with a role without TEMP on the database is told to grant it, for migration 10; granted, the copy goes on', { timeout: 60_000 }, async () => {
    const data = mkdtempSync(join(tmpdir(), 'writ-copy-notemp-'));
    cleanups.push(async () => rmSync(data, { recursive: true, force: true }));
    expect(await takeEpochs(data, 'wp:post:1', 2)).toEqual([1, 2]);
    const files = readdirSync(data).sort();
    const db = await createTestDatabase('writ_setup');
    cleanups.push(db.drop);
    const role = `writ_copy_notemp_${process.pid}`;
    const name = new URL(db.url).pathname.slice(1);
    const to = await roleOn(db.url, role, [`GRANT CREATE, USAGE ON SCHEMA public TO ${role}`, `REVOKE TEMPORARY ON DATABASE ${name} FROM PUBLIC`], 'pw-hidden');
    const r = await runWrit(data, 'store', 'copy', '--to', to.toString());
    expect(r.code, r.output).toBe(1);
    expect(r.output).toMatch(/^writ: UNPROCESSABLE \(Unprocessable\): .*permission denied to create temporary tables/m);
    expect(r.output).toContain(`GRANT TEMPORARY ON DATABASE ${name} TO ${role}`);
    expect(r.output).toMatch(/or use another role in --to\); migration 10 \(receipts index: the decision each receipt presented\) changed nothing; migrations up to 9 are applied$/m);
    expect(r.output).not.toMatch(/\n\s+at /);
    expect(r.output).not.toContain('pw-hidden');
    // Not marked as moved: a server still starts on it, and its epochs go on.
    expect(readdirSync(data).sort()).toEqual(files);
    expect(await takeEpochs(data, 'wp:post:1', 1)).toEqual([3]);
    // Granted as told, the same command migrates the rest and copies.
    await sql(db.url, `GRANT TEMPORARY ON DATABASE ${name} TO ${role}`);
    const again = await runWrit(data, 'store', 'copy', '--to', to.toString());
    expect(again.code, again.output).toBe(0);
    expect(again.output).toMatch(/leases: 1 keys \(highest fencing epoch 3\)/);
  });

  it('writ store copy --to with a role lacking rights on Writ\'s sequences (tables another role made) is told what is missing; the copy is rolled back and the file not marked moved', { timeout: 60_000 }, async () => {
    const data = mkdtempSync(join(tmpdir(), 'writ-copy-noseq-'));
    cleanups.push(async () => rmSync(data, { recursive: true, force: true }));
    expect(await takeEpochs(data, 'wp:post:1', 2)).toEqual([1, 2]);
    const files = readdirSync(data).sort();
    const db = await createTestDatabase('writ_setup');
    cleanups.push(db.drop);
    await (await openPostgresStore(db.url)).close(); // migrated by the database's owner
    const role = `writ_copy_noseq_${process.pid}`;
    const to = await roleOn(db.url, role, [`GRANT CREATE, USAGE ON SCHEMA public TO ${role}`, `GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO ${role}`]);
    const r = await runWrit(data, 'store', 'copy', '--to', to.toString());
    expect(r.code, r.output).toBe(1);
    expect(r.output).toMatch(/^writ: UNPROCESSABLE \(Unprocessable\): .*permission denied for sequence .*\(SQLSTATE 42501\): give the role the rights Writ needs: .*or use another role in --to; nothing was changed$/m);
    expect(r.output).not.toMatch(/\n\s+at /);
    expect(readdirSync(data).sort()).toEqual(files);
    expect(await takeEpochs(data, 'wp:post:1', 1)).toEqual([3]);
    expect(await sql(db.url, 'SELECT count(*)::int AS n FROM lease_keys')).toEqual([{ n: 0 }]);
  });

  it('writ migrate --database with a role without TEMP on the database is told to grant it, for migration 10', { timeout: 60_000 }, async () => {
    const data = mkdtempSync(join(tmpdir(), 'writ-migrate-notemp-'));
    cleanups.push(async () => rmSync(data, { recursive: true, force: true }));
    const db = await createTestDatabase('writ_setup');
    cleanups.push(db.drop);
    const role = `writ_migrate_notemp_${process.pid}`;
    const name = new URL(db.url).pathname.slice(1);
    const url = await roleOn(db.url, role, [`GRANT CREATE, USAGE ON SCHEMA public TO ${role}`, `REVOKE TEMPORARY ON DATABASE ${name} FROM PUBLIC`]);
    const r = await runWrit(data, 'migrate', '--database', url.toString());
    expect(r.code, r.output).toBe(1);
    expect(r.output).toContain(`GRANT TEMPORARY ON DATABASE ${name} TO ${role}`);
    expect(r.output).toMatch(/or use another role in --database \/ WRIT_DATABASE_URL\); migration 10 \(receipts index: the decision each receipt presented\) changed nothing; migrations up to 9 are applied$/m);
    expect(r.output).not.toMatch(/\n\s+at /);
  });
});
