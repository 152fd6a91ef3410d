import { entryHash } from '../../audit/hash-chain.js';
import type { StoredCheckpoint } from '../../audit/checkpoint.js';
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

const ENTRY_COLUMNS = 'seq, receipt_id, kind, body, prev_hash, hash';
const E_COLUMNS = ENTRY_COLUMNS.split(', ').map((c) => `e.${c}`).join(', ');

/**
 * The receipt log on PostgreSQL: one hash chain, as on SQLite (same seq numbering and hashing, so
 * ChainVerifier and `writ audit verify` read both alike). Every append first locks the chain's head row
 * (`SELECT … FOR UPDATE`), computes the entry's hash here with hash-chain.ts `entryHash`, then writes
 * the entry, the index row and the new head in one statement: two round trips per append.
 *
 * The head row is ONE GLOBAL LOCK held to the end of the appending transaction: appenders of every
 * replica queue on it, so the chain cannot fork and seqs commit in order with no gaps, but all receipt
 * writes in the system serialize there. That is accepted for now; the design's answer (DESIGN.md
 * "Receipts and audit") is per-key chains plus signed checkpoints over their heads.
 */
export class PostgresReceiptRepository implements ReceiptRepository {
  constructor(private readonly sql: Sql) {}

  async appendIntent(entry: NewEntry, index: ReceiptIndexRow): Promise<IntentAppend> {
    const stored = await this.next(entry);
    // The head is locked, so a concurrent intent with the same idempotency key has committed (and is
    // visible to ON CONFLICT) or has not started appending: the unique index decides, and on a
    // conflict nothing at all is written.
    const [row] = await this.sql.query<{ written: boolean; duplicate_id: boolean }>(
      `WITH dup AS (SELECT 1 FROM receipts WHERE receipt_id = $2),
            idx AS (INSERT INTO receipts (receipt_id, principal, resource_key, status, idempotency_key, request_hash, created_at, completed_at, first_seq, last_seq)
                    SELECT $2, $7, $8, $9, $10, $11, $12, $13, $1, $1 WHERE NOT EXISTS (SELECT 1 FROM dup)
                    ON CONFLICT (principal, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
                    RETURNING 1),
            ent AS (INSERT INTO receipt_entries (${ENTRY_COLUMNS}) SELECT $1, $2, $3, $4, $5, $6 WHERE EXISTS (SELECT 1 FROM idx)),
            head AS (UPDATE receipt_chain_head SET seq = $1, hash = $6 WHERE EXISTS (SELECT 1 FROM idx))
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
    const stored = await this.next(entry);
    const [row] = await this.sql.query<{ duplicate_id: boolean }>(
      `WITH dup AS (SELECT 1 FROM receipts WHERE receipt_id = $2),
            idx AS (INSERT INTO receipts (receipt_id, principal, resource_key, status, idempotency_key, request_hash, created_at, completed_at, first_seq, last_seq)
                    SELECT $2, $7, $8, $9, NULL, $10, $11, $12, $1, $1 WHERE NOT EXISTS (SELECT 1 FROM dup) RETURNING 1),
            ent AS (INSERT INTO receipt_entries (${ENTRY_COLUMNS}) SELECT $1, $2, $3, $4, $5, $6 WHERE EXISTS (SELECT 1 FROM idx)),
            head AS (UPDATE receipt_chain_head SET seq = $1, hash = $6 WHERE EXISTS (SELECT 1 FROM idx))
       SELECT EXISTS (SELECT 1 FROM dup) AS duplicate_id`,
      [...entryParams(stored), index.principal, index.resource_key, index.status, index.request_hash, index.created_at, index.completed_at],
    );
    if (row!.duplicate_id) throw alreadyExists(entry.receipt_id);
    return stored;
  }

  async appendSettlement(entry: NewEntry, status: 'COMPLETED' | 'FAILED', completedAt: number): Promise<SettlementAppend> {
    const stored = await this.next(entry);
    // Settlements of one receipt queue on the head lock too, so the PENDING check sees the latest status.
    const [row] = await this.sql.query<{ settled: boolean; status: string | null }>(
      `WITH r AS (UPDATE receipts SET status = $7, completed_at = $8, last_seq = $1 WHERE receipt_id = $2 AND status = 'PENDING' RETURNING 1),
            ent AS (INSERT INTO receipt_entries (${ENTRY_COLUMNS}) SELECT $1, $2, $3, $4, $5, $6 WHERE EXISTS (SELECT 1 FROM r)),
            head AS (UPDATE receipt_chain_head SET seq = $1, hash = $6 WHERE EXISTS (SELECT 1 FROM r))
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

  async entriesAfter(afterSeq: number, limit: number): Promise<StoredEntry[]> {
    return this.sql.query<StoredEntry>(`SELECT ${ENTRY_COLUMNS} FROM receipt_entries WHERE seq > $1 ORDER BY seq LIMIT $2`, [afterSeq, limit]);
  }

  async indexedHead(): Promise<number> {
    const [row] = await this.sql.query<{ head: number }>('SELECT coalesce(max(last_seq), 0) AS head FROM receipts');
    return row!.head;
  }

  async indexOf(receiptIds: readonly string[]): Promise<IndexedReceipt[]> {
    if (receiptIds.length === 0) return [];
    const rows = await this.sql.query<IndexedReceipt['row'] & { entries: StoredEntry[] | null }>(
      `SELECT r.receipt_id, r.principal, r.resource_key, r.status, r.idempotency_key, r.request_hash, r.created_at, r.completed_at, r.first_seq, r.last_seq,
              (SELECT json_agg(json_build_object('seq', e.seq, 'receipt_id', e.receipt_id, 'kind', e.kind, 'body', e.body, 'prev_hash', e.prev_hash, 'hash', e.hash) ORDER BY e.seq)
                 FROM receipt_entries e WHERE e.seq IN (r.first_seq, r.last_seq)) AS entries
         FROM receipts r WHERE r.receipt_id = ANY($1::text[])`,
      [[...receiptIds]],
    );
    return rows.map(({ entries, ...row }) => ({ row, entries: entries ?? [] }));
  }

  async indexCounts(upToSeq: number): Promise<{ receipts: number; settled: number }> {
    const [row] = await this.sql.query<{ receipts: number; settled: number }>(
      `SELECT count(*)::int8 AS receipts, count(*) FILTER (WHERE last_seq <> first_seq AND last_seq <= $1)::int8 AS settled
         FROM receipts WHERE first_seq <= $1`,
      [upToSeq],
    );
    return row!;
  }

  async latestCheckpoint(): Promise<StoredCheckpoint | null> {
    const [row] = await this.sql.query<StoredCheckpoint>(
      'SELECT seq, archived_through, hash, prev_hash, count, at, jws FROM receipt_checkpoints ORDER BY seq DESC LIMIT 1',
    );
    return row ?? null;
  }

  async firstUnarchivable(before: number): Promise<number | null> {
    const [row] = await this.sql.query<{ first: number | null }>(
      `SELECT min(first_seq) AS first FROM receipts
        WHERE status = 'PENDING' OR created_at >= $1 OR coalesce(completed_at, created_at) >= $1`,
      [before],
    );
    return row!.first;
  }

  async firstStraddling(seq: number): Promise<number | null> {
    const [row] = await this.sql.query<{ first: number | null }>('SELECT min(first_seq) AS first FROM receipts WHERE first_seq <= $1 AND last_seq > $1', [seq]);
    return row!.first;
  }

  async archiveThrough(c: StoredCheckpoint): Promise<{ entries: number; receipts: number } | null> {
    // The checkpoint first: the delete trigger reads it. A concurrent archive with the same seq waits
    // for the first to commit, then inserts nothing.
    const inserted = await this.sql.query(
      'INSERT INTO receipt_checkpoints (seq, archived_through, hash, prev_hash, count, at, jws) VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (seq) DO NOTHING RETURNING 1',
      [c.seq, c.archived_through, c.hash, c.prev_hash, c.count, c.at, c.jws],
    );
    if (inserted.length === 0) return null;
    const [row] = await this.sql.query<{ receipts: number }>(
      'WITH r AS (DELETE FROM receipts WHERE first_seq <= $1 RETURNING 1) SELECT count(*)::int8 AS receipts FROM r',
      [c.archived_through],
    );
    const [ent] = await this.sql.query<{ entries: number }>(
      'WITH e AS (DELETE FROM receipt_entries WHERE seq <= $1 RETURNING 1) SELECT count(*)::int8 AS entries FROM e',
      [c.archived_through],
    );
    return { entries: ent!.entries, receipts: row!.receipts };
  }

  /** Locks the chain's head (until the transaction ends) and builds the entry that extends it. */
  private async next(entry: NewEntry): Promise<StoredEntry> {
    const [head] = await this.sql.query<{ seq: number; hash: string }>('SELECT seq, hash FROM receipt_chain_head FOR UPDATE');
    const seq = head!.seq + 1;
    return { seq, ...entry, prev_hash: head!.hash, hash: entryHash(head!.hash, entry.body, seq, entry.kind, entry.receipt_id) };
  }
}

function entryParams(e: StoredEntry): unknown[] {
  return [e.seq, e.receipt_id, e.kind, e.body, e.prev_hash, e.hash];
}

function alreadyExists(receiptId: string): WritError {
  return new WritError('ALREADY_EXISTS', `a receipt with id '${receiptId}' already exists`);
}
