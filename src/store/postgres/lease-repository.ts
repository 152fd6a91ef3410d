import type { LeaseEvent } from '../../lease/types.js';
import {
  checkBumpHeadroom,
  NEWCOMER_TICKET,
  type AcquireCommand,
  type AcquireOutcome,
  type EpochBump,
  type EpochBumpCommand,
  type FenceState,
  type HolderWaiting,
  type KeyWaiterRow,
  type LeaseKeyPage,
  type LeaseKeyQuery,
  type LeaseKeyRow,
  type LeaseRepository,
  type LeaseRow,
  type ReleaseCommand,
  type ReleaseOutcome,
  type RenewCommand,
  type RenewOutcome,
  type WaiterEntry,
  type WaiterRow,
} from '../../lease/repository.js';
import type { Sql } from './session.js';

const KEY_COLUMNS = `key, epoch, lease_id, holder, holder_instance, token_hash, priority, acquired_at, renewed_at,
  expires_at, duration_ms, transitions, preempted_by`;
const EVENT_COLUMNS = 'seq, at, event, key, epoch, lease_id, holder, actor';
const BUMP_COLUMNS = 'seq, at, kind, margin, floor, keys, leases_ended, max_epoch, actor, reason, detail';

/**
 * The lease manager's store on PostgreSQL. Lease time is the database's clock: every `now` passed in
 * is ignored (a replica whose clock is off cannot see a live lease as expired, or the reverse), and the
 * times returned (expiresAt, FenceState.now, history `at`) are the database's.
 *
 * acquire, renew and release are one statement each, a call of a PL/pgSQL function
 * (migrations/001-initial.ts, acquire as 016-lease-key-families.ts redefines it last: key families): with BEGIN sent
 * along and the COMMIT, two round trips for a transaction that does only that. The acquire function
 * takes its keys inside an exception block (a subtransaction), so a refused key undoes the keys taken
 * before it and the caller's transaction stays usable and as it was.
 *
 * Waiters: the queue compares deadlines with the database's clock too, so `enqueue` keeps the waiter's
 * wait (deadline − enqueuedAt) and stores it from the database's now; `waiters` reports those times.
 */
export class PostgresLeaseRepository implements LeaseRepository {
  constructor(private readonly sql: Sql) {}

  async acquire(cmd: AcquireCommand): Promise<AcquireOutcome> {
    const [row] = await this.sql.query<{ outcome: AcquireJson }>(
      'SELECT writ_lease_acquire($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) AS outcome',
      [cmd.keys, cmd.leaseId, cmd.tokenHash, cmd.holder, cmd.instance, cmd.priority, cmd.ttlMs, cmd.preempt, cmd.preempt ? (cmd.preemptable ?? null) : null, cmd.ticket],
    );
    const o = row!.outcome;
    if (o.granted) return { granted: true, epochs: o.epochs, expiresAt: o.expiresAt, preempted: o.preempted };
    return {
      granted: false, key: o.key, holder: o.holder, expiresAt: o.expiresAt, queued: o.queued, now: o.now,
      ...(o.tokenUsed ? { tokenUsed: true as const } : {}), ...(o.heldKey === undefined ? {} : { heldKey: o.heldKey }),
    };
  }

  async bumpEpochs(cmd: EpochBumpCommand): Promise<EpochBump> {
    // No acquisition (of any replica) may insert or take a key between the bump and its record.
    await this.sql.query('LOCK TABLE lease_keys IN SHARE ROW EXCLUSIVE MODE');
    let keys = 0;
    let ended = 0;
    if (cmd.margin > 0) {
      const [h] = await this.sql.query<{ n: number }>(
        `SELECT greatest((SELECT coalesce(max(epoch), 0) FROM lease_keys), (SELECT coalesce(max(floor), 0) FROM lease_epoch_bumps))::bigint AS n`,
      );
      checkBumpHeadroom(Number(h!.n), cmd.margin);
      const [e] = await this.sql.query<{ n: number }>(
        `WITH ended AS (UPDATE leases SET state = 'EXPIRED', ended_at = writ_now_ms() WHERE state = 'ACTIVE' RETURNING 1)
         SELECT count(*)::bigint AS n FROM ended`,
      );
      ended = e!.n;
      await this.sql.query(
        `INSERT INTO lease_history (at, event, key, epoch, lease_id, holder, actor)
         SELECT writ_now_ms(), 'EXPIRE', key, epoch, lease_id, holder, $1 FROM lease_keys WHERE holder IS NOT NULL ORDER BY key COLLATE "C"`,
        [cmd.actor],
      );
      const [k] = await this.sql.query<{ n: number }>(
        `WITH bumped AS (UPDATE lease_keys SET epoch = epoch + $1, lease_id = NULL, holder = NULL, holder_instance = NULL,
                           token_hash = NULL, priority = NULL, expires_at = NULL RETURNING 1)
         SELECT count(*)::bigint AS n FROM bumped`,
        [cmd.margin],
      );
      keys = k!.n;
    }
    // The new floor is above the highest recorded, not only the latest: a record copied from a SQLite
    // file (`writ store copy`) may hold a restore's merged history, with a lower floor after a higher one.
    const [row] = await this.sql.query<EpochBump>(
      `INSERT INTO lease_epoch_bumps (at, kind, margin, floor, keys, leases_ended, max_epoch, actor, reason, detail)
       VALUES (writ_now_ms(), $1, $2, coalesce((SELECT max(floor) FROM lease_epoch_bumps), 0) + $2, $3, $4,
               (SELECT coalesce(max(epoch), 0) FROM lease_keys), $5, $6, $7::jsonb)
       RETURNING ${BUMP_COLUMNS}`,
      [cmd.kind, cmd.margin, keys, ended, cmd.actor, cmd.reason, JSON.stringify(cmd.detail)],
    );
    return row!;
  }

  async epochBumps(): Promise<EpochBump[]> {
    return this.sql.query<EpochBump>(`SELECT ${BUMP_COLUMNS} FROM lease_epoch_bumps ORDER BY seq`);
  }

  async renew(cmd: RenewCommand): Promise<RenewOutcome> {
    const o = await this.endOrRenew(cmd.leaseId, cmd.tokenHash, cmd.ttlMs, false);
    return o.ok ? { ok: true, epochs: o.epochs, expiresAt: o.expiresAt } : { ok: false, reason: o.reason };
  }

  async release(cmd: ReleaseCommand): Promise<ReleaseOutcome> {
    const o = await this.endOrRenew(cmd.leaseId, cmd.tokenHash, null, true);
    return o.ok ? { ok: true, epochs: o.epochs } : { ok: false, reason: o.reason };
  }

  async enqueue(w: WaiterEntry): Promise<number> {
    const [row] = await this.sql.query<{ ticket: number }>(
      `WITH t AS (SELECT writ_now_ms() AS now),
            purged AS (DELETE FROM lease_waiters WHERE deadline <= (SELECT now FROM t)),
            waiter AS (INSERT INTO lease_waiters (holder, holder_instance, priority, enqueued_at, deadline)
                       SELECT $1, $2, $3, t.now, t.now + $4 FROM t RETURNING ticket),
            keys AS (INSERT INTO lease_waiter_keys (key, ticket) SELECT u.key, waiter.ticket FROM waiter, unnest($5::text[]) AS u (key))
       SELECT ticket FROM waiter`,
      [w.holder, w.instance, w.priority, Math.max(0, w.deadline - w.enqueuedAt), w.keys],
    );
    return row!.ticket;
  }

  async dequeue(ticket: number): Promise<void> {
    if (ticket === NEWCOMER_TICKET) return;
    await this.sql.query('DELETE FROM lease_waiters WHERE ticket = $1', [ticket]);
  }

  async fenceState(key: string, tokenHash: string, leaseId: string | null): Promise<FenceState> {
    // One statement, so the key's row and the lease are read from one snapshot. The lease the token
    // names; else the key's current lease if this is its token.
    const [row] = await this.sql.query<{ key_row: LeaseKeyRow | null; lease: LeaseRow | null; now: number }>(
      `SELECT (SELECT to_jsonb(k) FROM (SELECT ${KEY_COLUMNS} FROM lease_keys WHERE key = $1) k) AS key_row,
              coalesce(
                (SELECT to_jsonb(l) FROM (SELECT lease_id, holder, resources, epochs, state, expires_at FROM leases
                                           WHERE lease_id = $3 AND token_hash = $2) l),
                (SELECT to_jsonb(l) FROM (SELECT l.lease_id, l.holder, l.resources, l.epochs, l.state, l.expires_at
                                            FROM lease_keys k JOIN leases l ON l.lease_id = k.lease_id AND l.token_hash = $2
                                           WHERE k.key = $1 AND k.token_hash = $2) l)) AS lease,
              writ_now_ms() AS now`,
      [key, tokenHash, leaseId],
    );
    return { key: row!.key_row ?? undefined, lease: row!.lease ?? undefined, now: row!.now };
  }

  async listKeys(query: LeaseKeyQuery): Promise<LeaseKeyPage> {
    // The database's now, read once in the same statement (writ_now_ms is volatile), as heldKeys does:
    // the rows' state is judged by the clock the acquisitions use. One statement per filter, so that
    // each uses its index; a page is a range of lease_keys_key_c (migration 14) after $1, in bytewise
    // order; LIMIT NULL is none.
    const { key, resource, holder, after = '', limit } = query;
    const page = [after, limit ?? null];
    let where: string;
    let params: unknown[];
    if (key !== undefined) {
      where = `k.key = $3::text AND ($4::text IS NULL OR k.holder = $4)
               AND ($5::text IS NULL OR k.key = $5::text OR k.key COLLATE "C" >= ($5::text || '#') COLLATE "C" AND k.key COLLATE "C" < ($5::text || '$') COLLATE "C")`;
      params = [...page, key, holder ?? null, resource ?? null];
    } else if (resource !== undefined) {
      // The resource's key and its fields' keys (resource#field): one range of the key, [resource, resource$).
      where = `k.key COLLATE "C" >= $3::text COLLATE "C" AND k.key COLLATE "C" < ($3::text || '$') COLLATE "C"
               AND (k.key = $3::text OR k.key COLLATE "C" >= ($3::text || '#') COLLATE "C") AND ($4::text IS NULL OR k.holder = $4)`;
      params = [...page, resource, holder ?? null];
    } else if (holder !== undefined) {
      where = 'k.holder = $3::text';
      params = [...page, holder];
    } else {
      where = 'true';
      params = page;
    }
    return this.withStoreNow(await this.sql.query<LeaseKeyRow & { store_now: number }>(
      `WITH t AS MATERIALIZED (SELECT writ_now_ms() AS now)
       SELECT ${KEY_COLUMNS}, (SELECT now FROM t) AS store_now
         FROM lease_keys k WHERE ${where} AND k.key COLLATE "C" > $1::text COLLATE "C" AND k.epoch > 0
        ORDER BY k.key COLLATE "C" LIMIT $2::bigint`,
      params,
    ));
  }

  async heldKeys(_now: number): Promise<{ keys: LeaseKeyRow[]; now?: number }> {
    // The database's now, read once (writ_now_ms is volatile; the CTE is evaluated once, each scalar
    // subquery of it an init plan, a parameter of the scan); the partial index of the keys with a holder
    // by expiry (lease_keys_held_until, migration 14) finds the live ones as one range, so neither the
    // keys no one holds nor the leases that lapsed without a release are read.
    return this.withStoreNow(await this.sql.query<LeaseKeyRow & { store_now: number }>(
      `WITH t AS MATERIALIZED (SELECT writ_now_ms() AS now)
       SELECT ${KEY_COLUMNS}, (SELECT now FROM t) AS store_now
         FROM lease_keys k WHERE k.holder IS NOT NULL AND k.expires_at > (SELECT now FROM t) ORDER BY k.key COLLATE "C"`,
    ));
  }

  /** Rows read beside the database's now (`store_now`): the rows, and that now when there is a row. */
  private withStoreNow(rows: (LeaseKeyRow & { store_now: number })[]): LeaseKeyPage {
    const now = rows[0]?.store_now;
    const keys = rows.map(({ store_now: _, ...key }) => key);
    return now === undefined ? { keys } : { keys, now };
  }

  async maxEpoch(): Promise<number> {
    const [row] = await this.sql.query<{ max: number }>('SELECT coalesce(max(epoch), 0) AS max FROM lease_keys');
    return row!.max;
  }

  async waiters(key: string, _now: number): Promise<WaiterRow[]> {
    return this.sql.query<WaiterRow>(
      `SELECT w.ticket, w.holder, w.holder_instance AS instance, w.priority, w.enqueued_at, w.deadline
         FROM lease_waiter_keys wk JOIN lease_waiters w ON w.ticket = wk.ticket
        WHERE wk.key = $1 AND w.deadline > writ_now_ms() ORDER BY w.priority DESC, w.ticket`,
      [key],
    );
  }

  async waitingOf(holder: string, _now: number): Promise<HolderWaiting> {
    const [row] = await this.sql.query<HolderWaiting>(
      `WITH t AS (SELECT writ_now_ms() AS now)
       SELECT count(*)::int8 AS waiting, min(w.deadline - t.now)::int8 AS "firstDeadlineInMs"
         FROM t, lease_waiters w WHERE w.deadline > t.now AND w.holder = $1`,
      [holder],
    );
    return row!;
  }

  async liveWaiters(_now: number): Promise<KeyWaiterRow[]> {
    return this.sql.query<KeyWaiterRow>(
      `SELECT wk.key, w.ticket, w.holder, w.holder_instance AS instance, w.priority, w.enqueued_at, w.deadline
         FROM lease_waiters w JOIN lease_waiter_keys wk ON wk.ticket = w.ticket JOIN lease_keys k ON k.key = wk.key
        WHERE w.deadline > writ_now_ms() AND k.epoch > 0 ORDER BY wk.key COLLATE "C", w.priority DESC, w.ticket`,
    );
  }

  async pruneHistory(before: number): Promise<number> {
    const rows = await this.sql.query<{ n: number }>(
      `WITH gone AS (DELETE FROM lease_history h WHERE h.at < $1
                       AND h.seq < (SELECT max(x.seq) FROM lease_history x WHERE x.key = h.key) RETURNING 1)
       SELECT count(*)::int8 AS n FROM gone`,
      [before],
    );
    return rows[0]!.n;
  }

  async history(filter: { key?: string; leaseId?: string }): Promise<LeaseEvent[]> {
    const { key, leaseId } = filter;
    if (leaseId !== undefined) {
      return this.sql.query<LeaseEvent>(
        `SELECT ${EVENT_COLUMNS} FROM lease_history WHERE lease_id = $1 AND ($2::text IS NULL OR key = $2) ORDER BY seq`,
        [leaseId, key ?? null],
      );
    }
    if (key !== undefined) return this.sql.query<LeaseEvent>(`SELECT ${EVENT_COLUMNS} FROM lease_history WHERE key = $1 ORDER BY seq`, [key]);
    return this.sql.query<LeaseEvent>(`SELECT ${EVENT_COLUMNS} FROM lease_history ORDER BY seq`);
  }

  private async endOrRenew(leaseId: string, tokenHash: string, ttlMs: number | null, release: boolean): Promise<EndOrRenewJson> {
    // A release NOTIFYs the waiters of every replica (delivered at commit): they try again at once
    // instead of at their next poll. One statement still: the notification rides along.
    const [row] = await this.sql.query<{ outcome: EndOrRenewJson }>(
      `SELECT o.outcome FROM (SELECT writ_lease_end_or_renew($1, $2, $3, $4) AS outcome) o
         LEFT JOIN LATERAL (SELECT pg_notify('${LEASE_CHANNEL}', '') WHERE $4 AND (o.outcome->>'ok')::boolean) n ON true`, [
      leaseId,
      tokenHash,
      ttlMs,
      release,
    ]);
    return row!.outcome;
  }
}

/** Channel a release notifies on (payload empty: something was released; waiters try again). */
export const LEASE_CHANNEL = 'writ_lease';

type AcquireJson =
  | { granted: true; epochs: Record<string, number>; expiresAt: number; preempted: { lease_id: string; holder: string; key: string; epoch: number }[]; now: number }
  | { granted: false; key: string; holder: string | null; expiresAt: number | null; queued: boolean; now: number; tokenUsed?: true; heldKey?: string };

type EndOrRenewJson =
  | { ok: true; epochs: Record<string, number>; expiresAt: number; now: number }
  | { ok: false; reason: 'NOT_FOUND' | 'TOKEN_MISMATCH' | 'PREEMPTED' | 'EXPIRED'; now: number };
