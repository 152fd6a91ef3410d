import type { Statement } from 'better-sqlite3';
import type {
  AcquireCommand,
  EpochBump,
  EpochBumpCommand,
  AcquireOutcome,
  FenceState,
  LeaseEvent,
  LeaseEventKind,
  HolderWaiting,
  KeyWaiterRow,
  LeaseKeyPage,
  LeaseKeyQuery,
  LeaseKeyRow,
  LeaseRefusal,
  LeaseRepository,
  LeaseRow,
  PreemptedLease,
  ReleaseCommand,
  ReleaseOutcome,
  RenewCommand,
  RenewOutcome,
  WaiterEntry,
  WaiterRow,
} from '../../lease/index.js';
import { checkBumpHeadroom } from '../../lease/index.js';
import { keyRoot } from '../../wire/key-family.js';
import type { SqliteDatabase } from './database.js';

const KEY_COLUMNS = `key, epoch, lease_id, holder, holder_instance, token_hash, priority, acquired_at, renewed_at,
  expires_at, duration_ms, transitions, preempted_by`;

const LEASE_COLUMNS = 'lease_id, holder, resources, epochs, state, expires_at, token_hash';
const EVENT_COLUMNS = 'seq, at, event, key, epoch, lease_id, holder, actor';
const BUMP_COLUMNS = 'seq, at, kind, margin, floor, keys, leases_ended, max_epoch, actor, reason, detail';

type BumpRowRaw = Omit<EpochBump, 'detail'> & { detail: string };

function toEpochBump(raw: BumpRowRaw): EpochBump {
  return { ...raw, detail: JSON.parse(raw.detail) as Record<string, unknown> };
}

/**
 * The keys a key K conflicts with besides itself (src/wire/key-family.ts), in `o`: its root (:rel_eq) if K
 * is a field key, its fields' keys, one range [K#, K$) of the primary key (:rel_lo, :rel_hi), if K is a
 * root. The parameters not used are NULL, which matches nothing.
 */
const RELATED = `(o.key = :rel_eq OR (o.key >= :rel_lo AND o.key < :rel_hi))`;
/** A related key held now by another lease. */
const RELATED_HELD = `${RELATED} AND o.holder IS NOT NULL AND o.expires_at > :now AND o.lease_id <> :lease_id`;
/** A related key whose lease lapsed without being ended (its holder still recorded), of another lease. */
const RELATED_LAPSED = `${RELATED} AND o.holder IS NOT NULL AND o.expires_at <= :now AND o.lease_id <> :lease_id`;
/** The key's family, the root :root and its fields' keys, as a range of the primary key. */
const FAMILY = `f.key >= :root AND f.key < :root || '$' AND (f.key = :root OR f.key >= :root || '#')`;

/**
 * Set on a taken key; every SET expression reads the table as it was before the statement. The epoch is
 * one above the highest of the key's family (the key itself included): one counter per family.
 */
const TAKE_SET = `
  epoch = (SELECT MAX(f.epoch) FROM lease_keys f WHERE ${FAMILY}) + 1,
  prev_lease_id = lease_id,
  lease_id = :lease_id, holder = :holder, holder_instance = :instance, token_hash = :token_hash,
  priority = :priority, acquired_at = :now, renewed_at = :now, expires_at = :expires_at, duration_ms = :ttl,
  transitions = transitions + CASE WHEN last_holder IS NOT NULL AND last_holder <> :holder THEN 1 ELSE 0 END,
  last_holder = :holder`;

/** Thrown inside a transaction to roll it back; carries the key that could not be taken. */
class KeyRefused {
  constructor(readonly key: string) {}
}

interface RelatedRow {
  key: string;
  lease_id: string;
  holder: string;
  expires_at: number;
}

/** The parameters that name a key's related keys and family (RELATED, FAMILY). */
function familyParams(key: string): { key: string; root: string; rel_eq: string | null; rel_lo: string | null; rel_hi: string | null } {
  const root = keyRoot(key);
  return root === key ? { key, root, rel_eq: null, rel_lo: `${key}#`, rel_hi: `${key}$` } : { key, root, rel_eq: root, rel_lo: null, rel_hi: null };
}

interface LeaseRowRaw {
  lease_id: string;
  holder: string;
  resources: string;
  epochs: string;
  state: LeaseRow['state'];
  expires_at: number;
  token_hash: string;
}

/**
 * The lease manager's store on SQLite, inside the store's transaction (SqliteStore.readWrite: one
 * `BEGIN IMMEDIATE` shared by the calls that arrive together, so writers of all processes sharing
 * the file are serialized). Each key is taken by one conditional UPDATE whose changed-row count (a
 * returned row or none) is the verdict. Each multi-statement call is a better-sqlite3 transaction
 * function, i.e. a savepoint inside the store's transaction: a refusal undoes only its own writes.
 */
export class SqliteLeaseRepository implements LeaseRepository {
  private readonly s;
  private readonly acquireTx;
  private readonly renewTx;
  private readonly releaseTx;
  private readonly enqueueTx;
  private readonly fenceTx;
  private readonly bumpTx;
  private readonly bumpStatements: () => { insert: Statement; list: Statement; highestFloor: Statement };

  constructor(db: SqliteDatabase) {
    // A live waiter ahead on the key or on a related one (its root, or its fields' keys).
    const notQueuedAhead = `NOT EXISTS (
      SELECT 1 FROM lease_waiter_keys wk JOIN lease_waiters w ON w.ticket = wk.ticket
      WHERE (wk.key = :key OR wk.key = :rel_eq OR (wk.key >= :rel_lo AND wk.key < :rel_hi)) AND w.deadline > :now AND w.ticket <> :ticket
        AND (w.priority > :priority OR (w.priority = :priority AND w.ticket < :ticket)))`;
    const noRelatedHeld = `NOT EXISTS (SELECT 1 FROM lease_keys o WHERE ${RELATED_HELD})`;
    this.s = {
      ensureKey: db.prepare('INSERT OR IGNORE INTO lease_keys (key, epoch, transitions) VALUES (?, 0, 0)'),
      takeFree: db.prepare(`UPDATE lease_keys SET ${TAKE_SET}, preempted_by = NULL
        WHERE key = :key AND (holder IS NULL OR expires_at <= :now) AND ${noRelatedHeld} AND ${notQueuedAhead}
        RETURNING epoch, prev_lease_id, preempted_by,
          (SELECT 1 FROM lease_keys o WHERE ${RELATED_LAPSED} LIMIT 1) AS lapsed_related`),
      takeAny: db.prepare(`UPDATE lease_keys SET ${TAKE_SET},
          preempted_by = CASE WHEN holder IS NOT NULL AND expires_at > :now THEN :holder ELSE NULL END
        WHERE key = :key
          AND (:preemptable IS NULL OR holder IS NULL OR expires_at <= :now OR holder IN (SELECT value FROM json_each(:preemptable)))
          AND ((holder IS NOT NULL AND expires_at > :now) OR :took_over OR ${notQueuedAhead}) AND ${noRelatedHeld}
        RETURNING epoch, prev_lease_id, preempted_by,
          (SELECT 1 FROM lease_keys o WHERE ${RELATED_LAPSED} LIMIT 1) AS lapsed_related`),
      relatedHeld: db.prepare(`SELECT o.key, o.lease_id, o.holder, o.expires_at FROM lease_keys o WHERE ${RELATED_HELD} ORDER BY o.key`),
      // A lease that lapsed holding a related key ends (as the lease a key is taken from does): so a renewal
      // that read the clock before it lapsed and runs after this take is refused, never revives it beside us.
      endLapsedRelated: db.prepare(`UPDATE leases SET state = 'EXPIRED', ended_at = :now
        WHERE state = 'ACTIVE' AND expires_at <= :now AND lease_id IN (
          SELECT o.lease_id FROM lease_keys o WHERE ${RELATED_LAPSED})`),
      freeKeyOf: db.prepare(`UPDATE lease_keys SET lease_id = NULL, holder = NULL, holder_instance = NULL, token_hash = NULL,
          priority = NULL, expires_at = NULL
        WHERE key = ? AND lease_id = ? RETURNING epoch`).pluck(),
      prevLease: db.prepare('SELECT holder, resources, epochs FROM leases WHERE lease_id = ?'),
      endLease: db.prepare(`UPDATE leases SET state = :state, ended_at = :now, preempted_by = :by
        WHERE lease_id = :lease_id AND state = 'ACTIVE'`),
      insertLease: db.prepare(`INSERT INTO leases (lease_id, holder, holder_instance, resources, epochs, token_hash, priority,
          state, created_at, renewed_at, expires_at, duration_ms)
        VALUES (:lease_id, :holder, :instance, :resources, :epochs, :token_hash, :priority, 'ACTIVE', :now, :now, :expires_at, :ttl)`),
      event: db.prepare(`INSERT INTO lease_history (at, event, key, epoch, lease_id, holder, actor, prev_seq)
        VALUES (?, ?, ?, ?, ?, ?, ?, (SELECT last_seq FROM lease_keys WHERE key = ?))`),
      removeWaiter: db.prepare('DELETE FROM lease_waiters WHERE ticket = ?'),
      purgeWaiters: db.prepare('DELETE FROM lease_waiters WHERE deadline <= ?'),
      insertWaiter: db.prepare(`INSERT INTO lease_waiters (holder, holder_instance, priority, enqueued_at, deadline)
        VALUES (?, ?, ?, ?, ?) RETURNING ticket`).pluck(),
      insertWaiterKey: db.prepare('INSERT INTO lease_waiter_keys (key, ticket) VALUES (?, ?)'),
      renewLease: db.prepare(`UPDATE leases SET renewed_at = :now, duration_ms = COALESCE(:ttl, duration_ms),
          expires_at = :now + COALESCE(:ttl, duration_ms)
        WHERE lease_id = :lease_id AND token_hash = :token_hash AND state = 'ACTIVE' AND expires_at > :now
        RETURNING resources, epochs, holder, expires_at, duration_ms`),
      renewKey: db.prepare(`UPDATE lease_keys SET renewed_at = :now, expires_at = :expires_at, duration_ms = :ttl
        WHERE key = :key AND lease_id = :lease_id AND token_hash = :token_hash AND expires_at > :now`),
      releaseLease: db.prepare(`UPDATE leases SET state = 'RELEASED', ended_at = :now
        WHERE lease_id = :lease_id AND token_hash = :token_hash AND state = 'ACTIVE' AND expires_at > :now
        RETURNING resources, epochs, holder`),
      releaseKey: db.prepare(`UPDATE lease_keys SET lease_id = NULL, holder = NULL, holder_instance = NULL, token_hash = NULL,
          priority = NULL, expires_at = NULL
        WHERE key = :key AND lease_id = :lease_id AND token_hash = :token_hash AND expires_at > :now`),
      leaseById: db.prepare(`SELECT ${LEASE_COLUMNS} FROM leases WHERE lease_id = ?`),
      leaseByIdAndToken: db.prepare(`SELECT ${LEASE_COLUMNS} FROM leases WHERE lease_id = ? AND token_hash = ?`),
      leaseByLegacyToken: db.prepare(`SELECT ${LEASE_COLUMNS.replace(/(\w+)/g, 'l.$1')} FROM lease_legacy_tokens t
        JOIN leases l ON l.lease_id = t.lease_id AND l.token_hash = t.token_hash WHERE t.token_hash = ?`),
      keyRow: db.prepare(`SELECT ${KEY_COLUMNS} FROM lease_keys WHERE key = ?`),
      // One statement per filter, so that each uses its index (an "(? IS NULL OR col = ?)" term uses none);
      // a page is a range of the key (its primary key) after :after, LIMIT -1 being none.
      listAllKeys: db.prepare(`SELECT ${KEY_COLUMNS} FROM lease_keys WHERE key > :after AND epoch > 0 ORDER BY key LIMIT :limit`),
      listKeysOf: db.prepare(`SELECT ${KEY_COLUMNS} FROM lease_keys WHERE holder = :holder AND key > :after AND epoch > 0 ORDER BY key LIMIT :limit`),
      // The resource's key and its fields' keys (resource#field): one range of the key, [resource, resource$).
      listKeysOfResource: db.prepare(`SELECT ${KEY_COLUMNS} FROM lease_keys
        WHERE key >= :resource AND key < :resource || '$' AND (key = :resource OR key >= :resource || '#')
          AND (:holder IS NULL OR holder = :holder) AND key > :after AND epoch > 0 ORDER BY key LIMIT :limit`),
      // INDEXED BY: without statistics the planner would rather walk every key in key order than sort the
      // few held. The index of the keys with a holder by expiry (migration 21) skips the leases that lapsed
      // without a release, whose holder is still recorded.
      heldKeys: db.prepare(`SELECT ${KEY_COLUMNS} FROM lease_keys INDEXED BY lease_keys_held_until
        WHERE holder IS NOT NULL AND expires_at > ? ORDER BY key`),
      maxEpoch: db.prepare('SELECT COALESCE(MAX(epoch), 0) FROM lease_keys').pluck(),
      waiters: db.prepare(`SELECT w.ticket, w.holder, w.holder_instance AS instance, w.priority, w.enqueued_at, w.deadline
        FROM lease_waiter_keys wk JOIN lease_waiters w ON w.ticket = wk.ticket
        WHERE wk.key = ? AND w.deadline > ? ORDER BY w.priority DESC, w.ticket`),
      waitingOf: db.prepare(`SELECT count(*) AS waiting, min(deadline) - :now AS firstDeadlineInMs
        FROM lease_waiters INDEXED BY lease_waiters_deadline WHERE deadline > :now AND holder = :holder`),
      liveWaiters: db.prepare(`SELECT wk.key, w.ticket, w.holder, w.holder_instance AS instance, w.priority, w.enqueued_at, w.deadline
        FROM lease_waiters w JOIN lease_waiter_keys wk ON wk.ticket = w.ticket JOIN lease_keys k ON k.key = wk.key
        WHERE w.deadline > ? AND k.epoch > 0 ORDER BY wk.key, w.priority DESC, w.ticket`),
      history: db.prepare(`SELECT ${EVENT_COLUMNS} FROM lease_history ORDER BY seq`),
      // The key's chain (migration 007): its latest event, then each event's prev_seq, by primary key.
      historyOfKey: db.prepare(`WITH RECURSIVE chain (${EVENT_COLUMNS}, prev_seq) AS (
          SELECT ${EVENT_COLUMNS.replace(/(\w+)/g, 'h.$1')}, h.prev_seq FROM lease_keys k JOIN lease_history h ON h.seq = k.last_seq WHERE k.key = ?
          UNION ALL
          SELECT ${EVENT_COLUMNS.replace(/(\w+)/g, 'h.$1')}, h.prev_seq FROM chain c JOIN lease_history h ON h.seq = c.prev_seq)
        SELECT ${EVENT_COLUMNS} FROM chain ORDER BY seq`),
      pruneHistory: db.prepare('DELETE FROM lease_history WHERE at < ? AND seq NOT IN (SELECT last_seq FROM lease_keys WHERE last_seq IS NOT NULL)'),
      historyOfLease: db.prepare(`SELECT ${EVENT_COLUMNS} FROM lease_history WHERE lease_id = ? ORDER BY seq`),
      endLiveLeases: db.prepare(`UPDATE leases SET state = 'EXPIRED', ended_at = ? WHERE state = 'ACTIVE'`),
      expireHeldKeys: db.prepare(`INSERT INTO lease_history (at, event, key, epoch, lease_id, holder, actor)
        SELECT ?, 'EXPIRE', key, epoch, lease_id, holder, ? FROM lease_keys WHERE holder IS NOT NULL ORDER BY key`),
      highestEpoch: db.prepare('SELECT COALESCE(MAX(epoch), 0) FROM lease_keys').pluck(),
      bumpKeys: db.prepare(`UPDATE lease_keys SET epoch = epoch + ?, lease_id = NULL, holder = NULL, holder_instance = NULL,
        token_hash = NULL, priority = NULL, expires_at = NULL`),
    };
    // Prepared on first use: a store opened on a file not yet migrated to version 9 (the migration tests) has no such table.
    // The new floor is above the highest recorded, not only the latest: a restore carries the replaced
    // store's record after the backup's (backup.ts), and the two need not be one history.
    let bumpStatements: { insert: Statement; list: Statement; highestFloor: Statement } | undefined;
    this.bumpStatements = () =>
      (bumpStatements ??= {
        insert: db.prepare(`INSERT INTO lease_epoch_bumps (at, kind, margin, floor, keys, leases_ended, max_epoch, actor, reason, detail)
          VALUES (:at, :kind, :margin, COALESCE((SELECT MAX(floor) FROM lease_epoch_bumps), 0) + :margin, :keys,
                  :leases_ended, (SELECT COALESCE(MAX(epoch), 0) FROM lease_keys), :actor, :reason, :detail)
          RETURNING ${BUMP_COLUMNS}`),
        list: db.prepare(`SELECT ${BUMP_COLUMNS} FROM lease_epoch_bumps ORDER BY seq`),
        highestFloor: db.prepare('SELECT COALESCE(MAX(floor), 0) FROM lease_epoch_bumps').pluck(),
      });

    this.acquireTx = db.transaction((cmd: AcquireCommand) => this.takeAll(cmd));
    this.bumpTx = db.transaction((cmd: EpochBumpCommand): EpochBump => {
      let keys = 0;
      let ended = 0;
      if (cmd.margin > 0) {
        checkBumpHeadroom(Math.max(this.s.highestEpoch.get() as number, this.bumpStatements().highestFloor.get() as number), cmd.margin);
        ended = this.s.endLiveLeases.run(cmd.now).changes;
        this.s.expireHeldKeys.run(cmd.now, cmd.actor);
        keys = this.s.bumpKeys.run(cmd.margin).changes;
      }
      const row = this.bumpStatements().insert.get({
        at: cmd.now, kind: cmd.kind, margin: cmd.margin, keys, leases_ended: ended, actor: cmd.actor, reason: cmd.reason, detail: JSON.stringify(cmd.detail),
      }) as BumpRowRaw;
      return toEpochBump(row);
    });
    this.renewTx = db.transaction((cmd: RenewCommand) => this.renewAll(cmd));
    this.releaseTx = db.transaction((cmd: ReleaseCommand) => this.releaseAll(cmd));
    this.enqueueTx = db.transaction((w: WaiterEntry) => {
      this.s.purgeWaiters.run(w.enqueuedAt);
      const ticket = this.s.insertWaiter.get(w.holder, w.instance, w.priority, w.enqueuedAt, w.deadline) as number;
      for (const key of w.keys) this.s.insertWaiterKey.run(key, ticket);
      return ticket;
    });
    this.fenceTx = db.transaction((key: string, tokenHash: string, leaseId: string | null): FenceState => {
      const row = this.s.keyRow.get(key) as LeaseKeyRow | undefined;
      // The lease the token names; else the key's current lease if this is its token (a token issued
      // before lease ids were derived from tokens, or by a process of an older version); else a lease of
      // such a token that has ended (lease_legacy_tokens, migration 007).
      const raw = ((leaseId === null ? undefined : this.s.leaseByIdAndToken.get(leaseId, tokenHash)) ??
        (row?.lease_id != null && row.token_hash === tokenHash ? this.s.leaseByIdAndToken.get(row.lease_id, tokenHash) : undefined) ??
        this.s.leaseByLegacyToken.get(tokenHash)) as LeaseRowRaw | undefined;
      return { key: row, lease: raw && toLeaseRow(raw) };
    });
  }

  async acquire(cmd: AcquireCommand): Promise<AcquireOutcome> {
    return this.acquireNow(cmd);
  }

  async bumpEpochs(cmd: EpochBumpCommand): Promise<EpochBump> {
    return this.bumpTx.immediate(cmd);
  }

  async epochBumps(): Promise<EpochBump[]> {
    return (this.bumpStatements().list.all() as BumpRowRaw[]).map(toEpochBump);
  }

  async renew(cmd: RenewCommand): Promise<RenewOutcome> {
    const epochs = this.renewTx.immediate(cmd);
    return epochs ? { ok: true, ...epochs } : { ok: false, reason: this.whyRefused(cmd.leaseId, cmd.tokenHash) };
  }

  async release(cmd: ReleaseCommand): Promise<ReleaseOutcome> {
    const epochs = this.releaseTx.immediate(cmd);
    return epochs ? { ok: true, epochs } : { ok: false, reason: this.whyRefused(cmd.leaseId, cmd.tokenHash) };
  }

  async enqueue(waiter: WaiterEntry): Promise<number> {
    return this.enqueueTx.immediate(waiter);
  }

  async dequeue(ticket: number): Promise<void> {
    this.s.removeWaiter.run(ticket);
  }

  async fenceState(key: string, tokenHash: string, leaseId: string | null): Promise<FenceState> {
    return this.fenceTx.deferred(key, tokenHash, leaseId);
  }

  async listKeys(query: LeaseKeyQuery): Promise<LeaseKeyPage> {
    const { key, resource, holder, after = '', limit } = query;
    if (key !== undefined) {
      const row = this.s.keyRow.get(key) as LeaseKeyRow | undefined;
      const match = row && row.epoch > 0 && (holder === undefined || row.holder === holder) && (resource === undefined || key === resource || key.startsWith(`${resource}#`))
        && Buffer.compare(Buffer.from(key), Buffer.from(after)) > 0 && limit !== 0;
      return { keys: match ? [row] : [] };
    }
    const max = limit ?? -1;
    if (resource !== undefined) return { keys: this.s.listKeysOfResource.all({ after, limit: max, resource, holder: holder ?? null }) as LeaseKeyRow[] };
    return { keys: (holder === undefined ? this.s.listAllKeys.all({ after, limit: max }) : this.s.listKeysOf.all({ after, limit: max, holder })) as LeaseKeyRow[] };
  }

  async heldKeys(now: number): Promise<{ keys: LeaseKeyRow[]; now?: number }> {
    return { keys: this.s.heldKeys.all(now) as LeaseKeyRow[] };
  }

  async maxEpoch(): Promise<number> {
    return this.s.maxEpoch.get() as number;
  }

  async waiters(key: string, now: number): Promise<WaiterRow[]> {
    return this.s.waiters.all(key, now) as WaiterRow[];
  }

  async waitingOf(holder: string, now: number): Promise<HolderWaiting> {
    return this.s.waitingOf.get({ holder, now }) as HolderWaiting;
  }

  async liveWaiters(now: number): Promise<KeyWaiterRow[]> {
    return this.s.liveWaiters.all(now) as KeyWaiterRow[];
  }

  async history(filter: { key?: string; leaseId?: string }): Promise<LeaseEvent[]> {
    const { key, leaseId } = filter;
    if (leaseId !== undefined) {
      const events = this.s.historyOfLease.all(leaseId) as LeaseEvent[];
      return key === undefined ? events : events.filter((e) => e.key === key);
    }
    return (key === undefined ? this.s.history.all() : this.s.historyOfKey.all(key)) as LeaseEvent[];
  }

  private acquireNow(cmd: AcquireCommand): AcquireOutcome {
    try {
      return this.acquireTx.immediate(cmd);
    } catch (e) {
      if (!(e instanceof KeyRefused)) throw e;
      // The verdict is already in (nothing changed); these reads only explain it: the key held, else a
      // related key held (by another lease: the caller's own were undone), else a waiter ahead.
      const row = this.s.keyRow.get(e.key) as LeaseKeyRow | undefined;
      const held = row?.holder != null && row.expires_at !== null && row.expires_at > cmd.now;
      if (!held) {
        const [related] = this.s.relatedHeld.all({ now: cmd.now, lease_id: cmd.leaseId, ...familyParams(e.key) }) as RelatedRow[];
        if (related) return { granted: false, key: e.key, holder: related.holder, expiresAt: related.expires_at, queued: false, heldKey: related.key };
      }
      return { granted: false, key: e.key, holder: row?.holder ?? null, expiresAt: row?.expires_at ?? null, queued: !held };
    }
  }

  private takeAll(cmd: AcquireCommand): AcquireOutcome {
    const expiresAt = cmd.now + cmd.ttlMs;
    const params = {
      lease_id: cmd.leaseId,
      holder: cmd.holder,
      instance: cmd.instance,
      token_hash: cmd.tokenHash,
      priority: cmd.priority,
      now: cmd.now,
      expires_at: expiresAt,
      ttl: cmd.ttlMs,
      ticket: cmd.ticket,
      preemptable: cmd.preemptable === undefined ? null : JSON.stringify(cmd.preemptable),
      took_over: 0, // whether this key's take ended a live lease of its family (preemptRelated)
      ...familyParams(cmd.keys[0]!), // each key's in turn
    };
    // A lease id (like its token) is used once: a lease with it, live or ended, refuses before any key is looked at.
    if (this.s.leaseById.get(cmd.leaseId) !== undefined) return { granted: false, key: cmd.keys[0]!, holder: null, expiresAt: null, queued: false, tokenUsed: true };
    const epochs: Record<string, number> = {};
    const preempted: PreemptedLease[] = [];
    const take = cmd.preempt ? this.s.takeAny : this.s.takeFree;
    for (const key of cmd.keys) {
      Object.assign(params, familyParams(key));
      // A related key (the root of a field key, the fields of a root) held by another lease: taken over
      // with the key when preempting (only from the preemptable; it ends PREEMPTED, all its keys freed),
      // else the take below refuses.
      // A takeover passes the queue as one of the key itself does: ending a live lease of the family
      // frees the key (when that lease held it too) before the take below looks at the queue.
      params.took_over = cmd.preempt && this.preemptRelated(key, params, cmd, preempted) ? 1 : 0;
      // The key's row is made on first use only: a refused take inserts it (epoch 0) and tries once more.
      const taken = (take.get(params) ?? (this.s.ensureKey.run(key).changes === 1 ? take.get(params) : undefined)) as
        | { epoch: number; prev_lease_id: string | null; preempted_by: string | null; lapsed_related: 1 | null }
        | undefined;
      if (!taken) throw new KeyRefused(key);
      // The take says (RETURNING) whether a lease that lapsed still holds a related key; only then is it ended
      // (endLapsedRelated): one statement fewer on every other acquisition.
      if (taken.lapsed_related !== null) this.s.endLapsedRelated.run(params);
      epochs[key] = taken.epoch;
      if (taken.prev_lease_id !== null) this.endPrevious(taken.prev_lease_id, key, undefined, taken.preempted_by !== null, cmd, preempted);
    }
    this.s.insertLease.run({ resources: JSON.stringify(cmd.keys), epochs: JSON.stringify(epochs), ...params }); // the spread last: see test/architecture/spread-then-add.test.ts
    for (const key of cmd.keys) this.event(cmd.now, 'ACQUIRE', key, epochs[key]!, cmd.leaseId, cmd.holder, null);
    if (cmd.ticket !== Number.MAX_SAFE_INTEGER) this.s.removeWaiter.run(cmd.ticket);
    return { granted: true, epochs, expiresAt, preempted };
  }

  /** Takes over the live leases of `key`'s related keys (see takeAll); whether there was any. */
  private preemptRelated(key: string, params: Record<string, unknown>, cmd: AcquireCommand, preempted: PreemptedLease[]): boolean {
    const rows = this.s.relatedHeld.all(params) as RelatedRow[];
    if (rows.some((r) => cmd.preemptable !== undefined && !cmd.preemptable.includes(r.holder))) throw new KeyRefused(key);
    for (const r of rows) {
      // Freed first, so that endPrevious records its PREEMPT once; a row of a lease already ended by an earlier one is skipped.
      const epoch = this.s.freeKeyOf.get(r.key, r.lease_id) as number | undefined;
      if (epoch !== undefined) this.endPrevious(r.lease_id, r.key, epoch, true, cmd, preempted);
    }
    return rows.length > 0;
  }

  /**
   * The lease a key was just taken from (or, preempting, a related key freed from) ends: preempted (its
   * other keys are freed too) or expired. `freedEpoch`: the freed key's epoch; undefined for a key just
   * taken, whose epoch was the previous lease's (the family counter may have moved it by more than one).
   */
  private endPrevious(prevLeaseId: string, key: string, freedEpoch: number | undefined, byPreemption: boolean, cmd: AcquireCommand, preempted: PreemptedLease[]): void {
    const prev = this.s.prevLease.get(prevLeaseId) as { holder: string; resources: string; epochs: string } | undefined;
    const prevHolder = prev?.holder ?? '';
    const epoch = freedEpoch ?? (prev ? (JSON.parse(prev.epochs) as Record<string, number>)[key] : undefined) ?? 0;
    const kind: LeaseEventKind = byPreemption ? 'PREEMPT' : 'EXPIRE';
    this.s.endLease.run({ state: byPreemption ? 'PREEMPTED' : 'EXPIRED', now: cmd.now, by: byPreemption ? cmd.holder : null, lease_id: prevLeaseId });
    this.event(cmd.now, kind, key, epoch, prevLeaseId, prevHolder, cmd.holder);
    if (!byPreemption) return;
    preempted.push({ lease_id: prevLeaseId, holder: prevHolder, key, epoch });
    // Its other keys, by primary key (the one just taken is no longer the previous lease's).
    for (const other of prev ? (JSON.parse(prev.resources) as string[]) : []) {
      const otherEpoch = this.s.freeKeyOf.get(other, prevLeaseId) as number | undefined;
      if (otherEpoch === undefined) continue;
      this.event(cmd.now, 'PREEMPT', other, otherEpoch, prevLeaseId, prevHolder, cmd.holder);
      preempted.push({ lease_id: prevLeaseId, holder: prevHolder, key: other, epoch: otherEpoch });
    }
  }

  private renewAll(cmd: RenewCommand): { epochs: Record<string, number>; expiresAt: number } | null {
    const params = { lease_id: cmd.leaseId, token_hash: cmd.tokenHash, now: cmd.now, ttl: cmd.ttlMs };
    const lease = this.s.renewLease.get(params) as { resources: string; epochs: string; holder: string; expires_at: number; duration_ms: number } | undefined;
    if (!lease) return null;
    const epochs = this.applyToKeys('RENEW', this.s.renewKey, { lease_id: cmd.leaseId, token_hash: cmd.tokenHash, now: cmd.now, expires_at: lease.expires_at, ttl: lease.duration_ms }, cmd, lease);
    return { epochs, expiresAt: lease.expires_at };
  }

  private releaseAll(cmd: ReleaseCommand): Record<string, number> | null {
    const params = { lease_id: cmd.leaseId, token_hash: cmd.tokenHash, now: cmd.now };
    const lease = this.s.releaseLease.get(params) as { resources: string; epochs: string; holder: string } | undefined;
    if (!lease) return null;
    return this.applyToKeys('RELEASE', this.s.releaseKey, params, cmd, lease);
  }

  async pruneHistory(before: number): Promise<number> {
    // Each key's chain starts at lease_keys.last_seq and follows prev_seq: it now ends at the cut.
    return this.s.pruneHistory.run(before).changes;
  }

  /**
   * Runs `stmt` on each key of the lease (by primary key, with `key` added to `params`) and records
   * `kind` in each key's history; returns the lease's epochs. Every key must change: a lease is renewed
   * or released whole, never in part.
   */
  private applyToKeys(kind: 'RENEW' | 'RELEASE', stmt: Statement, params: Record<string, unknown>, cmd: { leaseId: string; now: number }, lease: { resources: string; epochs: string; holder: string }): Record<string, number> {
    const keys = JSON.parse(lease.resources) as string[];
    const keyParams = { key: '', ...params }; // the new key first: see test/architecture/spread-then-add.test.ts
    let changed = 0;
    for (const key of keys) {
      keyParams.key = key;
      changed += stmt.run(keyParams).changes;
    }
    // Cannot happen while takeovers end the lease in the same transaction; refuse rather than half-apply.
    if (changed !== keys.length) throw new Error(`lease ${cmd.leaseId} holds ${changed} of its ${keys.length} keys`);
    const epochs = JSON.parse(lease.epochs) as Record<string, number>;
    for (const key of keys) this.event(cmd.now, kind, key, epochs[key]!, cmd.leaseId, lease.holder, null);
    return epochs;
  }

  private whyRefused(leaseId: string, tokenHash: string): LeaseRefusal {
    const lease = this.s.leaseById.get(leaseId) as LeaseRowRaw | undefined;
    if (!lease) return 'NOT_FOUND';
    if (lease.token_hash !== tokenHash) return 'TOKEN_MISMATCH';
    if (lease.state === 'PREEMPTED') return 'PREEMPTED';
    return 'EXPIRED';
  }

  private event(at: number, kind: LeaseEventKind, key: string, epoch: number, leaseId: string, holder: string, actor: string | null): void {
    this.s.event.run(at, kind, key, epoch, leaseId, holder, actor, key);
  }
}

function toLeaseRow(raw: LeaseRowRaw): LeaseRow {
  return {
    lease_id: raw.lease_id,
    holder: raw.holder,
    resources: JSON.parse(raw.resources) as string[],
    epochs: JSON.parse(raw.epochs) as Record<string, number>,
    state: raw.state,
    expires_at: raw.expires_at,
  };
}
