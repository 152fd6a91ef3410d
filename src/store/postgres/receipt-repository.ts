import { GENESIS_HASH, linkEntry, type ChainHead, type ChainId } from '../../audit/hash-chain.js';
import type { CheckpointLeaf, StoredCheckpoint, StoredLegacyCheckpoint } from '../../audit/checkpoint.js';
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
} from '../../audit/repository.js';
import { WritError } from '../../errors.js';
import type { Sql } from './session.js';

const ENTRY_COLUMNS = 'seq, receipt_id, kind, body, prev_hash, hash, chain, pos';
const E_COLUMNS = ENTRY_COLUMNS.split(', ').map((c) => `e.${c}`).join(', ');
/** Locks a chain's head row (creating it at the genesis the first time) until the transaction ends, and draws the next seq. */
const LOCK_HEAD = `INSERT INTO receipt_chains (chain, pos, hash) SELECT c.chain, 0, '${GENESIS_HASH}' FROM c
  ON CONFLICT (chain) DO UPDATE SET pos = receipt_chains.pos RETURNING chain, pos, hash`;

/**
 * The receipt log on PostgreSQL: one hash chain per coordination key, as on SQLite (same hashing, so
 * `writ audit verify` reads both alike). Every append first locks ITS chain's head row (an upsert that
 * takes the row lock and draws the next store-wide seq from a sequence, one round trip), computes the
 * entry's hash here with hash-chain.ts `linkEntry`, then writes the entry, the index row and the new
 * head in one statement: two round trips per append, as before.
 *
 * The head lock is held to the end of the appending transaction, so a chain cannot fork and its
 * positions commit in order with no gap; appends on other keys lock other rows and never wait for it.
 * Seqs (the store-wide order pages follow) may commit out of order and have gaps (a rolled-back append).
 */
export class PostgresReceiptRepository implements ReceiptRepository {
  constructor(private readonly sql: Sql) {}

  async appendIntent(entry: NewEntry, index: ReceiptIndexRow): Promise<IntentAppend> {
    const stored = await this.next(entry, entry.chain);
    // Two intents with one idempotency key: on the same key they queue on its head; on two keys the
    // unique index makes the second wait for the first to commit, then insert nothing (ON CONFLICT),
    // and on a conflict nothing at all is written.
    const [row] = await this.sql.query<{ written: boolean; duplicate_id: boolean }>(
      `WITH dup AS (SELECT 1 FROM receipts WHERE receipt_id = $2),
            idx AS (INSERT INTO receipts (receipt_id, principal, resource_key, status, idempotency_key, request_hash, created_at, completed_at, first_seq, last_seq)
                    SELECT $2, $9, $10, $11, $12, $13, $14, $15, $1, $1 WHERE NOT EXISTS (SELECT 1 FROM dup)
                    ON CONFLICT (principal, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
                    RETURNING 1),
            ent AS (INSERT INTO receipt_entries (${ENTRY_COLUMNS}) SELECT $1, $2, $3, $4, $5, $6, $7, $8 WHERE EXISTS (SELECT 1 FROM idx)),
            head AS (UPDATE receipt_chains SET pos = $8, hash = $6 WHERE chain = $7 AND EXISTS (SELECT 1 FROM idx))
       SELECT EXISTS (SELECT 1 FROM idx) AS written, EXISTS (SELECT 1 FROM dup) AS duplicate_id`,
      [...entryParams(stored), index.principal, index.resource_key, index.status, index.idempotency_key, index.request_hash, index.created_at, index.completed_at],
    );
    if (row!.duplicate_id) throw alreadyExists(entry.receipt_id);
    if (row!.written) return { appended: true, entry: stored };
    const existing = await this.findByIdempotencyKey(index.principal, index.idempotency_key!);
    if (!existing) throw new Error(`receipt idempotency conflict for ${index.principal} without a receipt`);
    return { appended: false, existing };
  }

  async appendRejection(entry: NewEntry, index: ReceiptIndexRow): Promise<StoredEntry> {
    const stored = await this.next(entry, entry.chain);
    const [row] = await this.sql.query<{ duplicate_id: boolean }>(
      `WITH dup AS (SELECT 1 FROM receipts WHERE receipt_id = $2),
            idx AS (INSERT INTO receipts (receipt_id, principal, resource_key, status, idempotency_key, request_hash, created_at, completed_at, first_seq, last_seq)
                    SELECT $2, $9, $10, $11, NULL, $12, $13, $14, $1, $1 WHERE NOT EXISTS (SELECT 1 FROM dup) RETURNING 1),
            ent AS (INSERT INTO receipt_entries (${ENTRY_COLUMNS}) SELECT $1, $2, $3, $4, $5, $6, $7, $8 WHERE EXISTS (SELECT 1 FROM idx)),
            head AS (UPDATE receipt_chains SET pos = $8, hash = $6 WHERE chain = $7 AND EXISTS (SELECT 1 FROM idx))
       SELECT EXISTS (SELECT 1 FROM dup) AS duplicate_id`,
      [...entryParams(stored), index.principal, index.resource_key, index.status, index.request_hash, index.created_at, index.completed_at],
    );
    if (row!.duplicate_id) throw alreadyExists(entry.receipt_id);
    return stored;
  }

  async appendSettlement(entry: NewEntry, status: 'COMPLETED' | 'FAILED', completedAt: number): Promise<SettlementAppend> {
    // The chain of the receipt's first entry; its head lock also queues the settlements of one receipt,
    // so the PENDING check below sees the latest status.
    const [head] = await this.sql.query<{ chain: string; pos: number; hash: string; seq: number }>(
      `WITH c AS (SELECT e.chain FROM receipts r JOIN receipt_entries e ON e.seq = r.first_seq WHERE r.receipt_id = $1),
            h AS (${LOCK_HEAD})
       SELECT h.chain, h.pos, h.hash, nextval('receipt_entry_seq') AS seq FROM h`,
      [entry.receipt_id],
    );
    if (!head) return { appended: false, reason: 'unknown' };
    const stored = linkEntry(head, head.seq, { ...entry, chain: head.chain });
    const [row] = await this.sql.query<{ settled: boolean; status: string | null }>(
      `WITH r AS (UPDATE receipts SET status = $9, completed_at = $10, last_seq = $1 WHERE receipt_id = $2 AND status = 'PENDING' RETURNING 1),
            ent AS (INSERT INTO receipt_entries (${ENTRY_COLUMNS}) SELECT $1, $2, $3, $4, $5, $6, $7, $8 WHERE EXISTS (SELECT 1 FROM r)),
            head AS (UPDATE receipt_chains SET pos = $8, hash = $6 WHERE chain = $7 AND EXISTS (SELECT 1 FROM r))
       SELECT EXISTS (SELECT 1 FROM r) AS settled, (SELECT status FROM receipts WHERE receipt_id = $2) AS status`,
      [...entryParams(stored), status, completedAt],
    );
    if (row!.settled) return { appended: true, entry: stored };
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
    if (filter.after !== undefined) add('first_seq > ?', filter.after);
    if (filter.createdAtOrBefore !== undefined) add('created_at <= ?', filter.createdAtOrBefore);
    if (filter.createdAtOrAfter !== undefined) add('created_at >= ?', filter.createdAtOrAfter);
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

  async indexOf(receiptIds: readonly string[]): Promise<IndexedReceipt[]> {
    if (receiptIds.length === 0) return [];
    const rows = await this.sql.query<IndexedReceipt['row'] & { entries: StoredEntry[] | null }>(
      `SELECT r.receipt_id, r.principal, r.resource_key, r.status, r.idempotency_key, r.request_hash, r.created_at, r.completed_at, r.first_seq, r.last_seq,
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
    const [row] = await this.sql.query<StoredCheckpoint>('SELECT 2 AS v, seq, at, chains, root, archived, jws FROM receipt_head_checkpoints ORDER BY seq DESC LIMIT 1');
    return row ?? null;
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

  async recordCheckpoint(c: StoredCheckpoint, changed: readonly CheckpointLeaf[]): Promise<{ entries: number; receipts: number } | null> {
    // The checkpoint first: a concurrent one with the same seq waits for this to commit, then inserts nothing.
    const inserted = await this.sql.query(
      'INSERT INTO receipt_head_checkpoints (seq, at, chains, root, archived, jws) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (seq) DO NOTHING RETURNING 1',
      [c.seq, c.at, c.chains, c.root, c.archived, c.jws],
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
    // The leaves first: the delete trigger reads the floors. Then the index rows, then the entries.
    const [row] = await this.sql.query<{ receipts: number; entries: number }>(
      `WITH f AS (SELECT l.chain COLLATE "C" AS chain, l.floor_pos FROM json_to_recordset($1::json) AS l(chain text, floor_pos bigint) WHERE l.floor_pos > 0),
            r AS (DELETE FROM receipts WHERE receipt_id IN (SELECT e.receipt_id FROM receipt_entries e JOIN f ON e.chain = f.chain AND e.pos <= f.floor_pos WHERE e.kind IN ('intent', 'rejected'))
                  RETURNING 1)
       SELECT (SELECT count(*) FROM r)::int8 AS receipts, 0::int8 AS entries`,
      [leaves],
    );
    const [ent] = await this.sql.query<{ entries: number }>(
      `WITH f AS (SELECT l.chain COLLATE "C" AS chain, l.floor_pos FROM json_to_recordset($1::json) AS l(chain text, floor_pos bigint) WHERE l.floor_pos > 0),
            e AS (DELETE FROM receipt_entries e USING f WHERE e.chain = f.chain AND e.pos <= f.floor_pos RETURNING 1)
       SELECT count(*)::int8 AS entries FROM e`,
      [leaves],
    );
    return { entries: ent!.entries, receipts: row!.receipts };
  }

  /** Locks the chain's head (until the transaction ends) and builds the entry that extends it. */
  private async next(entry: NewEntry, chain: ChainId): Promise<StoredEntry> {
    const [head] = await this.sql.query<{ pos: number; hash: string; seq: number }>(
      `WITH c AS (SELECT $1::text COLLATE "C" AS chain), h AS (${LOCK_HEAD}) SELECT h.pos, h.hash, nextval('receipt_entry_seq') AS seq FROM h`,
      [chain],
    );
    return linkEntry(head!, head!.seq, { ...entry, chain });
  }
}

function entryParams(e: StoredEntry): unknown[] {
  return [e.seq, e.receipt_id, e.kind, e.body, e.prev_hash, e.hash, e.chain, e.pos];
}

function alreadyExists(receiptId: string): WritError {
  return new WritError('ALREADY_EXISTS', `a receipt with id '${receiptId}' already exists`);
}
