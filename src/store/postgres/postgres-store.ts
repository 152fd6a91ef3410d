import pg from 'pg';
import { listenForGraphHeads, listenForLeaseReleases } from './graph-notifications.js';
import type { StoreTx, WritStore } from '../contract.js';
import type { ReadWriteOptions } from '../../transactions.js';
import { isRetryable, mapEngineError, mapSetupError, overloaded } from './errors.js';
import { PostgresGraphEventStore } from './graph-event-store.js';
import { PostgresIncidentRepository } from './incident-repository.js';
import { PostgresLeaseAuthorityRepository } from './lease-authority-repository.js';
import { PostgresLeaseRepository } from './lease-repository.js';
import { migratePostgres, requireCurrentPostgresSchema } from './migrate.js';
import { PostgresReceiptRepository } from './receipt-repository.js';
import { TxSession, type PostgresStoreStats } from './session.js';
import { PostgresSingleUseStore, SingleUsePurge } from './single-use-store.js';

export interface PostgresStoreOptions {
  /** Connections in this replica's pool (default 10). */
  poolSize?: number;
  /** Runs of one readWrite callback before a serialization failure or deadlock becomes OVERLOADED (default 8). */
  maxAttempts?: number;
  /** retry_after_ms given with OVERLOADED (default 1 000). */
  retryAfterMs?: number;
  /** How long to wait for a connection, from the pool or the server, before OVERLOADED (default 5 000 ms). */
  connectTimeoutMs?: number;
  /** Apply missing migrations when opening (default true). False: refuse a schema that is not exactly current. */
  migrate?: boolean;
  /** application_name of the connections (shows in pg_stat_activity). */
  applicationName?: string;
  /**
   * Longest wait for a row lock (a lease key, a chain head) before the transaction gives up with
   * OVERLOADED (default 5 000 ms; PostgreSQL's lock_timeout). Deadlocks are found sooner (deadlock_timeout).
   */
  lockTimeoutMs?: number;
  /**
   * A transaction left open this long without a statement is ended by the server (default 30 000 ms;
   * idle_in_transaction_session_timeout), so a stalled replica cannot hold a lease key or the receipt
   * chain head for longer.
   */
  idleInTransactionTimeoutMs?: number;
  /**
   * Send BEGIN with a transaction's first statement, values inlined as literals, and statements nobody
   * reads with the next one or the COMMIT (Sql.defer) (default true: fewer round trips per transaction).
   * False: BEGIN on its own, every statement alone with bound parameters, nothing deferred.
   */
  beginWithFirstStatement?: boolean;
}

export interface PostgresStore extends WritStore {
  readonly engine: 'postgres';
  /** Round trips, retries, commits and the single-use purge's counts so far (for tests and the benchmark). */
  stats(): PostgresStoreStats;
  /** Settles once the background purge of expired single-use ids running now (if any) has ended (for tests). */
  purgeSettled(): Promise<void>;
  watchGraphHead(onHead: (head: number) => void): Promise<{ close(): Promise<void> }>;
  watchLeaseReleases(onRelease: () => void): Promise<{ close(): Promise<void> }>;
  readClock(): Promise<number>;
}

/** int8 (bigint) as a JS number: every bigint Writ stores is a time in ms, an epoch, a seq or a ticket, all below 2^53. */
const INT8_OID = 20;
const types = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === INT8_OID ? (v: string) => Number(v) : pg.types.getTypeParser(oid, format as 'text')) as pg.CustomTypesConfig['getTypeParser'],
};

/**
 * Opens the datastore on PostgreSQL (several Writ replicas may share one database): a pool, and the
 * schema migrated to this code's version under an advisory lock.
 *
 * Isolation: READ COMMITTED, chosen over SERIALIZABLE on purpose. Every decision that must not race is
 * one statement that PostgreSQL re-checks on the newest committed version of the row it locked: a
 * lease key is taken by `INSERT … ON CONFLICT DO UPDATE … WHERE free`, a lease renewed or released by
 * `UPDATE … WHERE id AND token AND ACTIVE AND not expired`, a single-use id spent by `INSERT … ON
 * CONFLICT DO UPDATE … WHERE expired`; the graph and receipt heads are rows every appender locks before
 * reading them. So no verdict depends on a snapshot older than the lock it holds, and SERIALIZABLE
 * would only add aborts (and retries) under exactly the contention leases exist for. Deadlocks (a
 * preemption frees keys out of canonical order) and serialization failures are retried here.
 *
 * `read` runs REPEATABLE READ READ ONLY: one snapshot for the whole callback.
 */
export async function openPostgresStore(url: string, options: PostgresStoreOptions = {}): Promise<PostgresStore> {
  const retryAfterMs = options.retryAfterMs ?? 1_000;
  const pool = new pg.Pool({
    connectionString: url,
    max: options.poolSize ?? 10,
    connectionTimeoutMillis: options.connectTimeoutMs ?? 5_000,
    idleTimeoutMillis: 30_000,
    application_name: options.applicationName ?? 'writ',
    options: `-c lock_timeout=${Math.round(options.lockTimeoutMs ?? 5_000)} -c idle_in_transaction_session_timeout=${Math.round(options.idleInTransactionTimeoutMs ?? 30_000)}`,
    types,
  });
  // An idle connection that breaks (the server restarted) is dropped by the pool; without a listener
  // the error would end the process.
  pool.on('error', () => undefined);
  try {
    const client = await pool.connect();
    const ignore = () => undefined; // a broken connection also rejects the statement in flight
    client.on('error', ignore);
    try {
      if (options.migrate === false) await requireCurrentPostgresSchema(client);
      else await migratePostgres(client);
    } finally {
      client.off('error', ignore);
      client.release();
    }
  } catch (e) {
    await pool.end().catch(() => undefined);
    throw mapSetupError(e, url, retryAfterMs);
  }
  return new PgStore(pool, options.maxAttempts ?? 8, retryAfterMs, options.beginWithFirstStatement ?? true, url);
}

/**
 * Whether the database at `url` holds a Writ graph (a graph event: on a store Writ opened, at least
 * its bootstrap), read without migrating or writing anything. A database without Writ's tables holds none.
 */
export async function postgresHoldsGraph(url: string, options: { connectTimeoutMs?: number } = {}): Promise<boolean> {
  return probe(url, options, async (client) => {
    const { rows } = await client.query<{ present: boolean }>("SELECT to_regclass('graph_events') IS NOT NULL AS present");
    if (!rows[0]!.present) return false;
    return (await client.query('SELECT 1 FROM graph_events LIMIT 1')).rows.length > 0;
  });
}

/** Whether a Writ has made its store in the database (its schema is migrated), without changing anything. */
export async function postgresHoldsStore(url: string, options: { connectTimeoutMs?: number } = {}): Promise<boolean> {
  return probe(url, options, async (client) => (await client.query<{ present: boolean }>("SELECT to_regclass('schema_migrations') IS NOT NULL AS present")).rows[0]!.present);
}

async function probe<T>(url: string, options: { connectTimeoutMs?: number }, ask: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: options.connectTimeoutMs ?? 5_000, application_name: `writ-probe-${process.pid}` });
  client.on('error', () => undefined);
  try {
    await client.connect();
    return await ask(client);
  } catch (e) {
    throw mapSetupError(e, url, 1_000);
  } finally {
    await client.end().catch(() => undefined);
  }
}

class PgStore implements PostgresStore {
  readonly engine = 'postgres' as const;
  private readonly counters = { roundTrips: 0, retries: 0, eagerRuns: 0, commits: 0 };
  /** Expired single-use ids, deleted in the background on a pooled connection of its own (not a request's round trips). */
  private readonly purge = new SingleUsePurge(async (text) => (await this.pool.query(text)).rowCount ?? 0);
  private closed = false;

  constructor(
    private readonly pool: pg.Pool,
    private readonly maxAttempts: number,
    private readonly retryAfterMs: number,
    private readonly beginWithFirstStatement: boolean,
    private readonly url: string,
  ) {}

  watchGraphHead(onHead: (head: number) => void): Promise<{ close(): Promise<void> }> {
    return listenForGraphHeads(this.url, onHead);
  }

  watchLeaseReleases(onRelease: () => void): Promise<{ close(): Promise<void> }> {
    return listenForLeaseReleases(this.url, onRelease);
  }

  stats(): PostgresStoreStats {
    const { roundTrips, retries, eagerRuns, commits } = this.counters;
    const { bites, deleted, failures } = this.purge.counts;
    return { roundTrips, retries, eagerRuns, commits, purgeBites: bites, purgedIds: deleted, purgeFailures: failures };
  }

  purgeSettled(): Promise<void> {
    return this.purge.idle();
  }

  async readClock(): Promise<number> {
    if (this.closed) throw new Error('the PostgreSQL store is closed');
    try {
      const { rows } = await this.pool.query<{ now: number }>('SELECT writ_now_ms() AS now');
      return rows[0]!.now;
    } catch (e) {
      throw mapEngineError(e, this.retryAfterMs);
    }
  }

  read<T>(fn: (tx: StoreTx) => Promise<T>): Promise<T> {
    return this.run('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY', fn, true);
  }

  readWrite<T>(fn: (tx: StoreTx) => Promise<T>, options: ReadWriteOptions = {}): Promise<T> {
    return this.run('BEGIN ISOLATION LEVEL READ COMMITTED', fn, false, options.oneStatement === true);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.purge.close();
    await this.pool.end();
  }

  /** `oneStatement`: see ReadWriteOptions; a run again without deferring is an ordinary transaction. */
  private async run<T>(begin: string, fn: (tx: StoreTx) => Promise<T>, readOnly = false, oneStatement = false): Promise<T> {
    if (this.closed) throw new Error('the PostgreSQL store is closed');
    // Deferred statements (Sql.defer) are on until one of them refuses; then the callback runs again
    // with every statement sent on its own, so the refusal surfaces as the repository's own outcome.
    let deferring = this.beginWithFirstStatement;
    for (let attempt = 1; ; attempt++) {
      let client: pg.PoolClient;
      try {
        client = await this.pool.connect();
      } catch (e) {
        throw overloaded(`no database connection (${(e as Error).message})`, this.retryAfterMs, e);
      }
      const session = new TxSession(client, begin, this.counters, this.beginWithFirstStatement, deferring, oneStatement && deferring);
      // A checked-out connection that breaks emits 'error' on itself (the pool only listens to idle
      // ones); unheard, it would end the process. The failing statement rejects as well.
      const onError = (e: unknown) => (session.failure ??= e);
      client.on('error', onError);
      const giveBack = (err?: Error) => {
        client.off('error', onError);
        client.release(err);
      };
      let committing = false;
      try {
        let result: T;
        try {
          result = await fn(this.handle(session));
        } finally {
          session.close();
        }
        committing = true;
        // A callback that caught an engine error and went on must not be reported as committed.
        if (session.failure !== undefined) throw session.failure;
        if (readOnly) {
          // A read-only snapshot's answer is whole once its statements have answered: its COMMIT
          // changes nothing, so nobody waits for it (the connection goes back to the pool once it is done).
          session.commit(false).then(
            () => giveBack(),
            (e: unknown) => giveBack(e instanceof Error ? e : new Error(String(e))),
          );
          return result;
        }
        // Deferred statements go with the COMMIT; readWrite resolves only once it is acknowledged.
        if (await session.commit()) this.counters.commits += 1;
        giveBack();
        return result;
      } catch (e) {
        // Undo what the callback wrote; a connection that cannot even roll back is dropped from the pool.
        const broken = !session.begun
          ? undefined
          : await client.query('ROLLBACK').then(
              () => undefined,
              (rollbackError: unknown) => (rollbackError instanceof Error ? rollbackError : new Error(String(rollbackError))),
            );
        giveBack(broken);
        if (session.deferredRefused && deferring) {
          deferring = false;
          this.counters.eagerRuns += 1;
          attempt -= 1;
          continue;
        }
        if (isRetryable(session.failure ?? e) && attempt < this.maxAttempts) {
          this.counters.retries += 1;
          await sleep(Math.random() * Math.min(50, 2 ** attempt));
          continue;
        }
        // An error of the callback's own (no statement of it failed, and not the database's) comes out as it is.
        throw committing || session.failure !== undefined || e instanceof pg.DatabaseError ? mapEngineError(e, this.retryAfterMs) : e;
      }
    }
  }

  private handle(session: TxSession): StoreTx {
    return {
      graph: new PostgresGraphEventStore(session),
      singleUse: new PostgresSingleUseStore(session, this.purge),
      leases: new PostgresLeaseRepository(session),
      leaseAuthority: new PostgresLeaseAuthorityRepository(session),
      incidents: new PostgresIncidentRepository(session),
      receipts: new PostgresReceiptRepository(session),
    };
  }
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

