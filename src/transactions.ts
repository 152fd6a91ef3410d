/**
 * Runs callbacks in transactions of one kind of handle. The datastore (src/store/contract.ts) is
 * one; a domain service takes a `TxRunner` of just the ports it needs, so it never sees the store.
 */
export interface TxRunner<Tx> {
  /**
   * A read-only view: it sees only committed state (on SQLite it never waits for a writer), and it
   * answers only once everything it could see is durable (see `ReadOptions.waitsFor`).
   */
  read<T>(fn: (tx: Tx) => Promise<T>, options?: ReadOptions<T>): Promise<T>;
  /**
   * One atomic, durable transaction: resolves only after its commit is durable. The callback may be
   * run again when the engine retries a transaction that lost a serialization race, or that learned
   * at its commit that a write sent with it refuses (a spent single-use id), so it does nothing but
   * calls on `tx` (no network, no timers, no effects outside the store).
   */
  readWrite<T>(fn: (tx: Tx) => Promise<T>, options?: ReadWriteOptions): Promise<T>;
}

export interface ReadOptions<T> {
  /**
   * Which answers must wait until the commits the read could see are durable; by default every answer
   * does (and every refusal the callback throws still does). On SQLite a commit is visible to readers
   * before the WAL sync that makes it durable completes, and while requests stream in a sync is nearly
   * always in flight: a read on the request path would wait for it on each call. Return false only for
   * an answer that says nothing a commit not yet durable decided — "nothing new since the head this
   * process already holds", "no such row" where rows of that kind are only ever added — so a crash
   * that lost those commits would leave it true. PostgreSQL reads see only durable commits and ignore it.
   */
  waitsFor?: (answer: T) => boolean;
}

export interface ReadWriteOptions {
  /**
   * The callback's whole work is ONE statement whose answer it reads, as its last call (calls whose
   * outcome is known only at the commit may come before it), and it commits whatever that answer is.
   * An engine may then run the transaction as that one message (PostgreSQL: the statements as one
   * implicit transaction, no BEGIN and no COMMIT of their own: one round trip). A second answered call
   * fails, and a callback that throws after it cannot roll it back: use it only where that is so.
   */
  oneStatement?: boolean;
}

/**
 * For a read inside `readWrite` whose answer the transaction's verdict rests on. With `lock: 'share'`
 * no other transaction can change what it read until this one ends, and a change in flight when it
 * reads is waited for and seen (PostgreSQL, READ COMMITTED: a plain SELECT holds nothing, so a change
 * committed between the read and this transaction's commit would go unseen). Shared: transactions that
 * only read under it do not wait for one another. Engines whose write transactions exclude every
 * other writer until they end (SQLite) have nothing to lock and ignore it. Not for `read` (a snapshot).
 */
export interface ReadLock {
  lock?: 'share';
}
