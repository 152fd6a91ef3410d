import pg from 'pg';
import { maskDatabaseUrl } from '../../config/index.js';
import { WritError } from '../../errors.js';

/** SQLSTATEs after which the whole transaction may simply run again. */
const RETRYABLE = new Set(['40001', '40P01']);

/** Connection-level failures and shed load: the database is (for now) unreachable or refusing work. */
function isUnavailable(e: unknown): boolean {
  if (e instanceof pg.DatabaseError) {
    const code = e.code ?? '';
    return code.startsWith('08') || code.startsWith('53') || ['57P01', '57P02', '57P03', '57014', '55P03'].includes(code);
  }
  // Writ's own errors (thrown by a callback, or already mapped) are never the driver's.
  if (!(e instanceof Error) || e instanceof WritError) return false;
  const errno = (e as { code?: unknown }).code;
  if (typeof errno === 'string' && /^E[A-Z]+$/.test(errno)) return true; // ECONNREFUSED, ECONNRESET, EPIPE, ETIMEDOUT …
  return /Connection terminated|connection error|timeout exceeded when trying to connect|Client was closed|not queryable/i.test(e.message);
}

export function isRetryable(e: unknown): boolean {
  return e instanceof pg.DatabaseError && RETRYABLE.has(e.code ?? '');
}

/** Whether `e` came from the driver or the database (as opposed to the caller's callback). */
export function isEngineError(e: unknown): boolean {
  return e instanceof pg.DatabaseError || isUnavailable(e);
}

export function overloaded(message: string, retryAfterMs: number, cause?: unknown): WritError {
  const err = new WritError('OVERLOADED', message, { retry_after_ms: retryAfterMs });
  if (cause !== undefined) (err as { cause?: unknown }).cause = cause;
  return err;
}

/**
 * What an engine error becomes above the adapter: unavailability and exhausted retries are
 * OVERLOADED (503, retry_after_ms); any other database error is a bug in Writ's SQL or schema
 * (INTERNAL, with the SQLSTATE). Errors that are not the engine's pass through untouched.
 */
export function mapEngineError(e: unknown, retryAfterMs: number): unknown {
  if (isRetryable(e)) return overloaded('the database kept refusing the transaction under contention; retry', retryAfterMs, e);
  if (isUnavailable(e)) return overloaded(`the database is unavailable (${(e as Error).message})`, retryAfterMs, e);
  if (e instanceof pg.DatabaseError) {
    const err = new WritError('INTERNAL', `PostgreSQL error ${e.code}: ${e.message}`, { sqlstate: e.code });
    (err as { cause?: unknown }).cause = e;
    return err;
  }
  return e;
}

/** The migration a database error stopped, as migratePostgres records it: the ones before it are committed. */
export interface FailedMigration {
  version: number;
  name: string;
  /** The schema's version as the failure left it. */
  schemaVersion: number;
  /** The migrations the same call applied (committed) before it. */
  applied: readonly number[];
}

const FAILED_MIGRATION = new WeakMap<object, FailedMigration>();

/** Records that `e` stopped migration `m` (read by mapSetupError, which says so instead of "nothing was changed"). */
export function failedMigration(e: unknown, m: FailedMigration): unknown {
  if (typeof e === 'object' && e !== null) FAILED_MIGRATION.set(e, m);
  return e;
}

/**
 * The rights Writ's role needs, named after a 42501: CREATE and USAGE on the schema (and then all rights
 * on the tables it made), and TEMPORARY on the database, which PostgreSQL grants to PUBLIC by default but
 * a hardened database may not: migration 10 makes a temporary function. Migrations that shipped are not
 * edited, so that one keeps needing it.
 */
function privilegeRemedy(e: pg.DatabaseError, url: string, where: string): string {
  let role = 'the role';
  let database = 'the database';
  try {
    const u = new URL(url);
    if (u.username !== '') role = decodeURIComponent(u.username);
    if (u.pathname.length > 1) database = decodeURIComponent(u.pathname.slice(1));
  } catch {
    // Named generically.
  }
  const all = `make it the owner of the database (ALTER DATABASE … OWNER TO it), or GRANT it CREATE and USAGE on the schema, TEMPORARY on the database and all rights on Writ's tables, or use another role in ${where}`;
  if (/temporary tables/i.test(e.message)) {
    return `the role lacks TEMPORARY on the database, which PostgreSQL migration 10 needs (it makes a temporary function): GRANT TEMPORARY ON DATABASE ${database} TO ${role} (or ${all})`;
  }
  return `give the role the rights Writ needs: ${all}`;
}

/** Where the operator names the database, for messages that tell them what to change. */
const WHERE = '--database / WRIT_DATABASE_URL';

/**
 * What a failure to open the store becomes: a mistake in setting up the database (its name, the role
 * or its password, the role's rights) is the operator's to fix, not a bug, so it is UNPROCESSABLE (as
 * every other configuration Writ cannot work with) with what to change; the URL is shown without its
 * password. A database that cannot be reached is OVERLOADED (it may come back), naming the URL and what
 * to check. Anything else is mapped as on the request path (mapEngineError). `where`: where the operator
 * named the database (`writ store copy` names it with --to). `changedBefore`: what the caller committed
 * before the failing statement, when not nothing (said instead of "nothing was changed").
 */
export function mapSetupError(e: unknown, url: string, retryAfterMs: number, where: string = WHERE, changedBefore?: string): unknown {
  const at = maskDatabaseUrl(url);
  // Unreachable may be for a moment (the server restarting): still OVERLOADED, but named, with what to check.
  if (isUnavailable(e)) return overloaded(`PostgreSQL at ${at} cannot be reached (${(e as Error).message}): check that it is running and accepts connections there, and the host and port in ${where}; ${changedBefore ?? 'nothing was changed'}`, retryAfterMs, e);
  if (!(e instanceof pg.DatabaseError)) return mapEngineError(e, retryAfterMs);
  const code = e.code ?? '';
  const remedy =
    code.startsWith('28') ? `check the user and password in ${where} (and the server's pg_hba.conf for this host)`
    : code === '3D000' ? `create it (createdb, or CREATE DATABASE) or name an existing one in ${where}`
    : code === '42501' ? privilegeRemedy(e, url, where)
    : code === '3F000' ? `create the schema or fix the search_path of the role in ${where}`
    : null;
  if (remedy === null) return mapEngineError(e, retryAfterMs);
  // A migration that fails rolls back alone: the ones before it, on this start, are committed.
  const m = FAILED_MIGRATION.get(e);
  const changed = m === undefined ? changedBefore ?? 'nothing was changed'
    : m.applied.length === 0 ? `migration ${m.version} (${m.name}) was not applied; nothing was changed`
    : `migration ${m.version} (${m.name}) changed nothing; migrations up to ${m.schemaVersion} are applied`;
  const details = m === undefined ? { sqlstate: code } : { sqlstate: code, migration: m.version, schema_version: m.schemaVersion };
  const err = new WritError('UNPROCESSABLE', `PostgreSQL at ${at} refused: ${e.message} (SQLSTATE ${code}): ${remedy}; ${changed}`, details);
  (err as { cause?: unknown }).cause = e;
  return err;
}

/** SQLSTATEs of creating what is already there (a table, an index, a function, a column, a schema). */
const DUPLICATE_OBJECT = new Set(['42P07', '42723', '42710', '42701', '42P06']);

/** Whether a migration failed because what it creates is already there. */
export function isDuplicateObject(e: unknown): boolean {
  return e instanceof pg.DatabaseError && DUPLICATE_OBJECT.has(e.code ?? '');
}

/**
 * The refusal for a database that holds Writ's tables and functions but not (all of) the record of the
 * migrations that made them: a restore cut short (pg_restore of a truncated dump), or another program's
 * objects. Migrating it would fail half way or clobber them, so nothing is changed.
 */
export function partialSchema(recorded: number, detail: string): WritError {
  return new WritError(
    'UNPROCESSABLE',
    `the PostgreSQL database holds a partial or foreign Writ schema (${detail}; schema_migrations records ${recorded === 0 ? 'no migration' : `migrations up to ${recorded}`}): restore it again from a whole dump, or name an empty database in ${WHERE} (writ serve makes its store there); nothing was changed`,
    { schema_version: recorded },
  );
}
