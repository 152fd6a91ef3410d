import { entryHash, GENESIS_HASH } from '../../audit/hash-chain.js';
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
import type { Statement } from 'better-sqlite3';
import type { SqliteDatabase } from './database.js';

const ENTRY_COLUMNS = 'seq, receipt_id, kind, body, prev_hash, hash';
/** The same columns from `receipt_entries e` joined to the receipts index. */
const E_COLUMNS = ENTRY_COLUMNS.split(', ').map((c) => `e.${c}`).join(', ');

export class SqliteReceiptRepository implements ReceiptRepository {
  private readonly headStmt;
  private readonly insertEntryStmt;
  private readonly insertIndexStmt;
  private readonly byIdempotencyStmt;
  private readonly statusStmt;
  private readonly settleStmt;
  private readonly entriesOfStmt;
  private readonly afterStmt;
  private readonly indexedHeadStmt;
  private readonly indexRowStmt;
  private readonly namedEntriesStmt;
  private readonly indexCountsStmt;
  private readonly appendIntentTx;
  private readonly appendRejectionTx;
  private readonly appendSettlementTx;
  private retentionStmts: Record<'latest' | 'unarchivable' | 'straddling' | 'insertCheckpoint' | 'deleteIndex' | 'deleteEntries', Statement> | undefined;
  /** One prepared statement per combination of filters (at most 32). */
  private readonly findStmts = new Map<string, Statement>();

  constructor(private readonly db: SqliteDatabase) {
    this.headStmt = db.prepare('SELECT seq, hash FROM receipt_entries ORDER BY seq DESC LIMIT 1');
    this.insertEntryStmt = db.prepare(`INSERT INTO receipt_entries (${ENTRY_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)`);
    this.insertIndexStmt = db.prepare(`
      INSERT INTO receipts (receipt_id, principal, resource_key, status, idempotency_key, request_hash, created_at, completed_at, first_seq, last_seq)
      VALUES (@receipt_id, @principal, @resource_key, @status, @idempotency_key, @request_hash, @created_at, @completed_at, @seq, @seq)`);
    this.byIdempotencyStmt = db.prepare('SELECT receipt_id, request_hash FROM receipts WHERE principal = ? AND idempotency_key = ?');
    this.statusStmt = db.prepare('SELECT status FROM receipts WHERE receipt_id = ?').pluck();
    this.settleStmt = db.prepare('UPDATE receipts SET status = ?, completed_at = ?, last_seq = ? WHERE receipt_id = ?');
    // A receipt has at most two entries, its first and its settlement, and its row names both.
    this.entriesOfStmt = db.prepare(`
      SELECT ${E_COLUMNS}
        FROM receipts r JOIN receipt_entries e ON e.seq IN (r.first_seq, r.last_seq)
       WHERE r.receipt_id = ? ORDER BY e.seq`);
    this.afterStmt = db.prepare(`SELECT ${ENTRY_COLUMNS} FROM receipt_entries WHERE seq > ? ORDER BY seq LIMIT ?`);
    this.indexedHeadStmt = db.prepare('SELECT COALESCE(MAX(last_seq), 0) FROM receipts').pluck();
    this.indexRowStmt = db.prepare(`SELECT receipt_id, principal, resource_key, status, idempotency_key, request_hash, created_at, completed_at, first_seq, last_seq
      FROM receipts WHERE receipt_id = ?`);
    this.namedEntriesStmt = db.prepare(`SELECT ${ENTRY_COLUMNS} FROM receipt_entries WHERE seq IN (?, ?) ORDER BY seq`);
    this.indexCountsStmt = db.prepare(`SELECT COUNT(*) AS receipts, COALESCE(SUM(last_seq <> first_seq AND last_seq <= ?), 0) AS settled
      FROM receipts WHERE first_seq <= ?`);
    this.appendIntentTx = db.transaction((entry: NewEntry, index: ReceiptIndexRow): IntentAppend => {
      if (index.idempotency_key !== null) {
        const existing = this.byIdempotencyStmt.get(index.principal, index.idempotency_key) as
          | { receipt_id: string; request_hash: string | null }
          | undefined;
        if (existing) return { appended: false, existing };
      }
      const stored = this.appendEntry(entry);
      this.insertIndexStmt.run({ ...index, seq: stored.seq });
      return { appended: true, entry: stored };
    });
    this.appendRejectionTx = db.transaction((entry: NewEntry, index: ReceiptIndexRow): StoredEntry => {
      const stored = this.appendEntry(entry);
      this.insertIndexStmt.run({ ...index, idempotency_key: null, seq: stored.seq });
      return stored;
    });
    this.appendSettlementTx = db.transaction((entry: NewEntry, status: string, completedAt: number): SettlementAppend => {
      const current = this.statusStmt.get(entry.receipt_id) as string | undefined;
      if (current === undefined) return { appended: false, reason: 'unknown' };
      if (current !== 'PENDING') return { appended: false, reason: 'settled' };
      const stored = this.appendEntry(entry);
      this.settleStmt.run(status, completedAt, stored.seq, entry.receipt_id);
      return { appended: true, entry: stored };
    });
  }

  async findByIdempotencyKey(principal: string, idempotencyKey: string): Promise<{ receipt_id: string; request_hash: string | null } | null> {
    return (this.byIdempotencyStmt.get(principal, idempotencyKey) as { receipt_id: string; request_hash: string | null } | undefined) ?? null;
  }

  async appendIntent(entry: NewEntry, index: ReceiptIndexRow): Promise<IntentAppend> {
    return this.immediately(() => this.appendIntentTx.immediate(entry, index), entry.receipt_id);
  }

  async appendRejection(entry: NewEntry, index: ReceiptIndexRow): Promise<StoredEntry> {
    return this.immediately(() => this.appendRejectionTx.immediate(entry, index), entry.receipt_id);
  }

  async appendSettlement(entry: NewEntry, status: 'COMPLETED' | 'FAILED', completedAt: number): Promise<SettlementAppend> {
    return this.appendSettlementTx.immediate(entry, status, completedAt);
  }

  async entriesOf(receiptId: string): Promise<StoredEntry[]> {
    return this.entriesOfStmt.all(receiptId) as StoredEntry[];
  }

  async find(filter: ReceiptFilter): Promise<FoundReceipt[]> {
    const where: string[] = [];
    const params: unknown[] = [];
    if (filter.resource !== undefined) (where.push('resource_key = ?'), params.push(filter.resource));
    if (filter.principal !== undefined) (where.push('principal = ?'), params.push(filter.principal));
    if (filter.status !== undefined) (where.push('status = ?'), params.push(filter.status));
    if (filter.after !== undefined) (where.push('first_seq > ?'), params.push(filter.after));
    if (filter.createdAtOrBefore !== undefined) (where.push('created_at <= ?'), params.push(filter.createdAtOrBefore));
    if (filter.createdAtOrAfter !== undefined) (where.push('created_at >= ?'), params.push(filter.createdAtOrAfter));
    if (filter.before !== undefined) (where.push('first_seq < ?'), params.push(filter.before));
    const order = filter.newestFirst ? 'DESC' : 'ASC';
    const sql = `SELECT r.first_seq, ${E_COLUMNS}
         FROM (SELECT receipt_id, first_seq, last_seq FROM receipts ${where.length ? `WHERE ${where.join(' AND ')}` : ''}
               ORDER BY first_seq ${order} LIMIT ?) r
         JOIN receipt_entries e ON e.seq IN (r.first_seq, r.last_seq)
         ORDER BY r.first_seq ${order}, e.seq`;
    let stmt = this.findStmts.get(sql);
    if (!stmt) this.findStmts.set(sql, (stmt = this.db.prepare(sql)));
    const rows = stmt.all(...params, filter.limit) as (StoredEntry & { first_seq: number })[];
    const found: FoundReceipt[] = [];
    for (const { first_seq, ...entry } of rows) {
      const last = found[found.length - 1];
      if (last && last.first_seq === first_seq) last.entries.push(entry);
      else found.push({ first_seq, entries: [entry] });
    }
    return found;
  }

  async entriesAfter(afterSeq: number, limit: number): Promise<StoredEntry[]> {
    return this.afterStmt.all(afterSeq, limit) as StoredEntry[];
  }

  async indexedHead(): Promise<number> {
    return this.indexedHeadStmt.get() as number;
  }

  async indexOf(receiptIds: readonly string[]): Promise<IndexedReceipt[]> {
    const out: IndexedReceipt[] = [];
    for (const id of receiptIds) {
      const row = this.indexRowStmt.get(id) as IndexedReceipt['row'] | undefined;
      if (row) out.push({ row, entries: this.namedEntriesStmt.all(row.first_seq, row.last_seq) as StoredEntry[] });
    }
    return out;
  }

  async indexCounts(upToSeq: number): Promise<{ receipts: number; settled: number }> {
    return this.indexCountsStmt.get(upToSeq, upToSeq) as { receipts: number; settled: number };
  }

  async latestCheckpoint(): Promise<StoredCheckpoint | null> {
    return (this.retention().latest.get() as StoredCheckpoint | undefined) ?? null;
  }

  async firstUnarchivable(before: number): Promise<number | null> {
    return this.retention().unarchivable.get({ before }) as number | null;
  }

  async firstStraddling(seq: number): Promise<number | null> {
    return this.retention().straddling.get(seq, seq) as number | null;
  }

  async archiveThrough(checkpoint: StoredCheckpoint): Promise<{ entries: number; receipts: number } | null> {
    const r = this.retention();
    if (r.insertCheckpoint.run(checkpoint).changes === 0) return null;
    const receipts = r.deleteIndex.run(checkpoint.archived_through).changes;
    const entries = r.deleteEntries.run(checkpoint.archived_through).changes;
    return { entries, receipts };
  }

  /** Prepared on first use: a repository may be opened on a file not yet migrated to version 10 (tests of older migrations do). */
  private retention() {
    return (this.retentionStmts ??= {
      latest: this.db.prepare('SELECT seq, archived_through, hash, prev_hash, count, at, jws FROM receipt_checkpoints ORDER BY seq DESC LIMIT 1'),
      unarchivable: this.db.prepare(`SELECT MIN(first_seq) FROM receipts
        WHERE status = 'PENDING' OR created_at >= @before OR COALESCE(completed_at, created_at) >= @before`).pluck(),
      straddling: this.db.prepare('SELECT MIN(first_seq) FROM receipts WHERE first_seq <= ? AND last_seq > ?').pluck(),
      insertCheckpoint: this.db.prepare(`INSERT INTO receipt_checkpoints (seq, archived_through, hash, prev_hash, count, at, jws)
        VALUES (@seq, @archived_through, @hash, @prev_hash, @count, @at, @jws) ON CONFLICT (seq) DO NOTHING`),
      deleteIndex: this.db.prepare('DELETE FROM receipts WHERE first_seq <= ?'),
      deleteEntries: this.db.prepare('DELETE FROM receipt_entries WHERE seq <= ?'),
    });
  }

  /** Inside a transaction: the next seq, linked to the current head. */
  private appendEntry(entry: NewEntry): StoredEntry {
    const head = this.headStmt.get() as { seq: number; hash: string } | undefined;
    const seq = (head?.seq ?? 0) + 1;
    const prevHash = head?.hash ?? GENESIS_HASH;
    const stored: StoredEntry = { seq, ...entry, prev_hash: prevHash, hash: entryHash(prevHash, entry.body, seq, entry.kind, entry.receipt_id) };
    this.insertEntryStmt.run(stored.seq, stored.receipt_id, stored.kind, stored.body, stored.prev_hash, stored.hash);
    return stored;
  }

  private immediately<T>(fn: () => T, receiptId: string): T {
    try {
      return fn();
    } catch (e) {
      if ((e as { code?: string }).code === 'SQLITE_CONSTRAINT_PRIMARYKEY') {
        throw new WritError('ALREADY_EXISTS', `a receipt with id '${receiptId}' already exists`);
      }
      throw e;
    }
  }
}
