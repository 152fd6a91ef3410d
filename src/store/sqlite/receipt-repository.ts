import { GENESIS_HASH, linkEntry, type ChainHead, type ChainId } from '../../audit/hash-chain.js';
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
import type { Statement } from 'better-sqlite3';
import type { SqliteDatabase } from './database.js';

const ENTRY_COLUMNS = 'seq, chain, pos, receipt_id, kind, body, prev_hash, hash';
/** The same columns from `receipt_entries e` joined to the receipts index. */
const E_COLUMNS = ENTRY_COLUMNS.split(', ').map((c) => `e.${c}`).join(', ');

/**
 * The receipt log on SQLite: one hash chain per coordination key, as on PostgreSQL (same hashing, so
 * `writ audit verify` reads both alike). SQLite has one writer at a time, so a chain's head is simply
 * its last entry (read through the (chain, pos) index inside the immediate transaction) and no head
 * row is kept: a receipt commit writes the entry and the index row, nothing more.
 */
export class SqliteReceiptRepository implements ReceiptRepository {
  private s: ReturnType<SqliteReceiptRepository['prepare']> | undefined;
  /** One prepared statement per combination of filters (at most 32). */
  private readonly findStmts = new Map<string, Statement>();

  constructor(private readonly db: SqliteDatabase) {}

  /** Prepared on first use: a repository may be opened on a file not yet migrated (tests of older migrations do). */
  private get stmts() {
    return (this.s ??= this.prepare());
  }

  private prepare() {
    const db = this.db;
    const headOf = db.prepare('SELECT pos, hash FROM receipt_entries WHERE chain = ? ORDER BY pos DESC LIMIT 1');
    const nextSeq = db.prepare('SELECT COALESCE(MAX(seq), 0) + 1 FROM receipt_entries').pluck();
    const insertEntry = db.prepare(`INSERT INTO receipt_entries (${ENTRY_COLUMNS}) VALUES (@seq, @chain, @pos, @receipt_id, @kind, @body, @prev_hash, @hash)`);
    const insertIndex = db.prepare(`
      INSERT INTO receipts (receipt_id, principal, resource_key, status, idempotency_key, request_hash, decision_id, created_at, completed_at, first_seq, last_seq)
      VALUES (@receipt_id, @principal, @resource_key, @status, @idempotency_key, @request_hash, @decision_id, @created_at, @completed_at, @seq, @seq)`);
    const byIdempotency = db.prepare('SELECT receipt_id, request_hash FROM receipts WHERE principal = ? AND idempotency_key = ?');
    const statusAndFirst = db.prepare(`SELECT r.status, ${E_COLUMNS} FROM receipts r LEFT JOIN receipt_entries e ON e.seq = r.first_seq WHERE r.receipt_id = ?`);
    const settle = db.prepare('UPDATE receipts SET status = ?, completed_at = ?, last_seq = ? WHERE receipt_id = ?');
    const append = (entry: SettlingEntry, chain: ChainId): StoredEntry => {
      const head = (headOf.get(chain) as { pos: number; hash: string } | undefined) ?? { pos: 0, hash: GENESIS_HASH };
      const stored = linkEntry(head, nextSeq.get() as number, { chain, receipt_id: entry.receipt_id, kind: entry.kind, body: entry.body });
      insertEntry.run(stored);
      return stored;
    };
    return {
      byIdempotency,
      // A receipt has at most two entries, its first and its settlement, and its row names both.
      entriesOf: db.prepare(`SELECT ${E_COLUMNS} FROM receipts r JOIN receipt_entries e ON e.seq IN (r.first_seq, r.last_seq) WHERE r.receipt_id = ? ORDER BY e.seq`),
      from: db.prepare(`SELECT ${ENTRY_COLUMNS} FROM receipt_entries WHERE (chain, pos) > (?, ?) ORDER BY chain, pos LIMIT ?`),
      fromStart: db.prepare(`SELECT ${ENTRY_COLUMNS} FROM receipt_entries ORDER BY chain, pos LIMIT ?`),
      // One probe per chain (a skip scan over the (chain, pos) index) and its last entry, not a pass over every entry.
      heads: db.prepare(`WITH RECURSIVE c(chain) AS (
          SELECT MIN(chain) FROM receipt_entries
          UNION ALL
          SELECT (SELECT MIN(chain) FROM receipt_entries WHERE chain > c.chain) FROM c WHERE c.chain IS NOT NULL)
        SELECT e.chain, e.pos, e.hash FROM c
          JOIN receipt_entries e ON e.chain = c.chain AND e.pos = (SELECT MAX(pos) FROM receipt_entries m WHERE m.chain = c.chain)`),
      // The same skip scan, each chain's last position summed.
      headsSum: db.prepare(`WITH RECURSIVE c(chain) AS (
          SELECT MIN(chain) FROM receipt_entries
          UNION ALL
          SELECT (SELECT MIN(chain) FROM receipt_entries WHERE chain > c.chain) FROM c WHERE c.chain IS NOT NULL)
        SELECT COALESCE(SUM((SELECT MAX(pos) FROM receipt_entries m WHERE m.chain = c.chain)), 0) FROM c WHERE c.chain IS NOT NULL`).pluck(),
      at: db.prepare(`SELECT ${ENTRY_COLUMNS} FROM receipt_entries WHERE chain = ? AND pos = ?`),
      // Seqs are drawn under the one writer's lock (MAX + 1), so they commit in order: the highest one read
      // marks what a read saw, and the entries above it (the rowid's range) are what was appended since.
      maxSeq: db.prepare('SELECT COALESCE(MAX(seq), 0) FROM receipt_entries').pluck(),
      movedSince: db.prepare(`SELECT e.chain, e.pos, e.hash FROM (SELECT DISTINCT chain FROM receipt_entries WHERE seq > ?) c
          JOIN receipt_entries e ON e.chain = c.chain AND e.pos = (SELECT MAX(pos) FROM receipt_entries m WHERE m.chain = c.chain)`),
      claimTurn: db.prepare(`INSERT INTO receipt_checkpoint_turn AS t (id, holder, until) VALUES (1, @holder, @until)
          ON CONFLICT (id) DO UPDATE SET holder = excluded.holder, until = excluded.until WHERE t.holder = excluded.holder OR t.until < @now`),

      indexRow: db.prepare(`SELECT receipt_id, principal, resource_key, status, idempotency_key, request_hash, decision_id, created_at, completed_at, first_seq, last_seq
        FROM receipts WHERE receipt_id = ?`),
      namedEntries: db.prepare(`SELECT ${ENTRY_COLUMNS} FROM receipt_entries WHERE seq IN (?, ?) ORDER BY seq`),
      orphans: db.prepare(`SELECT r.receipt_id, r.first_seq, r.last_seq FROM receipts r
        WHERE NOT EXISTS (SELECT 1 FROM receipt_entries e WHERE e.seq = r.first_seq AND e.receipt_id = r.receipt_id AND e.kind IN ('intent', 'rejected'))
           OR (r.last_seq <> r.first_seq AND NOT EXISTS (SELECT 1 FROM receipt_entries e WHERE e.seq = r.last_seq AND e.receipt_id = r.receipt_id AND e.kind IN ('completed', 'failed', 'reconciled')))
        LIMIT ?`),
      latest: db.prepare('SELECT CASE WHEN graph_hash IS NULL THEN 2 ELSE 3 END AS v, seq, at, chains, root, archived, jws, graph_revision, graph_hash FROM receipt_head_checkpoints ORDER BY seq DESC LIMIT 1'),
      // One probe per chain (a skip scan over the primary key), not a pass over every leaf ever stored.
      leaves: db.prepare(`WITH RECURSIVE c(chain) AS (
          SELECT MIN(chain) FROM receipt_checkpoint_leaves
          UNION ALL
          SELECT (SELECT MIN(chain) FROM receipt_checkpoint_leaves WHERE chain > c.chain) FROM c WHERE c.chain IS NOT NULL)
        SELECT l.chain, l.pos, l.hash, l.floor_pos, l.floor_hash FROM c
          JOIN receipt_checkpoint_leaves l ON l.chain = c.chain
           AND l.checkpoint = (SELECT MAX(m.checkpoint) FROM receipt_checkpoint_leaves m WHERE m.chain = c.chain AND m.checkpoint <= ?)`),
      legacy: db.prepare('SELECT seq, archived_through, hash, prev_hash, count, at, jws FROM receipt_checkpoints ORDER BY seq DESC LIMIT 1'),
      inTurn: db.prepare('SELECT 1 FROM receipt_checkpoint_turn WHERE id = 1 AND holder = ? AND until >= ?').pluck(),
      insertCheckpoint: db.prepare(`INSERT INTO receipt_head_checkpoints (seq, at, chains, root, archived, jws, graph_revision, graph_hash)
        VALUES (@seq, @at, @chains, @root, @archived, @jws, @graph_revision, @graph_hash) ON CONFLICT (seq) DO NOTHING`),
      insertLeaf: db.prepare(`INSERT INTO receipt_checkpoint_leaves (chain, checkpoint, pos, hash, floor_pos, floor_hash)
        VALUES (@chain, @checkpoint, @pos, @hash, @floor_pos, @floor_hash)`),
      deleteIndex: db.prepare("DELETE FROM receipts WHERE receipt_id IN (SELECT receipt_id FROM receipt_entries WHERE chain = ? AND pos <= ? AND kind IN ('intent', 'rejected'))"),
      deleteEntries: db.prepare('DELETE FROM receipt_entries WHERE chain = ? AND pos <= ?'),
      appendIntent: db.transaction((entry: NewEntry, index: ReceiptIndexRow): IntentAppend => {
        if (index.idempotency_key !== null) {
          const existing = byIdempotency.get(index.principal, index.idempotency_key) as { receipt_id: string; request_hash: string | null } | undefined;
          if (existing) return { appended: false, existing };
        }
        const stored = append(entry, entry.chain);
        insertIndex.run({ seq: stored.seq, decision_id: null, ...index }); // the new keys first: see test/architecture/spread-then-add.test.ts
        return { appended: true, entry: stored };
      }),
      appendRejection: db.transaction((entry: NewEntry, index: ReceiptIndexRow): StoredEntry => {
        const stored = append(entry, entry.chain);
        insertIndex.run({ seq: stored.seq, decision_id: null, ...index, idempotency_key: null });
        return stored;
      }),
      appendSettlement: db.transaction((entry: SettlingEntry, status: string, completedAt: number): SettlementAppend => {
        const current = statusAndFirst.get(entry.receipt_id) as ({ status: string } & { [K in keyof StoredEntry]: StoredEntry[K] | null }) | undefined;
        if (current === undefined) return { appended: false, reason: 'unknown' };
        if (current.status !== 'PENDING') return { appended: false, reason: 'settled' };
        const { status: _status, ...first } = current;
        if (first.chain === null) throw new WritError('INTERNAL', `receipt ${entry.receipt_id} has no first entry (run writ audit verify)`);
        const stored = append(entry, first.chain);
        settle.run(status, completedAt, stored.seq, entry.receipt_id);
        return { appended: true, entry: stored, first: first as StoredEntry };
      }),
    };
  }

  async findByIdempotencyKey(principal: string, idempotencyKey: string): Promise<{ receipt_id: string; request_hash: string | null } | null> {
    return (this.stmts.byIdempotency.get(principal, idempotencyKey) as { receipt_id: string; request_hash: string | null } | undefined) ?? null;
  }

  async appendIntent(entry: NewEntry, index: ReceiptIndexRow): Promise<IntentAppend> {
    return this.immediately(() => this.stmts.appendIntent.immediate(entry, index), entry.receipt_id);
  }

  async appendRejection(entry: NewEntry, index: ReceiptIndexRow): Promise<StoredEntry> {
    return this.immediately(() => this.stmts.appendRejection.immediate(entry, index), entry.receipt_id);
  }

  async appendSettlement(entry: SettlingEntry, status: 'COMPLETED' | 'FAILED', completedAt: number): Promise<SettlementAppend> {
    return this.stmts.appendSettlement.immediate(entry, status, completedAt);
  }

  async entriesOf(receiptId: string): Promise<StoredEntry[]> {
    return this.stmts.entriesOf.all(receiptId) as StoredEntry[];
  }

  async find(filter: ReceiptFilter): Promise<FoundReceipt[]> {
    const where: string[] = [];
    const params: unknown[] = [];
    if (filter.resource !== undefined) (where.push('resource_key = ?'), params.push(filter.resource));
    if (filter.principal !== undefined) (where.push('principal = ?'), params.push(filter.principal));
    if (filter.status !== undefined) (where.push('status = ?'), params.push(filter.status));
    if (filter.decisionId !== undefined) (where.push('decision_id = ?'), params.push(filter.decisionId));
    if (filter.after !== undefined) (where.push('first_seq > ?'), params.push(filter.after));
    if (filter.createdAtOrBefore !== undefined) (where.push('created_at <= ?'), params.push(filter.createdAtOrBefore));
    // One machine: its clock is the store's.
    if (filter.createdAtLeastMsAgo !== undefined) (where.push('created_at <= ?'), params.push(Date.now() - filter.createdAtLeastMsAgo));
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

  async entriesFrom(after: { chain: ChainId; pos: number } | null, limit: number): Promise<StoredEntry[]> {
    return (after ? this.stmts.from.all(after.chain, after.pos, limit) : this.stmts.fromStart.all(limit)) as StoredEntry[];
  }

  async entriesAt(places: readonly { chain: ChainId; pos: number }[]): Promise<StoredEntry[]> {
    return places.map((p) => this.stmts.at.get(p.chain, p.pos) as StoredEntry | undefined).filter((e): e is StoredEntry => e !== undefined);
  }

  async heads(): Promise<ChainHead[]> {
    return this.stmts.heads.all() as ChainHead[];
  }

  async headsMark(): Promise<string> {
    return String(this.stmts.maxSeq.get() as number);
  }

  async headsMovedSince(mark: string): Promise<ChainHead[]> {
    return this.stmts.movedSince.all(Number(mark)) as ChainHead[];
  }

  async claimCheckpointTurn(holder: string, turnMs: number): Promise<boolean> {
    const now = Date.now();
    return this.stmts.claimTurn.run({ holder, until: now + turnMs, now }).changes > 0;
  }

  async headsSum(): Promise<number> {
    return this.stmts.headsSum.get() as number;
  }

  async indexOf(receiptIds: readonly string[]): Promise<IndexedReceipt[]> {
    const out: IndexedReceipt[] = [];
    for (const id of receiptIds) {
      const row = this.stmts.indexRow.get(id) as IndexedReceipt['row'] | undefined;
      if (row) out.push({ row, entries: this.stmts.namedEntries.all(row.first_seq, row.last_seq) as StoredEntry[] });
    }
    return out;
  }

  async indexOrphans(limit: number): Promise<{ receipt_id: string; first_seq: number; last_seq: number }[]> {
    return this.stmts.orphans.all(limit) as { receipt_id: string; first_seq: number; last_seq: number }[];
  }

  async latestCheckpoint(): Promise<StoredCheckpoint | null> {
    const row = this.stmts.latest.get() as StoredCheckpointRow | undefined;
    return row ? storedCheckpointOf(row) : null;
  }

  async checkpointLeaves(seq: number): Promise<CheckpointLeaf[]> {
    return this.stmts.leaves.all(seq) as CheckpointLeaf[];
  }

  async legacyCheckpoint(): Promise<StoredLegacyCheckpoint | null> {
    return (this.stmts.legacy.get() as StoredLegacyCheckpoint | undefined) ?? null;
  }

  async recordCheckpoint(c: StoredCheckpoint, changed: readonly CheckpointLeaf[], raised: ReadonlySet<string>, turn?: string): Promise<{ entries: number; receipts: number } | null> {
    const s = this.stmts;
    // In a turn, only while it is still this holder's (the clock claimCheckpointTurn uses): this transaction
    // holds the one writer's lock, so no takeover comes between the check and the commit.
    if (turn !== undefined && s.inTurn.get(turn, Date.now()) === undefined) return null;
    if (s.insertCheckpoint.run({ seq: c.seq, at: c.at, chains: c.chains, root: c.root, archived: c.archived, jws: c.jws, graph_revision: c.graph_revision ?? null, graph_hash: c.graph_hash ?? null }).changes === 0) return null;
    let entries = 0;
    let receipts = 0;
    for (const leaf of changed) {
      s.insertLeaf.run({ checkpoint: c.seq, ...leaf }); // the new key first: see test/architecture/spread-then-add.test.ts
      if (leaf.floor_pos === 0 || !raised.has(leaf.chain)) continue;
      receipts += s.deleteIndex.run(leaf.chain, leaf.floor_pos).changes;
      entries += s.deleteEntries.run(leaf.chain, leaf.floor_pos).changes;
    }
    return { entries, receipts };
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
