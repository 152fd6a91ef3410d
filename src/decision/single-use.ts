import type { TxRunner } from '../transactions.js';

/**
 * Storage port of single-use ids (a caller assertion's `jti`, a decision id, an approval): each is
 * spent at most once across every process and replica sharing the store, until it expires.
 */
export interface SingleUseStore {
  /**
   * Spends the id: true the first time, false for every later call (until it expires), and false for
   * an id already expired at `now` (it could not be remembered, so it is never spent).
   */
  spend(namespace: string, id: string, expiresAt: number, now: number): Promise<boolean>;
  /**
   * Spends the id as `spend` does, but where `spend` would return false the transaction fails with
   * `refusal(why)`: nothing of it lands, and readWrite rejects with that error. The outcome may be known
   * only at commit (an engine may send the spend with the COMMIT, PostgreSQL does: no round trip of
   * its own), so the callback must not count on the spend having happened before it returns.
   */
  spendOrRefuse(namespace: string, id: string, expiresAt: number, now: number, refusal: (why: SpendRefusal) => Error): Promise<void>;
  /** Whether `spend` would refuse this id now (a read: it records nothing). */
  isSpent(namespace: string, id: string, now: number): Promise<boolean>;
  /**
   * Why `spend(namespace, id, expiresAt, now)` would be refused now, or null (a read: it records
   * nothing): `expired` when `expiresAt` is past by `now` or by the store's clock (PostgreSQL: the
   * database's, read by the same statement), `spent` when the id is spent and live. For a check whose
   * holder's own clock may be behind the store's: what it reads is the store's judgement, not its own.
   */
  wouldRefuse(namespace: string, id: string, expiresAt: number, now: number): Promise<SpendRefusal | null>;
}

/**
 * Why a spend was refused: the id is spent already and still live (`spent`), or it is past its expiry
 * by the store's clock (`expired`). An id the caller's `now` finds live can still be expired by the
 * store's clock when that clock is ahead of the caller's: on PostgreSQL the database's clock, which every
 * replica's spends are judged by too, so a replica whose clock is behind the database's learns it here
 * (`storeNow` − `now`) instead of taking the refusal for a replay.
 */
export type SpendRefusal = { reason: 'spent' } | { reason: 'expired'; storeNow: number };

/**
 * Ids shown to this process and not yet spent durably (kept in memory until they expire). Closes the
 * window between verifying a single-use id and spending it with the request's effect, for a replay
 * that reaches the same process; across processes the durable spend decides.
 */
export class PresentedIds {
  /** Keys in arrival order, with their expiry (ms). */
  private readonly presented = new Map<string, number>();

  /** True the first time this process is shown the id (until `expiresAt`), false after. */
  present(namespace: string, id: string, expiresAt: number, now: number): boolean {
    // Oldest first: entries share one maximum lifetime, so the expired ones are mostly at the front.
    for (const [key, until] of this.presented) {
      if (until > now) break;
      this.presented.delete(key);
    }
    const key = presentedKey(namespace, id);
    const until = this.presented.get(key);
    if (until !== undefined && until > now) return false;
    this.presented.delete(key);
    this.presented.set(key, expiresAt);
    return true;
  }

  /** Drops the mark (once the id was spent, or its spend failed). */
  forget(namespace: string, id: string): void {
    this.presented.delete(presentedKey(namespace, id));
  }
}

const presentedKey = (namespace: string, id: string) => `${namespace}\u0000${id}`;

/** The transaction handle a single-use spend needs. */
export interface SingleUseTx {
  readonly singleUse: SingleUseStore;
}

/**
 * Single-use ids as a caller sees them: the durable spends in the store, and the ids this process was
 * shown and has not spent yet (PresentedIds). A spend happens inside the transaction that records
 * what the request did (see caller-auth.ts `spendAssertion`).
 */
export class ReplayGuard {
  private readonly presented = new PresentedIds();

  constructor(readonly store: TxRunner<SingleUseTx>) {}

  /**
   * Whether the id is spent durably (by any process sharing the store). "Not spent" is answered without
   * waiting for the commits in flight: a commit can only spend more (a purge removes only expired ids,
   * which nobody may present), so a crash that lost them would leave it true. "Spent" waits until the
   * spend it saw is durable.
   */
  isSpent(namespace: string, id: string, now: number): Promise<boolean> {
    return this.store.read((tx) => tx.singleUse.isSpent(namespace, id, now), { waitsFor: (spent) => spent });
  }

  /** Why a spend of the id would be refused now (SingleUseStore.wouldRefuse), or null; waits as `isSpent` does for "spent". */
  wouldRefuse(namespace: string, id: string, expiresAt: number, now: number): Promise<SpendRefusal | null> {
    return this.store.read((tx) => tx.singleUse.wouldRefuse(namespace, id, expiresAt, now), { waitsFor: (why) => why?.reason === 'spent' });
  }

  present(namespace: string, id: string, expiresAt: number, now: number): boolean {
    return this.presented.present(namespace, id, expiresAt, now);
  }

  forget(namespace: string, id: string): void {
    this.presented.forget(namespace, id);
  }
}
