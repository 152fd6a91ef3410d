import { GENESIS_HASH, type ChainHead, type ChainId } from '../../audit/hash-chain.js';
import { storedCheckpointOf, type CheckpointLeaf, type StoredCheckpoint, type StoredCheckpointRow, type StoredLegacyCheckpoint } from '../../audit/checkpoint.js';
import type { StoredEntry } from '../../audit/receipt.js';
import type {
  FoundReceipt,
  IndexedReceipt,
  IntentAppend,
  NewEntry,
  ReceiptFilter,
  ReceiptIndexRow,
  ReceiptRepository,
  SettlementAppend,
  SettlingEntry,
} from '../../audit/repository.js';
import { WritError } from '../../errors.js';
import type { Sql } from './session.js';

const ENTRY_COLUMNS = 'seq, receipt_id, kind, body, prev_hash, hash, chain, pos';
const E_COLUMNS = ENTRY_COLUMNS.split(', ').map((c) => `e.${c}`).join(', ');

/**
 * `head`: the upsert that takes the chain's head row lock (until the transaction ends), moves it one
 * place on and hashes the new entry (migration 005 `writ_receipt_hash`), creating the row at the
 * genesis the first time; `ent`: the entry itself. Both read the CTE `n` (chain, seq: the entry to add,
 * no row when nothing is to be appended) and the parameters $1 receipt_id, $2 kind, $3 body.
 */
const APPEND = `
  head AS (INSERT INTO receipt_chains AS rc (chain, pos, hash, prev_hash)
             SELECT n.chain, 1, writ_receipt_hash('${GENESIS_HASH}', $3, n.chain, 1, n.seq, $2, $1), '${GENESIS_HASH}' FROM n
           ON CONFLICT (chain) DO UPDATE
             SET pos = rc.pos + 1, prev_hash = rc.hash, hash = writ_receipt_hash(rc.hash, $3, rc.chain, rc.pos + 1, (SELECT seq FROM n), $2, $1)
           RETURNING rc.chain, rc.pos, rc.hash, rc.prev_hash),
  ent AS (INSERT INTO receipt_entries (${ENTRY_COLUMNS})
            SELECT n.seq, $1, $2, $3, head.prev_hash, head.hash, head.chain, head.pos FROM n, head
          RETURNING ${ENTRY_COLUMNS})`;

/**
 * The receipt log on PostgreSQL: one hash chain per coordination key, as on SQLite (same hashing, so
 * `writ audit verify` reads both alike). An append is ONE statement: it locks its chain's head row,
 * advances it, writes the entry the database hashed (`writ_receipt_hash`, byte for byte hash-chain.ts
 * `hashOf`) and the index row, and returns the entry; a settlement also returns the receipt's first
 * entry, so the caller has the whole receipt without reading it back.
 *
 * The head lock is held to the end of the appending transaction, so a chain cannot fork and its
 * positions commit in order with no gap; appends on other keys lock other rows and never wait for it.
 * Seqs (the store-wide order pages follow) are drawn before the head lock: they may commit out of
 * order, also within a chain, and have gaps (a rolled-back append).
 */
export class PostgresReceiptRepository implements ReceiptRepository {
  constructor(private readonly sql: Sql) {}

  async appendIntent(entry: NewEntry, index: ReceiptIndexRow): Promise<IntentAppend> {
    // Two intents with one idempotency key: the unique index makes the second wait for the first to
    // commit, then insert nothing (ON CONFLICT), and then nothing at all is written (no index row: no
    // head move, no entry).
    const [row] = await this.sql.query<EntryRow & { duplicate_id: boolean }>(
      `WITH s AS (SELECT nextval('receipt_entry_seq') AS seq),
            dup AS (SELECT 1 FROM receipts WHERE receipt_id = $1),
            idx AS (INSERT INTO receipts (receipt_id, principal, resource_key, status, idempotency_key, request_hash, decision_id, created_at, completed_at, first_seq, last_seq)
                    SELECT $1, $5, $6, $7, $8, $9, $12, $10, $11, s.seq, s.seq FROM s WHERE NOT EXISTS (SELECT 1 FROM dup)
                    ON CONFLICT (principal, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
                    RETURNING first_seq AS seq),
            n AS (SELECT $4::text COLLATE "C" AS chain, idx.seq FROM idx),
            ${APPEND}
       SELECT EXISTS (SELECT 1 FROM dup) AS duplicate_id, ${E_COLUMNS} FROM (SELECT 1) one LEFT JOIN ent e ON true`,
      [entry.receipt_id, entry.kind, entry.body, entry.chain, index.principal, index.resource_key, index.status, index.idempotency_key, index.request_hash, index.created_at, index.completed_at, index.decision_id ?? null],
    );
    if (row!.duplicate_id) throw alreadyExists(entry.receipt_id);
    if (row!.seq !== null) return { appended: true, entry: entryOf(row!) };
    const existing = await this.findByIdempotencyKey(index.principal, index.idempotency_key!);
    if (!existing) throw new Error(`receipt idempotency conflict for ${index.principal} without a receipt`);
    return { appended: false, existing };
  }

  async appendRejection(entry: NewEntry, index: ReceiptIndexRow): Promise<StoredEntry> {
    // The intent's statement: a rejection occupies no idempotency key, so nothing can stop its append.
    const r = await this.appendIntent(entry, { ...index, idempotency_key: null });
    if (!r.appended) throw new Error(`rejection ${entry.receipt_id} was not appended`);
    return r.entry;
  }

  async appendSettlement(entry: SettlingEntry, status: 'COMPLETED' | 'FAILED', completedAt: number): Promise<SettlementAppend> {
    // ReadWriteOptions.oneStatement: this is the settling transaction's one statement (ReceiptLog.settle).
    // Only while PENDING: the receipt's row lock queues the settlements of one receipt, and the one
    // that waited re-checks the status on the row as the first one committed it (first settlement
    // wins). The entry goes to the chain of the receipt's first entry.
    const [row] = await this.sql.query<EntryRow & { status: string | null; has_first: boolean; first: StoredEntry | null }>(
      `WITH r AS (UPDATE receipts SET status = $4, completed_at = $5, last_seq = nextval('receipt_entry_seq')
                   WHERE receipt_id = $1 AND status = 'PENDING' AND EXISTS (SELECT 1 FROM receipt_entries e WHERE e.seq = receipts.first_seq)
                   RETURNING first_seq, last_seq AS seq),
            f AS (SELECT ${E_COLUMNS} FROM receipt_entries e JOIN r ON e.seq = r.first_seq),
            n AS (SELECT f.chain, r.seq FROM r, f),
            ${APPEND}
       SELECT (SELECT status FROM receipts WHERE receipt_id = $1) AS status,
              EXISTS (SELECT 1 FROM receipts x JOIN receipt_entries e ON e.seq = x.first_seq WHERE x.receipt_id = $1) AS has_first,
              (SELECT row_to_json(f) FROM f) AS first, ${E_COLUMNS}
         FROM (SELECT 1) one LEFT JOIN ent e ON true`,
      [entry.receipt_id, entry.kind, entry.body, status, completedAt],
    );
    if (row!.seq !== null) return { appended: true, entry: entryOf(row!), first: row!.first! };
    // Nothing written: unknown, or settled already (also when this statement waited for the settlement
    // that won: its status, read on the statement's snapshot, may still say PENDING), or a PENDING
    // receipt without its first entry, which is a broken log.
    if (row!.status === 'PENDING' && !row!.has_first) throw new WritError('INTERNAL', `receipt ${entry.receipt_id} has no first entry (run writ audit verify)`);
    return { appended: false, reason: row!.status === null ? 'unknown' : 'settled' };
  }

  async findByIdempotencyKey(principal: string, idempotencyKey: string): Promise<{ receipt_id: string; request_hash: string | null } | null> {
    const [row] = await this.sql.query<{ receipt_id: string; request_hash: string | null }>(
      'SELECT receipt_id, request_hash FROM receipts WHERE principal = $1 AND idempotency_key = $2',
      [principal, idempotencyKey],
    );
    return row ?? null;
  }

  async entriesOf(receiptId: string): Promise<StoredEntry[]> {
    return this.sql.query<StoredEntry>(
      `SELECT ${E_COLUMNS} FROM receipts r JOIN receipt_entries e ON e.seq IN (r.first_seq, r.last_seq)
        WHERE r.receipt_id = $1 ORDER BY e.seq`,
      [receiptId],
    );
  }

  async find(filter: ReceiptFilter): Promise<FoundReceipt[]> {
    const where: string[] = [];
    const params: unknown[] = [];
    const add = (clause: string, value: unknown) => {
      params.push(value);
      where.push(clause.replace('?', `$${params.length}`));
    };
    if (filter.resource !== undefined) add('resource_key = ?', filter.resource);
    if (filter.principal !== undefined) add('principal = ?', filter.principal);
    if (filter.status !== undefined) add('status = ?', filter.status);
    if (filter.decisionId !== undefined) add('decision_id = ?', filter.decisionId);
    if (filter.after !== undefined) add('first_seq > ?', filter.after);
    if (filter.createdAtOrBefore !== undefined) add('created_at <= ?', filter.createdAtOrBefore);
    if (filter.createdAtOrAfter !== undefined) add('created_at >= ?', filter.createdAtOrAfter);
    if (filter.createdAtLeastMsAgo !== undefined) add('created_at <= (extract(epoch from clock_timestamp()) * 1000)::bigint - ?', filter.createdAtLeastMsAgo);
    if (filter.before !== undefined) add('first_seq < ?', filter.before);
    const order = filter.newestFirst ? 'DESC' : 'ASC';
    params.push(filter.limit);
    const rows = await this.sql.query<StoredEntry & { first_seq: number }>(
      `SELECT r.first_seq, ${E_COLUMNS}
         FROM (SELECT receipt_id, first_seq, last_seq FROM receipts ${where.length ? `WHERE ${where.join(' AND ')}` : ''}
               ORDER BY first_seq ${order} LIMIT $${params.length}) r
         JOIN receipt_entries e ON e.seq IN (r.first_seq, r.last_seq)
        ORDER BY r.first_seq ${order}, e.seq`,
      params,
    );
    const found: FoundReceipt[] = [];
    for (const { first_seq, ...entry } of rows) {
      const last = found[found.length - 1];
      if (last && last.first_seq === first_seq) last.entries.push(entry);
      else found.push({ first_seq, entries: [entry] });
    }
    return found;
  }

  async entriesFrom(after: { chain: ChainId; pos: number } | null, limit: number): Promise<StoredEntry[]> {
    return after
      ? this.sql.query<StoredEntry>(`SELECT ${ENTRY_COLUMNS} FROM receipt_entries WHERE (chain, pos) > ($1, $2) ORDER BY chain, pos LIMIT $3`, [after.chain, after.pos, limit])
      : this.sql.query<StoredEntry>(`SELECT ${ENTRY_COLUMNS} FROM receipt_entries ORDER BY chain, pos LIMIT $1`, [limit]);
  }

  async entriesAt(places: readonly { chain: ChainId; pos: number }[]): Promise<StoredEntry[]> {
    if (places.length === 0) return [];
    return this.sql.query<StoredEntry>(
      `SELECT ${E_COLUMNS} FROM json_to_recordset($1::json) AS p(chain text, pos bigint)
         JOIN receipt_entries e ON e.chain = p.chain COLLATE "C" AND e.pos = p.pos`,
      [JSON.stringify(places)],
    );
  }

  async heads(): Promise<ChainHead[]> {
    // A head row at 0 is a chain whose only append did not happen (an idempotent replay): no chain yet.
    return this.sql.query<ChainHead>('SELECT chain, pos, hash FROM receipt_chains WHERE pos > 0');
  }

  async headsMark(): Promise<string> {
    const [row] = await this.sql.query<{ mark: string }>('SELECT pg_current_snapshot()::text AS mark');
    return row!.mark;
  }

  async headsMovedSince(mark: string): Promise<ChainHead[]> {
    // The chains of the entries appended by a transaction the mark's snapshot did not see (the index from
    // its xmin on), then their heads by key: two statements, so no plan reads every head to join them.
    const moved = await this.sql.query<{ chain: string }>(
      'SELECT DISTINCT chain FROM receipt_entries WHERE xact >= pg_snapshot_xmin($1::pg_snapshot) AND NOT pg_visible_in_snapshot(xact, $1::pg_snapshot)',
      [mark],
    );
    if (moved.length === 0) return [];
    return this.sql.query<ChainHead>('SELECT chain, pos, hash FROM receipt_chains WHERE chain = ANY($1::text[]) AND pos > 0', [moved.map((m) => m.chain)]);
  }

  async claimCheckpointTurn(holder: string, turnMs: number): Promise<boolean> {
    const rows = await this.sql.query(
      `WITH now AS (SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS ms)
       INSERT INTO receipt_checkpoint_turn AS t (id, holder, until) SELECT 1, $1, now.ms + $2 FROM now
       ON CONFLICT (id) DO UPDATE SET holder = excluded.holder, until = excluded.until
         WHERE t.holder = excluded.holder OR t.until < (SELECT ms FROM now)
       RETURNING 1`,
      [holder, turnMs],
    );
    return rows.length > 0;
  }

  async headsSum(): Promise<number> {
    const [row] = await this.sql.query<{ sum: number }>('SELECT coalesce(sum(pos), 0)::bigint AS sum FROM receipt_chains');
    return row!.sum;
  }

  async indexOf(receiptIds: readonly string[]): Promise<IndexedReceipt[]> {
    if (receiptIds.length === 0) return [];
    const rows = await this.sql.query<IndexedReceipt['row'] & { entries: StoredEntry[] | null }>(
      `SELECT r.receipt_id, r.principal, r.resource_key, r.status, r.idempotency_key, r.request_hash, r.decision_id, r.created_at, r.completed_at, r.first_seq, r.last_seq,
              (SELECT json_agg(json_build_object('seq', e.seq, 'chain', e.chain, 'pos', e.pos, 'receipt_id', e.receipt_id, 'kind', e.kind, 'body', e.body, 'prev_hash', e.prev_hash, 'hash', e.hash) ORDER BY e.seq)
                 FROM receipt_entries e WHERE e.seq IN (r.first_seq, r.last_seq)) AS entries
         FROM receipts r WHERE r.receipt_id = ANY($1::text[])`,
      [[...receiptIds]],
    );
    return rows.map(({ entries, ...row }) => ({ row, entries: entries ?? [] }));
  }

  async indexOrphans(limit: number): Promise<{ receipt_id: string; first_seq: number; last_seq: number }[]> {
    return this.sql.query(
      `SELECT r.receipt_id, r.first_seq, r.last_seq FROM receipts r
        WHERE NOT EXISTS (SELECT 1 FROM receipt_entries e WHERE e.seq = r.first_seq AND e.receipt_id = r.receipt_id AND e.kind IN ('intent', 'rejected'))
           OR (r.last_seq <> r.first_seq AND NOT EXISTS (SELECT 1 FROM receipt_entries e WHERE e.seq = r.last_seq AND e.receipt_id = r.receipt_id AND e.kind IN ('completed', 'failed', 'reconciled')))
        LIMIT $1`,
      [limit],
    );
  }

  async latestCheckpoint(): Promise<StoredCheckpoint | null> {
    const [row] = await this.sql.query<StoredCheckpointRow>('SELECT CASE WHEN graph_hash IS NULL THEN 2 ELSE 3 END AS v, seq, at, chains, root, archived, jws, graph_revision, graph_hash FROM receipt_head_checkpoints ORDER BY seq DESC LIMIT 1');
    return row ? storedCheckpointOf(row) : null;
  }

  async checkpointLeaves(seq: number): Promise<CheckpointLeaf[]> {
    // One index probe per chain (a loose index scan over the primary key), not a pass over every leaf
    // ever stored: leaves accumulate with every checkpoint.
    return this.sql.query<CheckpointLeaf>(
      `WITH RECURSIVE c(chain) AS (
         (SELECT chain FROM receipt_checkpoint_leaves ORDER BY chain LIMIT 1)
         UNION ALL
         SELECT (SELECT l.chain FROM receipt_checkpoint_leaves l WHERE l.chain > c.chain ORDER BY l.chain LIMIT 1) FROM c WHERE c.chain IS NOT NULL)
       SELECT x.chain, x.pos, x.hash, x.floor_pos, x.floor_hash FROM c
        CROSS JOIN LATERAL (SELECT chain, pos, hash, floor_pos, floor_hash FROM receipt_checkpoint_leaves
                             WHERE chain = c.chain AND checkpoint <= $1 ORDER BY checkpoint DESC LIMIT 1) x`,
      [seq],
    );
  }

  async legacyCheckpoint(): Promise<StoredLegacyCheckpoint | null> {
    const [row] = await this.sql.query<StoredLegacyCheckpoint>('SELECT seq, archived_through, hash, prev_hash, count, at, jws FROM receipt_checkpoints ORDER BY seq DESC LIMIT 1');
    return row ?? null;
  }

  async recordCheckpoint(c: StoredCheckpoint, changed: readonly CheckpointLeaf[], raised: ReadonlySet<string>, turn?: string): Promise<{ entries: number; receipts: number } | null> {
    // The checkpoint first: a concurrent one with the same seq waits for this to commit, then inserts nothing.
    // In a turn, only while the turn row names this holder and has not run out, by the database's clock; the
    // row is locked (FOR SHARE) until the commit, so a takeover (claimCheckpointTurn's update) comes after it.
    const values = [c.seq, c.at, c.chains, c.root, c.archived, c.jws, c.graph_revision ?? null, c.graph_hash ?? null];
    const inserted = turn === undefined
      ? await this.sql.query(
        'INSERT INTO receipt_head_checkpoints (seq, at, chains, root, archived, jws, graph_revision, graph_hash) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (seq) DO NOTHING RETURNING 1',
        values,
      )
      : await this.sql.query(
        `WITH turn AS (SELECT 1 FROM receipt_checkpoint_turn
                        WHERE id = 1 AND holder = $9 AND until >= (extract(epoch FROM clock_timestamp()) * 1000)::bigint FOR SHARE)
         INSERT INTO receipt_head_checkpoints (seq, at, chains, root, archived, jws, graph_revision, graph_hash)
         SELECT $1::bigint, $2::bigint, $3::bigint, $4::text, $5::bigint, $6::text, $7::bigint, $8::text FROM turn
         ON CONFLICT (seq) DO NOTHING RETURNING 1`,
        [...values, turn],
      );
    if (inserted.length === 0) return null;
    if (changed.length === 0) return { entries: 0, receipts: 0 };
    const leaves = JSON.stringify(changed);
    await this.sql.query(
      `INSERT INTO receipt_checkpoint_leaves (chain, checkpoint, pos, hash, floor_pos, floor_hash)
       SELECT l.chain, $1, l.pos, l.hash, l.floor_pos, l.floor_hash
         FROM json_to_recordset($2::json) AS l(chain text, pos bigint, hash text, floor_pos bigint, floor_hash text)`,
      [c.seq, leaves],
    );
    // A periodic checkpoint raises no floor: nothing to delete, two round trips fewer.
    const floors = changed.filter((l) => l.floor_pos > 0 && raised.has(l.chain));
    if (floors.length === 0) return { entries: 0, receipts: 0 };
    const risen = JSON.stringify(floors);
    // The leaves first: the delete trigger reads the floors. Then the index rows, then the entries.
    const [row] = await this.sql.query<{ receipts: number; entries: number }>(
      `WITH f AS (SELECT l.chain COLLATE "C" AS chain, l.floor_pos FROM json_to_recordset($1::json) AS l(chain text, floor_pos bigint) WHERE l.floor_pos > 0),
            r AS (DELETE FROM receipts WHERE receipt_id IN (SELECT e.receipt_id FROM receipt_entries e JOIN f ON e.chain = f.chain AND e.pos <= f.floor_pos WHERE e.kind IN ('intent', 'rejected'))
                  RETURNING 1)
       SELECT (SELECT count(*) FROM r)::int8 AS receipts, 0::int8 AS entries`,
      [risen],
    );
    const [ent] = await this.sql.query<{ entries: number }>(
      `WITH f AS (SELECT l.chain COLLATE "C" AS chain, l.floor_pos FROM json_to_recordset($1::json) AS l(chain text, floor_pos bigint) WHERE l.floor_pos > 0),
            e AS (DELETE FROM receipt_entries e USING f WHERE e.chain = f.chain AND e.pos <= f.floor_pos RETURNING 1)
       SELECT count(*)::int8 AS entries FROM e`,
      [risen],
    );
    return { entries: ent!.entries, receipts: row!.receipts };
  }
}

/** The entry columns of a statement's answer row: all null when nothing was appended. */
type EntryRow = { [K in keyof StoredEntry]: StoredEntry[K] | null };

function entryOf(row: EntryRow): StoredEntry {
  return { seq: row.seq!, receipt_id: row.receipt_id!, kind: row.kind!, body: row.body!, prev_hash: row.prev_hash!, hash: row.hash!, chain: row.chain!, pos: row.pos! };
}

function alreadyExists(receiptId: string): WritError {
  return new WritError('ALREADY_EXISTS', `a receipt with id '${receiptId}' already exists`);
}
