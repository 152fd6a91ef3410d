import pg from 'pg';
import { isEngineError } from './errors.js';

/** What the repositories run their SQL on: one transaction on one pooled connection. */
export interface Sql {
  /** Runs a statement whose answer the caller reads. */
  query<R>(text: string, values?: readonly unknown[]): Promise<R[]>;
  /**
   * Whether `defer` may be used. False when statements go one by one (BEGIN apart, bound values), and
   * when the store runs a transaction again because a deferred statement refused: then every statement
   * is sent on its own, so the one that refused answers for itself (see `defer`).
   */
  readonly deferring: boolean;
  /**
   * Queues a statement whose answer nobody reads: it travels with the transaction's next statement, or
   * with its COMMIT, in the same message (no round trip of its own). Order is kept: a later statement
   * sees what it wrote. Such a statement must refuse by failing with an integrity error (SQLSTATE class
   * 23: a unique or not-null violation), never by quietly changing nothing. A failure aborts the whole
   * transaction, so nothing of it lands; on an integrity error the store runs the callback once more
   * with `deferring` false, where the repository sends the checked form of the statement and throws
   * the domain's own refusal (e.g. a replayed id), exactly as it would have without deferring.
   */
  defer(text: string, values?: readonly unknown[]): void;
}

/** Counters the store keeps (tests and the benchmark read them; nothing decides on them). */
export interface PostgresStoreStats {
  /**
   * Messages sent whose answer is waited for (BEGIN and COMMIT included): network round trips. A
   * read-only transaction's COMMIT is sent but not waited for, and not counted.
   */
  roundTrips: number;
  /** Transactions run again after a serialization failure or deadlock. */
  retries: number;
  /** Transactions run again without deferring, after a deferred statement refused (see Sql.defer). */
  eagerRuns: number;
  /** Transactions committed by readWrite. */
  commits: number;
  /**
   * The background purge of expired single-use ids (single-use-store.ts SingleUsePurge): statements that
   * succeeded, ids deleted, runs ended by a failed statement. Its statements are not counted in `roundTrips`.
   */
  purgeBites: number;
  purgedIds: number;
  purgeFailures: number;
}

interface Queued {
  text: string;
  values: readonly unknown[];
  /** Absent for a deferred statement. */
  answer?: { resolve(rows: unknown[]): void; reject(e: unknown): void };
}

/**
 * One transaction's handle on a pooled connection. Every message it sends is one network round trip:
 *
 * - BEGIN is not a message of its own: it travels with the transaction's first message.
 * - Statements queued in the same turn of the event loop (a callback awaiting several at once, and
 *   every deferred statement queued before them) go in one message. A message of several statements is
 *   one simple-protocol query whose values are inlined as literals (pg's escapeLiteral for strings;
 *   only numbers, booleans, null, strings and string arrays occur); a single statement after BEGIN goes
 *   with bound values.
 * - Deferred statements still queued when the callback returns go with the COMMIT: `BEGIN; …; COMMIT`
 *   is one message when nothing in the transaction needed an answer.
 *
 * So a transaction of one answered statement costs two round trips (that statement, then COMMIT with
 * whatever was deferred), one of deferred statements only costs one, and one that runs nothing costs
 * none. With `beginWithFirstStatement` false, BEGIN is sent on its own, every statement is sent alone
 * with bound values and nothing is deferred.
 *
 * It refuses use after its callback returned, and remembers the first engine error: PostgreSQL aborts
 * the transaction on any error, so a callback that caught one and went on must not be reported as
 * committed (COMMIT of an aborted transaction is a ROLLBACK).
 */
export class TxSession implements Sql {
  private closed = false;
  private readonly queued: Queued[] = [];
  /** The message in flight, if any (one at a time on a connection). */
  private sending: Promise<void> | null = null;
  private scheduled = false;
  /** Whether BEGIN has been sent (with the first message). */
  begun = false;
  failure: unknown = undefined;
  /** Set when a message carrying deferred statements failed with an integrity error (see Sql.defer). */
  deferredRefused = false;
  /** One-statement mode: the message carrying the answered statement was sent, and with it the transaction committed. */
  private committedImplicitly = false;
  /** One-statement mode: the answered statement was asked for (nothing may be asked or deferred after it). */
  private answerTaken = false;

  /**
   * `implicit` (readWrite `oneStatement`, only with deferring on): no BEGIN and no COMMIT; the first
   * answered statement goes with what was deferred before it as one message, which PostgreSQL runs as
   * one implicit transaction (a simple query of several statements is one transaction); a second
   * answered statement is refused.
   */
  constructor(
    private readonly client: pg.PoolClient,
    private readonly begin: string,
    private readonly stats: Pick<PostgresStoreStats, 'roundTrips'>,
    private readonly beginWithFirstStatement = true,
    readonly deferring = beginWithFirstStatement,
    private readonly implicit = false,
  ) {}

  query<R>(text: string, values: readonly unknown[] = []): Promise<R[]> {
    if (this.closed) return Promise.reject(new Error('a store transaction handle was used after its callback returned'));
    if (this.implicit) {
      if (this.answerTaken) return Promise.reject(new Error('a one-statement transaction (readWrite oneStatement) sent a second statement whose answer it reads'));
      this.answerTaken = true;
    }
    return new Promise<R[]>((resolve, reject) => {
      this.queued.push({ text, values, answer: { resolve: resolve as (rows: unknown[]) => void, reject } });
      this.schedule();
    });
  }

  defer(text: string, values: readonly unknown[] = []): void {
    if (this.closed) throw new Error('a store transaction handle was used after its callback returned');
    if (!this.deferring) throw new Error('deferred statements are off in this transaction; send the checked statement');
    // Refused when asked, not at the commit: by then the answered statement has committed without it.
    if (this.implicit && this.answerTaken) throw new Error('a one-statement transaction (readWrite oneStatement) deferred a statement after its answered one');
    this.queued.push({ text, values });
  }

  close(): void {
    this.closed = true;
  }

  /**
   * Sends what is still queued with COMMIT (after the callback returned and its statements were
   * answered). Returns whether a transaction was committed (false: it never began, nothing was sent).
   */
  async commit(waited = true): Promise<boolean> {
    await this.drain();
    if (this.failure !== undefined) throw this.failure;
    const rest = this.queued.splice(0);
    for (const q of rest) q.answer?.reject(new Error('a store transaction handle was used after its callback returned'));
    const deferred = rest.filter((q) => !q.answer);
    if (this.implicit) {
      if (!this.committedImplicitly && deferred.length > 0) await this.send(deferred, true, waited);
      return this.committedImplicitly || deferred.length > 0;
    }
    if (!this.begun && deferred.length === 0) return false;
    await this.send(deferred, true, waited);
    return true;
  }

  private schedule(): void {
    if (this.scheduled || this.sending) return;
    this.scheduled = true;
    // Statements queued in this turn go together.
    queueMicrotask(() => {
      this.scheduled = false;
      this.sending = this.pump().finally(() => {
        this.sending = null;
        // Queued while the last message was finishing.
        if (this.queued.some((q) => q.answer)) this.schedule();
      });
    });
  }

  /** Sends queued messages one after another while some statement awaits an answer. */
  private async pump(): Promise<void> {
    for (;;) {
      const last = this.queued.findLastIndex((q) => q.answer !== undefined);
      if (last < 0) return;
      // One at a time when statements go bound; else everything up to the last answered statement.
      const batch = this.beginWithFirstStatement ? this.queued.splice(0, last + 1) : this.queued.splice(0, 1);
      await this.send(batch, false).catch(() => undefined);
    }
  }

  private async drain(): Promise<void> {
    while (this.sending || this.scheduled) {
      if (this.sending) await this.sending;
      else await new Promise<void>((r) => queueMicrotask(r));
    }
  }

  /** `waited` false: nobody waits for the answer (a read-only transaction's COMMIT), so it is no round trip in the stats. */
  private async send(batch: Queued[], commit: boolean, waited = true): Promise<void> {
    const reject = (e: unknown) => {
      for (const q of batch) q.answer?.reject(e);
    };
    if (this.failure !== undefined) return reject(this.failure);
    // Nothing goes out after the callback returned or threw, but its COMMIT: the store may be rolling back.
    if (this.closed && !commit) return reject(new Error('a store transaction handle was used after its callback returned'));
    const hasDeferred = batch.some((q) => !q.answer);
    if (this.implicit) return this.sendImplicit(batch, hasDeferred, reject, commit);
    try {
      if (!this.begun && !this.beginWithFirstStatement) {
        this.begun = true;
        this.stats.roundTrips += 1;
        await this.client.query(this.begin);
      }
      const withBegin = !this.begun;
      this.begun = true;
      if (batch.length === 1 && !withBegin && !commit) {
        // One statement inside the transaction: bound values, no literals to build.
        this.stats.roundTrips += 1;
        const result = await this.client.query(batch[0]!.text, batch[0]!.values as unknown[]);
        batch[0]!.answer!.resolve(result.rows);
        return;
      }
      const statements = [...(withBegin ? [this.begin] : []), ...batch.map((q) => (this.beginWithFirstStatement ? inlineValues(q.text, q.values) : q.text)), ...(commit ? ['COMMIT'] : [])];
      if (statements.length === 0) return;
      if (waited) this.stats.roundTrips += 1;
      // The newline before each semicolon ends a statement's trailing line comment, if it has one.
      const raw = (await this.client.query(statements.join('\n;\n'))) as unknown as pg.QueryResult | pg.QueryResult[];
      const results = Array.isArray(raw) ? raw : [raw];
      const offset = withBegin ? 1 : 0;
      batch.forEach((q, i) => q.answer?.resolve(results[offset + i]!.rows));
    } catch (e) {
      this.failed(e, hasDeferred, reject, commit);
    }
  }

  /** A message failed: nothing of it landed. Remembers what dooms the transaction, answers its statements, and throws at the commit. */
  private failed(e: unknown, hasDeferred: boolean, reject: (e: unknown) => void, commit: boolean): void {
    if (isEngineError(e)) {
      this.failure ??= e;
      if (hasDeferred && e instanceof pg.DatabaseError && (e.code ?? '').startsWith('23')) this.deferredRefused = true;
    } else if (hasDeferred) {
      // Deferred statements were in this message and never ran (building it failed): the transaction
      // must not commit without them, whatever the callback does with its own statement's error.
      this.failure ??= e;
    }
    reject(e);
    if (commit) throw e;
  }

  /** One-statement mode: the batch is the whole transaction, committed by PostgreSQL when it answers. */
  private async sendImplicit(batch: Queued[], hasDeferred: boolean, reject: (e: unknown) => void, commit: boolean): Promise<void> {
    // Never a second implicit transaction (query and defer refuse anything after the answered statement).
    if (this.committedImplicitly) return this.failed(new Error('a one-statement transaction (readWrite oneStatement) sent a second message'), hasDeferred, reject, commit);
    try {
      this.stats.roundTrips += 1;
      if (batch.length === 1) {
        const result = await this.client.query(batch[0]!.text, batch[0]!.values as unknown[]);
        this.committedImplicitly = true;
        batch[0]!.answer?.resolve(result.rows);
        return;
      }
      const raw = (await this.client.query(batch.map((q) => inlineValues(q.text, q.values)).join('\n;\n'))) as unknown as pg.QueryResult | pg.QueryResult[];
      this.committedImplicitly = true;
      const results = Array.isArray(raw) ? raw : [raw];
      batch.forEach((q, i) => q.answer?.resolve(results[i]!.rows));
    } catch (e) {
      // Nothing of the message landed (one implicit transaction).
      this.failed(e, hasDeferred, reject, commit);
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
