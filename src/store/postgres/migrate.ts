import type pg from 'pg';
import { WritError } from '../../errors.js';
import { failedMigration, isDuplicateObject, partialSchema } from './errors.js';
import { refuseDivergedHistory, type MigrationRecord } from '../migration-history.js';
import { POSTGRES_MIGRATIONS } from './migrations/index.js';
import type { PostgresMigration } from './migrations/types.js';

/** The advisory lock every replica takes to migrate: several may start at once, one migrates, the rest wait and find it done. */
const MIGRATION_LOCK = 0x77726974; // 'writ'

export interface MigrationReport {
  /** Versions applied by this call, in order. */
  applied: number[];
  /** The schema's version afterwards. */
  version: number;
}

/**
 * Applies the numbered migrations the database lacks, each in its own transaction, under a
 * session-level advisory lock. Refuses (SCHEMA_TOO_NEW, nothing changed) a database whose schema
 * is newer than this code knows: an older replica must not write to tables it does not understand; and
 * (SCHEMA_DIVERGED) one whose applied migrations are not a prefix of this code's (refuseDivergedHistory).
 * On a database with nothing to apply it creates nothing (so needs no CREATE on the schema).
 */
export async function migratePostgres(client: pg.ClientBase, migrations: readonly PostgresMigration[] = POSTGRES_MIGRATIONS): Promise<MigrationReport> {
  // Another replica may be migrating for longer than the pool's lock_timeout: wait for it as long as it takes.
  await client.query('SET lock_timeout = 0');
  await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
  try {
    // Checked before anything is created: a refused database is left exactly as it was.
    await refusePartialSchema(client);
    const recorded = await appliedPostgresMigrations(client);
    refuseDivergedHistory(STORE, recorded ?? [], migrations);
    const current = Math.max(0, ...(recorded ?? []).map((m) => m.version));
    const known = migrations.reduce((max, m) => Math.max(max, m.version), 0);
    if (current > known) {
      throw new WritError(
        'SCHEMA_TOO_NEW',
        `the PostgreSQL schema is at version ${current}, newer than this Writ knows (${known}); run a Writ at least as new as the one that migrated it`,
        { schema_version: current, known_version: known },
      );
    }
    const pending = [...migrations].sort((a, b) => a.version - b.version).filter((m) => m.version > current);
    // Nothing is created on a database migrated already (CREATE … IF NOT EXISTS checks the right to create
    // first): a role with only the rights Writ needs at run time starts on a database migrated for it.
    if (pending.length === 0) return { applied: [], version: current };
    if (recorded === null) {
      await client.query(`CREATE TABLE IF NOT EXISTS schema_migrations (
      version    integer     PRIMARY KEY,
      name       text        NOT NULL,
      applied_at timestamptz NOT NULL DEFAULT now())`);
    }
    const applied: number[] = [];
    for (const m of pending) {
      await client.query('BEGIN');
      try {
        await client.query(m.sql);
        await client.query('INSERT INTO schema_migrations (version, name) VALUES ($1, $2)', [m.version, m.name]);
        await client.query('COMMIT');
      } catch (e) {
        await client.query('ROLLBACK').catch(() => undefined);
        // What this migration creates is there already, though it is not recorded as applied.
        if (isDuplicateObject(e)) throw partialSchema(Math.max(current, ...applied), `migration ${m.version} (${m.name}) found its objects already there: ${(e as Error).message}`);
        throw failedMigration(e, { version: m.version, name: m.name, schemaVersion: Math.max(current, ...applied), applied: [...applied] });
      }
      applied.push(m.version);
    }
    return { applied, version: Math.max(current, ...applied) };
  } finally {
    await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]).catch(() => undefined);
    await client.query('RESET lock_timeout').catch(() => undefined);
  }
}

/**
 * Refuses (nothing changed) a database that holds Writ's objects but records no migration: a restore
 * cut short, or another program's tables under Writ's names. A partial record shows later, when a
 * migration finds its objects already there (migratePostgres).
 */
export async function refusePartialSchema(client: pg.ClientBase): Promise<void> {
  const { rows } = await client.query<{ record: boolean; objects: string[] }>(`SELECT
      to_regclass('schema_migrations') IS NOT NULL AS record,
      array_remove(ARRAY[
        CASE WHEN to_regclass('graph_events') IS NOT NULL THEN 'table graph_events' END,
        CASE WHEN to_regclass('graph_head') IS NOT NULL THEN 'table graph_head' END,
        CASE WHEN to_regclass('leases') IS NOT NULL THEN 'table leases' END,
        CASE WHEN to_regprocedure('writ_now_ms()') IS NOT NULL THEN 'function writ_now_ms' END
      ], NULL) AS objects`);
  const { record, objects } = rows[0]!;
  if (objects.length === 0) return;
  const recorded = record ? await schemaVersion(client) : 0;
  if (recorded === 0) throw partialSchema(0, `it has ${objects.join(', ')}`);
}

async function schemaVersion(client: pg.ClientBase): Promise<number> {
  const { rows } = await client.query<{ version: number | null }>('SELECT max(version) AS version FROM schema_migrations');
  return Number(rows[0]?.version ?? 0);
}

const STORE = 'PostgreSQL database';

/** The migrations the database records applied (schema_migrations), with their names; null when it has no such table. */
export async function appliedPostgresMigrations(client: pg.ClientBase): Promise<MigrationRecord[] | null> {
  const { rows: table } = await client.query<{ present: boolean }>("SELECT to_regclass('schema_migrations') IS NOT NULL AS present");
  if (!table[0]!.present) return null;
  const { rows } = await client.query<{ version: number; name: string }>('SELECT version, name FROM schema_migrations');
  return rows.map((r) => ({ version: Number(r.version), name: r.name }));
}

/**
 * Refuses (nothing changed) a database whose applied migrations are not a prefix of `migrations`
 * (SCHEMA_DIVERGED), or are ahead of them (SCHEMA_TOO_NEW), or behind (UNPROCESSABLE, naming
 * `writ migrate`): what a command that must not migrate checks.
 */
export async function requireCurrentPostgresSchema(client: pg.ClientBase, migrations: readonly PostgresMigration[] = POSTGRES_MIGRATIONS): Promise<void> {
  await refusePartialSchema(client);
  const recorded = (await appliedPostgresMigrations(client)) ?? [];
  refuseDivergedHistory(STORE, recorded, migrations);
  const known = migrations.reduce((max, m) => Math.max(max, m.version), 0);
  const current = Math.max(0, ...recorded.map((m) => m.version));
  if (current === known) return;
  throw new WritError(
    current > known ? 'SCHEMA_TOO_NEW' : 'UNPROCESSABLE',
    current > known
      ? `the PostgreSQL schema is at version ${current}, newer than this Writ knows (${known}); run a Writ at least as new as the one that migrated it`
      : `the PostgreSQL schema is at version ${current}, this Writ needs ${known}: run \`writ migrate\``,
    { schema_version: current, known_version: known },
  );
}
