import { afterEach, describe, expect, it } from 'vitest';
import { freePort } from '../../../scripts/server-process.js';
import { isWritError, type WritError } from '../../../src/errors.js';
import { openPostgresStore, postgresHoldsStore } from '../../../src/store/postgres/index.js';
import { createTestDatabase, sql } from '../conformance/engines.js';

/**
 * Mistakes in setting up the database (its name, the role, its rights, a restore cut short) are the
 * operator's to fix, not bugs: each is refused with a code and a message that says what to fix, never
 * with INTERNAL, and never with the password of the URL in it.
 */
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

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
    const role = `writ_weak_${process.pid}`;
    await sql(db.url, `CREATE ROLE ${role} LOGIN`);
    cleanups.push(async () => { await sql(db.url, `DROP OWNED BY ${role}`); await sql(db.url, `DROP ROLE ${role}`); });
    await sql(db.url, `REVOKE CREATE ON SCHEMA public FROM PUBLIC`);
    const url = new URL(db.url);
    url.username = role;
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
    await sql(db.url, `CREATE ROLE ${role} LOGIN`);
    cleanups.push(async () => { await sql(db.url, `DROP OWNED BY ${role}`); await sql(db.url, `DROP ROLE ${role}`); });
    await sql(db.url, `GRANT CREATE, USAGE ON SCHEMA public TO ${role}`);
    await sql(db.url, `REVOKE TEMPORARY ON DATABASE ${name} FROM PUBLIC`);
    const url = new URL(db.url);
    url.username = role;
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
});
