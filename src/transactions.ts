/**
 * Runs callbacks in transactions of one kind of handle. The datastore (src/store/contract.ts) is
 * one; a domain service takes a `TxRunner` of just the ports it needs, so it never sees the store.
 */
export interface TxRunner<Tx> {
  /** A read-only view: it sees only committed state (on SQLite it never waits for a writer). */
  read<T>(fn: (tx: Tx) => Promise<T>): Promise<T>;
  /**
   * One atomic, durable transaction: resolves only after its commit is durable. The callback may be
   * run again when the engine retries a transaction that lost a serialization race, or that learned
   * at its commit that a write sent with it refuses (a spent single-use id), so it does nothing but
   * calls on `tx` (no network, no timers, no effects outside the store).
   */
  readWrite<T>(fn: (tx: Tx) => Promise<T>, options?: ReadWriteOptions): Promise<T>;
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
