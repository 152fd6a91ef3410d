import pg from 'pg';
import { isEngineError } from './errors.js';

/** What the repositories run their SQL on: one transaction on one pooled connection. */
export interface Sql {
  query<R>(text: string, values?: readonly unknown[]): Promise<R[]>;
}

/** Counters the store keeps (tests and the benchmark read them; nothing decides on them). */
export interface PostgresStoreStats {
  /** Messages sent that wait for the server's answer (BEGIN and COMMIT included): network round trips. */
  roundTrips: number;
  /** Transactions run again after a serialization failure or deadlock. */
  retries: number;
  /** Transactions committed by readWrite. */
  commits: number;
}

/**
 * One transaction's handle on a pooled connection.
 *
 * - BEGIN is not a round trip of its own: it travels with the transaction's first statement, as one
 *   simple-protocol message `BEGIN …; <statement>` whose values are inlined as literals
 *   (pg's escapeLiteral for strings; only numbers, booleans, null, strings and string arrays occur).
 *   So a transaction of one statement costs two round trips (that message, then COMMIT); one that
 *   runs no statement costs none.
 * - Statements run one after another, also when a callback starts several at once.
 * - It refuses use after its callback returned, and remembers the first engine error: PostgreSQL aborts
 *   the transaction on any error, so a callback that caught one and went on must not be reported as
 *   committed (COMMIT of an aborted transaction is a ROLLBACK).
 */
export class TxSession implements Sql {
  private closed = false;
  private queue: Promise<unknown> = Promise.resolve();
  /** Whether BEGIN has been sent (with the first statement). */
  begun = false;
  failure: unknown = undefined;

  constructor(
    private readonly client: pg.PoolClient,
    private readonly begin: string,
    private readonly stats: PostgresStoreStats,
    private readonly beginWithFirstStatement = true,
  ) {}

  query<R>(text: string, values?: readonly unknown[]): Promise<R[]> {
    const run = this.queue.then(() => this.send<R>(text, values));
    this.queue = run.catch(() => undefined);
    return run;
  }

  close(): void {
    this.closed = true;
  }

  private async send<R>(text: string, values?: readonly unknown[]): Promise<R[]> {
    if (this.closed) throw new Error('a store transaction handle was used after its callback returned');
    if (this.failure !== undefined) throw this.failure;
    this.stats.roundTrips += 1;
    try {
      if (!this.begun && !this.beginWithFirstStatement) {
        this.begun = true;
        this.stats.roundTrips += 1;
        await this.client.query(this.begin);
      }
      if (!this.begun) {
        this.begun = true;
        const results = (await this.client.query(`${this.begin}; ${inlineValues(text, values ?? [])}`)) as unknown as pg.QueryResult[];
        return results[results.length - 1]!.rows as R[];
      }
      const result = await this.client.query(text, values as unknown[] | undefined);
      return result.rows as R[];
    } catch (e) {
      if (isEngineError(e)) this.failure ??= e;
      throw e;
    }
  }
}

/** `text` with each `$n` replaced by the literal of values[n-1]. */
export function inlineValues(text: string, values: readonly unknown[]): string {
  return text.replace(/\$(\d+)/g, (_, n: string) => {
    const i = Number(n) - 1;
    if (i < 0 || i >= values.length) throw new Error(`statement refers to $${n} but has ${values.length} values`);
    return literal(values[i]);
  });
}

function literal(v: unknown): string {
  if (v === null || v === undefined) return 'NULL';
  if (typeof v === 'number') {
    if (!Number.isFinite(v)) throw new Error(`cannot send ${v} to PostgreSQL`);
    return v < 0 ? `(${String(v)})` : String(v);
  }
  if (typeof v === 'boolean') return v ? 'true' : 'false';
  if (typeof v === 'string') return pg.escapeLiteral(v);
  if (Array.isArray(v)) {
    if (!v.every((x) => typeof x === 'string')) throw new Error('only arrays of strings are sent to PostgreSQL');
    return v.length === 0 ? "'{}'::text[]" : `ARRAY[${v.map((x) => pg.escapeLiteral(x as string)).join(', ')}]::text[]`;
  }
  throw new Error(`cannot send a ${typeof v} to PostgreSQL`);
}
