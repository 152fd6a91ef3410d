/**
 * Moves a Writ from its embedded SQLite file to PostgreSQL (`writ store copy --to postgres://…`): the
 * way from one process to several replicas without losing what the store holds. Everything durable is
 * copied as it is, in one PostgreSQL transaction:
 *
 * - the graph's event log, revision for revision (decisions and receipts name revisions);
 * - leases, every key's fencing epoch and the floor of keys never leased (epochs must never repeat),
 *   the lease history, the authority each lease was taken on, the epoch bumps and restores;
 * - the single-use ids (a caller's assertion, a decision, an approval spent before the move stays spent
 *   after it; expired ones are purged by the database later);
 * - receipts, their hash chains entry for entry (same seq, position and hash: `writ audit verify` checks
 *   the copy as it checked the file) and the signed checkpoints; incidents.
 *
 * Not copied: callers waiting in a lease queue (they waited on the stopped server and retry), the
 * SQLite-only bookkeeping (WAL restarts, the per-key history links, lease tokens of migration 007's
 * era). PostgreSQL's own heads (the graph head, each receipt chain's head row, the sequences) are set
 * from what was copied.
 *
 * Safe by refusal: the SQLite file must not be open in any other process (STORE_IN_USE: stop every
 * `writ serve` first; it is held exclusively while it is read), and the database must hold no Writ
 * state and no other application's tables (ALREADY_EXISTS), both looked at before either side is
 * migrated; either way nothing is changed. The SQLite file keeps what it held (brought to this Writ's
 * schema first) and is marked as moved (store_moves, and the marker beside it: moveMarkerOf), so that a server started on it refuses it
 * (STORE_MOVED): it would issue fencing epochs the database issued and know nothing of what was written
 * there. The mark is made before the database commits and confirmed after (see copySqliteToPostgres).
 * Going back needs its epochs raised first, `writ lease bump-epochs --lift-move-mark`, which lifts it.
 */
import { existsSync } from 'node:fs';
import { isDeepStrictEqual } from 'node:util';
import Database from 'better-sqlite3';
import pg from 'pg';
import { maskDatabaseUrl } from '../config/index.js';
import { WritError } from '../errors.js';
import { mapSetupError } from './postgres/errors.js';
import { GENESIS_HASH } from '../audit/hash-chain.js';
import { migratePostgres } from './postgres/migrate.js';
import { storedId } from './postgres/single-use-store.js';
import { assertNotInUse, assertSound, graphChainHead, storeHeads } from './sqlite/backup.js';
import { readStoreMove, removeMoveMarker, storeMovedError, storeMovedTo, writeMoveMarker, type StoreMove } from './sqlite/database.js';
import { openSqliteStore } from './sqlite/sqlite-store.js';

/** What was copied, and the heads both sides agree on. */
export interface StoreCopyReport {
  from: string;
  /** Rows written per PostgreSQL table. */
  copied: Record<string, number>;
  /** Left behind: callers waiting in a lease queue (they waited on the stopped server, and ask again). */
  not_copied: { waiting_callers: number };
  graph_revision: number;
  receipt_head: { seq: number; hash: string | null };
  lease_keys: number;
  max_epoch: number;
  /** The database's schema version after its migrations. */
  schema_version: number;
  /**
   * An earlier copy of the file into this database that was stopped after the file was marked: copied
   * again (the database had not committed it), or found committed (nothing copied: the mark is confirmed).
   */
  unfinished_copy: 'copied again' | 'had committed' | null;
}

type PgType = 'bigint' | 'integer' | 'text' | 'jsonb' | 'text[]';

/** One table: what to read from SQLite, and the PostgreSQL columns (in the same order) with their types. */
interface TableCopy {
  table: string;
  select: string;
  columns: [name: string, type: PgType][];
  /** GENERATED ALWAYS AS IDENTITY: written with OVERRIDING SYSTEM VALUE, its sequence moved past the copy. */
  identity?: string;
  /** How a row read from SQLite is stored on PostgreSQL, where the engines store it differently. */
  map?: (row: Record<string, unknown>) => void;
}

const TABLES: TableCopy[] = [
  {
    table: 'graph_events',
    select: 'SELECT revision, at, actor, type, payload, hash FROM graph_events ORDER BY revision',
    columns: [['revision', 'bigint'], ['at', 'bigint'], ['actor', 'text'], ['type', 'text'], ['payload', 'text'], ['hash', 'text']],
  },
  {
    table: 'single_use_ids',
    // Expired ones too: PostgreSQL purges them after its grace, by the database's clock (a cut here, by
    // this machine's, could let an id spent within the clocks' difference be spent again).
    select: 'SELECT namespace, id, expires_at FROM seen_ids ORDER BY namespace, id',
    columns: [['namespace', 'text'], ['id', 'text'], ['expires_at', 'bigint']],
    // A caller's jti is kept with its principal and a NUL between them, which PostgreSQL text cannot hold.
    map: (row) => {
      row.id = storedId(row.id as string);
    },
  },
  {
    table: 'lease_keys',
    select: `SELECT key, epoch, lease_id, holder, holder_instance, token_hash, priority, acquired_at, renewed_at, expires_at,
                    duration_ms, transitions, last_holder, prev_lease_id, preempted_by FROM lease_keys ORDER BY key`,
    columns: [
      ['key', 'text'], ['epoch', 'bigint'], ['lease_id', 'text'], ['holder', 'text'], ['holder_instance', 'text'], ['token_hash', 'text'],
      ['priority', 'integer'], ['acquired_at', 'bigint'], ['renewed_at', 'bigint'], ['expires_at', 'bigint'], ['duration_ms', 'bigint'],
      ['transitions', 'bigint'], ['last_holder', 'text'], ['prev_lease_id', 'text'], ['preempted_by', 'text'],
    ],
  },
  {
    table: 'leases',
    select: `SELECT lease_id, holder, holder_instance, resources, epochs, token_hash, priority, state, created_at, renewed_at, expires_at,
                    duration_ms, ended_at, preempted_by FROM leases ORDER BY created_at, lease_id`,
    columns: [
      ['lease_id', 'text'], ['holder', 'text'], ['holder_instance', 'text'], ['resources', 'text[]'], ['epochs', 'jsonb'], ['token_hash', 'text'],
      ['priority', 'integer'], ['state', 'text'], ['created_at', 'bigint'], ['renewed_at', 'bigint'], ['expires_at', 'bigint'],
      ['duration_ms', 'bigint'], ['ended_at', 'bigint'], ['preempted_by', 'text'],
    ],
  },
  {
    table: 'lease_history',
    select: 'SELECT seq, at, event, key, epoch, lease_id, holder, actor FROM lease_history ORDER BY seq',
    columns: [['seq', 'bigint'], ['at', 'bigint'], ['event', 'text'], ['key', 'text'], ['epoch', 'bigint'], ['lease_id', 'text'], ['holder', 'text'], ['actor', 'text']],
    identity: 'seq',
  },
  {
    table: 'lease_authority',
    select: 'SELECT lease_id, holder, decisions, created_at FROM lease_authority ORDER BY created_at, lease_id',
    columns: [['lease_id', 'text'], ['holder', 'text'], ['decisions', 'jsonb'], ['created_at', 'bigint']],
  },
  {
    table: 'lease_epoch_bumps',
    select: 'SELECT seq, at, kind, margin, floor, keys, leases_ended, max_epoch, actor, reason, detail FROM lease_epoch_bumps ORDER BY seq',
    columns: [
      ['seq', 'bigint'], ['at', 'bigint'], ['kind', 'text'], ['margin', 'bigint'], ['floor', 'bigint'], ['keys', 'bigint'], ['leases_ended', 'bigint'],
      ['max_epoch', 'bigint'], ['actor', 'text'], ['reason', 'text'], ['detail', 'jsonb'],
    ],
    identity: 'seq',
  },
  {
    table: 'incidents',
    select: 'SELECT id, declared_by, reason, decision_id, environment, declared_at, ends_at, resolved_at FROM incidents ORDER BY declared_at, id',
    columns: [
      ['id', 'text'], ['declared_by', 'text'], ['reason', 'text'], ['decision_id', 'text'], ['environment', 'text'], ['declared_at', 'bigint'], ['ends_at', 'bigint'],
      ['resolved_at', 'bigint'],
    ],
  },
  {
    table: 'receipt_entries',
    select: 'SELECT seq, receipt_id, kind, body, prev_hash, hash, chain, pos FROM receipt_entries ORDER BY seq',
    columns: [['seq', 'bigint'], ['receipt_id', 'text'], ['kind', 'text'], ['body', 'text'], ['prev_hash', 'text'], ['hash', 'text'], ['chain', 'text'], ['pos', 'bigint']],
  },
  {
    table: 'receipts',
    select: `SELECT receipt_id, principal, resource_key, status, idempotency_key, request_hash, decision_id, created_at, completed_at, first_seq, last_seq
               FROM receipts ORDER BY first_seq`,
    columns: [
      ['receipt_id', 'text'], ['principal', 'text'], ['resource_key', 'text'], ['status', 'text'], ['idempotency_key', 'text'], ['request_hash', 'text'], ['decision_id', 'text'],
      ['created_at', 'bigint'], ['completed_at', 'bigint'], ['first_seq', 'bigint'], ['last_seq', 'bigint'],
    ],
  },
  {
    table: 'receipt_checkpoints',
    select: 'SELECT seq, archived_through, hash, prev_hash, count, at, jws FROM receipt_checkpoints ORDER BY seq',
    columns: [['seq', 'bigint'], ['archived_through', 'bigint'], ['hash', 'text'], ['prev_hash', 'text'], ['count', 'bigint'], ['at', 'bigint'], ['jws', 'text']],
  },
  {
    table: 'receipt_head_checkpoints',
    select: 'SELECT seq, at, chains, root, archived, jws, graph_revision, graph_hash FROM receipt_head_checkpoints ORDER BY seq',
    columns: [['seq', 'bigint'], ['at', 'bigint'], ['chains', 'bigint'], ['root', 'text'], ['archived', 'bigint'], ['jws', 'text'], ['graph_revision', 'bigint'], ['graph_hash', 'text']],
  },
  {
    table: 'receipt_checkpoint_leaves',
    select: 'SELECT chain, checkpoint, pos, hash, floor_pos, floor_hash FROM receipt_checkpoint_leaves ORDER BY checkpoint, chain',
    columns: [['chain', 'text'], ['checkpoint', 'bigint'], ['pos', 'bigint'], ['hash', 'text'], ['floor_pos', 'bigint'], ['floor_hash', 'text']],
  },
];

/** Every table the copy writes (and finds empty first), PostgreSQL's own heads included. */
const WRITTEN = [...TABLES.map((t) => t.table), 'receipt_chains', 'graph_head'];
/** Every table Writ's PostgreSQL migrations make (receipt_chain_head: of migration 1, dropped by 4). */
const WRIT_TABLES = new Set([...WRITTEN, 'schema_migrations', 'lease_waiters', 'lease_waiter_keys', 'receipt_chain_head', 'receipt_checkpoint_turn']);
/** Rows per INSERT (one JSON parameter each). */
const BATCH = 500;

/**
 * Copies the SQLite store in `sqliteFile` into the PostgreSQL database at `url` (see the module's comment).
 *
 * The file is marked as moved (pending) and the mark made durable before the database commits, and the
 * mark is confirmed after: killed at any point, the file is never left unmarked while the database holds
 * the copy. Killed between the two, the file is refused (STORE_MOVED, saying the copy did not finish),
 * and the same command run again finishes the move: it copies again when the database holds nothing (the
 * commit never happened), or confirms the mark when the database holds this file's copy. A commit the
 * database refused takes the mark back (nothing changed); a commit whose answer was lost leaves it, and
 * says to run the copy again.
 */
export async function copySqliteToPostgres(sqliteFile: string, url: string): Promise<StoreCopyReport> {
  if (!existsSync(sqliteFile)) throw new WritError('NOT_FOUND', `no SQLite store at ${sqliteFile}; nothing was changed`);
  const target = maskDatabaseUrl(url);
  // A file already moved is refused first (STORE_MOVED, naming where), before either side is looked at;
  // so is a file whose unfinished copy named another database (that copy is finished by running it again there).
  const unfinished = readStoreMove(sqliteFile, 'writ store copy');
  if (unfinished !== null && !(unfinished.pending && unfinished.moved_to === target)) throw storeMovedError(sqliteFile, unfinished);
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5_000, application_name: 'writ store copy' });
  let source: Database.Database | null = null;
  try {
    try {
      await client.connect();
    } catch (e) {
      // As a server opening the store says it (a wrong database or role: UNPROCESSABLE; unreachable: OVERLOADED), of --to.
      throw mapSetupError(e, url, 1_000, '--to');
    }
    if (unfinished !== null && (await writStateIn(client)).length > 0) return await confirmCommittedCopy(sqliteFile, client, unfinished);
    // Both sides are looked at before either is touched: a database with state (or not Writ's) or a
    // file in use is refused before a migration runs on either.
    await refuseUnlessEmpty(client);
    await assertNotInUse(sqliteFile, 'copying');
    // A damaged file would fail halfway through the copy, after the database's migrations: found first.
    assertSound(sqliteFile, 'writ store copy');
    // Brings an older file to this Writ's schema (as a server starting on it would), and refuses a newer one.
    await (await openSqliteStore(sqliteFile, { checkpointer: false, moved: unfinished === null ? 'refuse' : 'allow' })).close();
    await assertNotInUse(sqliteFile, 'copying'); // the open turned it back to WAL: fold it again, and look once more
    source = new Database(sqliteFile, { fileMustExist: true });
    source.pragma('busy_timeout = 0');
    source.pragma('synchronous = FULL'); // the mark must be on disk before the database commits
    try {
      // In rollback-journal mode an exclusive lock keeps every other connection out, readers too, until the copy ends.
      source.exec('BEGIN EXCLUSIVE');
    } catch (e) {
      throw new WritError('STORE_IN_USE', `${sqliteFile} is open in another process (a running Writ?): stop it before copying; nothing was changed (${(e as Error).message})`);
    }
    // A role lacking a right is told which, and which migrations went in, as a server starting on the database is.
    const { applied, version } = await migratePostgres(client).catch((e: unknown) => { throw mapSetupError(e, url, 1_000, '--to'); });
    const mark: StoreMove = unfinished ?? { at: Date.now(), moved_to: target, pending: true };
    let markerWritten = false;
    await client.query('BEGIN');
    let copied: Record<string, number>;
    let got: Heads;
    try {
      // No replica may write while the copy runs (one started on the empty database would append its own graph events).
      await client.query(`LOCK TABLE ${WRITTEN.join(', ')} IN ACCESS EXCLUSIVE MODE`);
      await refuseUnlessEmpty(client);
      copied = {};
      for (const t of TABLES) copied[t.table] = await copyTable(source, client, t);
      copied.receipt_chains = await setHeads(client);
      // Both sides must name the same heads before the copy counts (a difference is a bug here: nothing is kept).
      const want = storeHeads(source);
      got = await headsOf(client);
      if (!isDeepStrictEqual(got, want)) {
        throw new WritError('INTERNAL', `the copy does not match ${sqliteFile} (file ${JSON.stringify(want)}, database ${JSON.stringify(got)}); nothing was changed`);
      }
      // The graph log's hash chain head too, revision and hash: the file's head row against the head the
      // database takes from the copied events (the verify after the commit checks the copy's events only).
      await assertSameGraphHead(sqliteFile, source, client);
      // The mark, committed (on disk) before the database commits: from here a server started on the file
      // refuses it (STORE_MOVED) whether or not the database's commit happens. The marker beside the
      // file first (it outlives the file: a restore over a damaged file puts back one without the mark).
      if (storeMovedTo(source) === null) source.prepare('INSERT INTO store_moves (at, moved_to, pending) VALUES (?, ?, 1)').run(mark.at, target);
      writeMoveMarker(sqliteFile, mark);
      markerWritten = true;
      source.exec('COMMIT');
    } catch (e) {
      await client.query('ROLLBACK').catch(() => undefined);
      // The file's mark was not committed, and the database commits nothing: a marker this copy made goes.
      if (markerWritten && unfinished === null) removeMoveMarker(sqliteFile);
      // A right the copy needs (on a table or sequence made by another role): named, as for the migrations.
      throw mapSetupError(e, url, 1_000, '--to', applied.length === 0 ? undefined : `the copy was rolled back, but the migrations this copy applied (up to ${version}) are committed`);
    }
    source.pragma('busy_timeout = 5000'); // the lock is let go: a server refused on the file may be reading the mark
    try {
      await client.query('COMMIT');
    } catch (e) {
      // An error the database answered (the session lives on) is a commit it did not make: the mark goes.
      // A lost answer, or the session ended (FATAL), may hide a commit made: the mark stays, and the copy
      // run again finds out.
      if (!(e instanceof pg.DatabaseError && e.severity === 'ERROR')) {
        throw new WritError('OVERLOADED', `the PostgreSQL database's answer to the copy's commit was lost (${(e as Error).message}): it may or may not hold the copy, so ${sqliteFile} stays marked as moved (a server on it refuses it). Run writ store copy --to … again: it copies the file if the database holds nothing, or confirms the copy it committed`);
      }
      source.prepare('DELETE FROM store_moves WHERE pending = 1 AND lifted_at IS NULL').run();
      removeMoveMarker(sqliteFile);
      throw new WritError('OVERLOADED', `the PostgreSQL database refused to commit the copy (${e.message}): it holds none of it, and ${sqliteFile} is no longer marked as moved; nothing was changed`);
    }
    confirmMove(source, sqliteFile, mark);
    const waiting = (source.prepare('SELECT COUNT(*) AS n FROM lease_waiters').get() as { n: number }).n;
    return {
      from: sqliteFile,
      copied,
      not_copied: { waiting_callers: waiting },
      ...got,
      schema_version: version,
      unfinished_copy: unfinished === null ? null : 'copied again',
    };
  } finally {
    if (source?.inTransaction) source.exec('ROLLBACK');
    source?.close();
    await client.end().catch(() => undefined);
  }
}

/**
 * The move is confirmed on the file (its row, then the marker beside it): the database committed the
 * copy. A file that holds no row for it (a marker only: the file was replaced by a restore) gets one.
 * Failing here leaves it pending, which the copy run again confirms.
 */
function confirmMove(db: Database.Database, file: string, move: StoreMove): void {
  try {
    if (storeMovedTo(db) === null) db.prepare('INSERT INTO store_moves (at, moved_to, pending) VALUES (?, ?, 0)').run(move.at, move.moved_to);
    else db.prepare('UPDATE store_moves SET pending = 0 WHERE pending = 1 AND lifted_at IS NULL').run();
    writeMoveMarker(file, { ...move, pending: false });
  } catch (e) {
    throw new WritError('OVERLOADED', `the PostgreSQL database committed the copy, but ${file} could not be marked so (${(e as Error).message}): it stays refused as a copy that did not finish; run writ store copy --to … again to confirm the move`);
  }
}

/**
 * An earlier `writ store copy` of the file into this database was killed after the file was marked,
 * and the database holds Writ state: when it holds this file's copy (perhaps with what replicas wrote
 * since), the database committed it, and the mark is confirmed. Anything else is refused
 * (ALREADY_EXISTS), the mark kept.
 */
async function confirmCommittedCopy(file: string, client: pg.Client, move: StoreMove): Promise<StoreCopyReport> {
  const db = new Database(file, { fileMustExist: true });
  try {
    db.pragma('busy_timeout = 5000');
    const missing = await notInDatabase(db, client);
    if (missing !== null) {
      throw new WritError('ALREADY_EXISTS', `${file} was being copied to ${move.moved_to} at ${new Date(move.at).toISOString()} and the copy did not finish, but this database holds Writ state that is not that copy (${missing}): copy into the database that was named then, or, if no database holds the copy, take the file back with \`writ lease bump-epochs --by N --reason TEXT --lift-move-mark\`; nothing was changed`);
    }
    confirmMove(db, file, move);
    const copied: Record<string, number> = {};
    for (const t of [...TABLES.map((x) => x.table), 'receipt_chains']) copied[t] = Number((await client.query<{ n: string }>(`SELECT COUNT(*) AS n FROM ${t}`)).rows[0]!.n);
    const version = Number((await client.query<{ v: string }>('SELECT MAX(version) AS v FROM schema_migrations')).rows[0]!.v);
    return { from: file, copied, not_copied: { waiting_callers: 0 }, ...(await headsOf(client)), schema_version: version, unfinished_copy: 'had committed' };
  } finally {
    db.close();
  }
}

/**
 * What of the file the database lacks (null: nothing, it holds the file's copy): the file's last graph
 * event, its graph chain head (same hash), its last receipt entry (same hash), each of its lease keys at
 * an epoch at least the file's.
 */
async function notInDatabase(db: Database.Database, client: pg.Client): Promise<string | null> {
  const event = db.prepare('SELECT revision, at, actor, type, payload FROM graph_events ORDER BY revision DESC LIMIT 1').get() as { revision: number; at: number; actor: string; type: string; payload: string } | undefined;
  if (event !== undefined) {
    const there = (await client.query<{ at: string; actor: string; type: string; payload: string }>('SELECT at, actor, type, payload FROM graph_events WHERE revision = $1', [event.revision])).rows[0];
    if (there === undefined || Number(there.at) !== event.at || there.actor !== event.actor || there.type !== event.type || there.payload !== event.payload) return `the file's graph revision ${event.revision} differs`;
  }
  // Its graph chain head, revision and hash: the database holds that event with that hash.
  const head = graphChainHead(db);
  if (head !== null && head.revision > 0) {
    const there = (await client.query<{ hash: string | null }>('SELECT hash FROM graph_events WHERE revision = $1', [head.revision])).rows[0];
    if (there?.hash !== head.hash) return `the file's graph chain head (revision ${head.revision}, hash ${head.hash}) is not in the database's graph log (${there === undefined ? 'no such revision' : `hash ${there.hash ?? 'none'} there`})`;
  }
  const entry = db.prepare('SELECT seq, hash FROM receipt_entries ORDER BY seq DESC LIMIT 1').get() as { seq: number; hash: string } | undefined;
  if (entry !== undefined) {
    const there = (await client.query<{ hash: string }>('SELECT hash FROM receipt_entries WHERE seq = $1', [entry.seq])).rows[0];
    if (there?.hash !== entry.hash) return `the file's receipt entry ${entry.seq} differs`;
  }
  const epochs = new Map((await client.query<{ key: string; epoch: string }>('SELECT key, epoch FROM lease_keys')).rows.map((r) => [r.key, Number(r.epoch)]));
  for (const k of db.prepare('SELECT key, epoch FROM lease_keys').iterate() as Iterable<{ key: string; epoch: number }>) {
    if (!((epochs.get(k.key) ?? -1) >= k.epoch)) return `lease key ${k.key} is not there at epoch ${k.epoch} or above`;
  }
  return null;
}

/** The Writ tables of the database that hold rows (its own heads count from revision/seq 1). */
async function writStateIn(client: pg.Client): Promise<string[]> {
  const present = (await client.query<{ name: string }>('SELECT table_name AS name FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY 1')).rows.map((r) => r.name);
  const withRows: string[] = [];
  for (const t of present) {
    if (t === 'schema_migrations' || !WRIT_TABLES.has(t)) continue;
    // graph_head and receipt_chain_head (of an older schema) hold one row from the start: empty is revision/seq 0.
    const check = t === 'graph_head' ? 'SELECT 1 FROM graph_head WHERE revision > 0' : t === 'receipt_chain_head' ? 'SELECT 1 FROM receipt_chain_head WHERE seq > 0' : `SELECT 1 FROM ${t} LIMIT 1`;
    if ((await client.query(check)).rows.length > 0) withRows.push(t);
  }
  return withRows;
}

/**
 * Refuses (ALREADY_EXISTS) a database that holds Writ state, or tables that are not Writ's (an
 * application's database given by mistake: Writ wants one of its own). Runs before the migrations, on
 * whatever tables exist, and again under the copy's locks.
 */
async function refuseUnlessEmpty(client: pg.Client): Promise<void> {
  const present = (await client.query<{ name: string }>('SELECT table_name AS name FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY 1')).rows.map((r) => r.name);
  const foreign = present.filter((t) => !WRIT_TABLES.has(t));
  if (foreign.length > 0) {
    throw new WritError('ALREADY_EXISTS', `the PostgreSQL database holds tables that are not Writ's (${foreign.slice(0, 8).join(', ')}${foreign.length > 8 ? ', …' : ''}): copy into a database of Writ's own; nothing was changed`);
  }
  const withRows = await writStateIn(client);
  if (withRows.length === 0) return;
  throw new WritError('ALREADY_EXISTS', `the PostgreSQL database already holds Writ state (in ${withRows.join(', ')}): copy into a database no Writ has used; nothing was changed`);
}

async function copyTable(source: Database.Database, client: pg.Client, t: TableCopy): Promise<number> {
  const names = t.columns.map(([n]) => n).join(', ');
  const insert = `INSERT INTO ${t.table} (${names})${t.identity ? ' OVERRIDING SYSTEM VALUE' : ''}
    SELECT ${names} FROM json_to_recordset($1::json) AS x(${t.columns.map(([n, type]) => `${n} ${type}`).join(', ')})`;
  const parsed = t.columns.filter(([, type]) => type === 'jsonb' || type === 'text[]').map(([n]) => n);
  const statement = source.prepare(t.select);
  let n = 0;
  let batch: Record<string, unknown>[] = [];
  // One batch in flight while the next is read and encoded (the database works on the other core).
  let inFlight: Promise<unknown> = Promise.resolve();
  const flush = async () => {
    if (batch.length === 0) return;
    const sent = client.query(insert, [JSON.stringify(batch)]);
    sent.catch(() => undefined); // awaited below (as inFlight); a failure must not go unhandled meanwhile
    n += batch.length;
    batch = [];
    await inFlight;
    inFlight = sent;
  };
  const rows = statement.iterate() as Iterable<Record<string, unknown>>;
  for (const row of rows) {
    // SQLite keeps JSON documents (a lease's keys and epochs, a bump's detail) as text; PostgreSQL as jsonb and text[].
    for (const c of parsed) if (typeof row[c] === 'string') row[c] = JSON.parse(row[c] as string);
    t.map?.(row);
    batch.push(row);
    if (batch.length >= BATCH) await flush();
  }
  await flush();
  await inFlight;
  if (t.identity) {
    await client.query(`SELECT setval(pg_get_serial_sequence('${t.table}', '${t.identity}'), GREATEST((SELECT MAX(${t.identity}) FROM ${t.table}), 1), (SELECT MAX(${t.identity}) FROM ${t.table}) IS NOT NULL)`);
  }
  return n;
}

/** PostgreSQL's own heads, from what was copied: the graph head, each receipt chain's head row, the next receipt seq. Returns the chains. */
async function setHeads(client: pg.Client): Promise<number> {
  // The graph chain's head: its last hashed event (after it, only events an older Writ appended unhashed to the file).
  await client.query(`UPDATE graph_head SET revision = COALESCE((SELECT MAX(revision) FROM graph_events), 0),
    hashed = COALESCE((SELECT MAX(revision) FROM graph_events WHERE hash IS NOT NULL), 0),
    hash = COALESCE((SELECT hash FROM graph_events WHERE hash IS NOT NULL ORDER BY revision DESC LIMIT 1), '${GENESIS_HASH}')`);
  const chains = await client.query(`
    INSERT INTO receipt_chains (chain, pos, hash, prev_hash)
    SELECT DISTINCT ON (chain) chain, pos, hash, prev_hash FROM receipt_entries ORDER BY chain, pos DESC`);
  await client.query(`SELECT setval('receipt_entry_seq', GREATEST(COALESCE((SELECT MAX(seq) FROM receipt_entries), 0), COALESCE((SELECT MAX(last_seq) FROM receipts), 0)) + 1, false)`);
  return chains.rowCount ?? 0;
}

type Heads = ReturnType<typeof storeHeads>;

/**
 * The file's graph chain head (graph_chain_head: its last hashed revision and that event's hash) must be
 * the database's after the copy (graph_head, set from the copied events): a file whose head row does not
 * name its last hashed event, or events that did not arrive as they were, is refused (INTERNAL, the
 * copy rolled back): the checkpoints copied with it sign heads, and a replica appends from this one.
 */
async function assertSameGraphHead(sqliteFile: string, source: Database.Database, client: pg.Client): Promise<void> {
  const file = graphChainHead(source) ?? { revision: 0, hash: GENESIS_HASH };
  const { rows } = await client.query<{ hashed: string; hash: string }>('SELECT hashed, hash FROM graph_head');
  const copy = { revision: Number(rows[0]!.hashed), hash: rows[0]!.hash };
  if (copy.revision === file.revision && copy.hash === file.hash) return;
  throw new WritError('INTERNAL', `the copy's graph log does not end where ${sqliteFile}'s does: the file's graph chain head is revision ${file.revision} (hash ${file.hash}), the database's after the copy is revision ${copy.revision} (hash ${copy.hash}). Run writ audit verify on the file (its head row or its events were altered, or the copy went wrong); nothing was changed`);
}

/** The heads storeHeads reads from the file, read from the database. */
async function headsOf(client: pg.Client): Promise<Heads> {
  const { rows } = await client.query<{ revision: string; seq: string | null; hash: string | null; keys: string; max_epoch: string | null }>(`
    SELECT (SELECT revision FROM graph_head) AS revision,
           h.seq, h.hash,
           (SELECT COUNT(*) FROM lease_keys) AS keys, (SELECT MAX(epoch) FROM lease_keys) AS max_epoch
      FROM (SELECT 1) one LEFT JOIN (SELECT seq, hash FROM receipt_entries ORDER BY seq DESC LIMIT 1) h ON true`);
  const r = rows[0]!;
  return {
    graph_revision: Number(r.revision),
    receipt_head: { seq: Number(r.seq ?? 0), hash: r.hash },
    lease_keys: Number(r.keys),
    max_epoch: Number(r.max_epoch ?? 0),
  };
}
