import type pg from 'pg';
import { isEngineError } from './errors.js';

/** What the repositories run their SQL on: one transaction on one pooled connection. */
export interface Sql {
  query<R>(text: string, values?: readonly unknown[]): Promise<R[]>;
}

/** Counters the store keeps (tests and the benchmark read them; nothing decides on them). */
export interface PostgresStoreStats {
  /** Statements sent, BEGIN and COMMIT included: each is one network round trip. */
  roundTrips: number;
  /** Transactions run again after a serialization failure or deadlock. */
  retries: number;
  /** Transactions committed by readWrite. */
  commits: number;
}

/**
 * One transaction's handle. It refuses use after its callback returned, and remembers the first
 * engine error, because PostgreSQL aborts the transaction on any error: a callback that caught one
 * and went on must not be reported as committed (COMMIT of an aborted transaction is a ROLLBACK).
 */
export class TxSession implements Sql {
  private closed = false;
  /** Statements run one after another on the connection, also when a callback starts several at once. */
  private queue: Promise<unknown> = Promise.resolve();
  failure: unknown = undefined;

  constructor(
    private readonly client: pg.PoolClient,
    private readonly stats: PostgresStoreStats,
  ) {}

  query<R>(text: string, values?: readonly unknown[]): Promise<R[]> {
    const run = this.queue.then(() => this.send<R>(text, values));
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async send<R>(text: string, values?: readonly unknown[]): Promise<R[]> {
    if (this.closed) throw new Error('a store transaction handle was used after its callback returned');
    if (this.failure !== undefined) throw this.failure;
    this.stats.roundTrips += 1;
    try {
      const result = await this.client.query(text, values as unknown[] | undefined);
      return result.rows as R[];
    } catch (e) {
      if (isEngineError(e)) this.failure ??= e;
      throw e;
    }
  }

  close(): void {
    this.closed = true;
  }
}
