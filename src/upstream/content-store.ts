import type { Clock } from '../clock.js';
import type { UpstreamDatabase } from './database.js';
import { highestEpoch, type FencingEpochs } from '../wire/fencing-header.js';
import { keysConflict } from '../wire/key-family.js';

/** The fields a sample post has. Every write is a partial update of these. */
export const POST_FIELDS = ['title', 'body', 'meta_description', 'tags', 'canonical', 'status'] as const;
export type PostFieldName = (typeof POST_FIELDS)[number];

export interface PostFields {
  title?: string;
  body?: string;
  meta_description?: string;
  tags?: string[];
  canonical?: string;
  status?: string;
}

export interface Post {
  id: string;
  /** 0 means "no such post"; the first write creates revision 1. */
  revision: number;
  fields: PostFields;
  updated_by: string | null;
  last_receipt: string | null;
  /** Per coordination key, the highest fencing epoch of an accepted write. */
  fences: FencingEpochs;
  /** The highest of `fences` (null when no write carried an epoch); kept for callers of the one-epoch protocol. */
  fencing_epoch: number | null;
  /** Per field, the revision whose write last changed it. */
  field_revisions: Record<string, number>;
  updated_at: number;
}

export interface PostRevision {
  revision: number;
  operation: 'put' | 'merge';
  /** The post's fields after this revision. */
  fields: PostFields;
  /** What this write changed. */
  changed: Record<string, unknown>;
  written_by: string | null;
  /** The highest epoch this write carried (null when unfenced). */
  fencing_epoch: number | null;
  /** The `Writ-Fencing-Epoch` header exactly as received (null when absent). */
  fencing: string | null;
  receipt_id: string | null;
  at: number;
}

interface WriterHeaders {
  /** Writ-Fencing-Epoch parsed per key; null when the writer sent none (unfenced, e.g. an optimistic resource). */
  fencing: FencingEpochs | null;
  /** The header as received, for the history. */
  fencingHeader: string | null;
  principal: string | null;
  receiptId: string | null;
}

export interface PutCommand extends WriterHeaders {
  postId: string;
  ifMatch: number;
  fields: PostFields;
}

export interface MergeCommand extends WriterHeaders {
  postId: string;
  addTags: string[];
  removeTags: string[];
}

export type WriteOutcome =
  | { kind: 'applied'; post: Post; created: boolean }
  /** A write with this receipt id was already applied: nothing written, its revision reported. */
  | { kind: 'replayed'; post: Post; revision: number }
  /** `changedFields`: the written fields changed after the revision the writer read (empty when it read a revision from the future). */
  | { kind: 'precondition_failed'; currentRevision: number; changedFields: string[] }
  /** The first key (in key order) whose epoch is below the highest accepted one. */
  | { kind: 'stale_epoch'; key: string; highest: number };

export interface RequestRecord {
  seq: number;
  at: number;
  method: string;
  url: string;
  post_id: string | null;
  status: number;
  code: string | null;
  principal: string | null;
  fencing_epoch: string | null;
  if_match: string | null;
  receipt_id: string | null;
}

interface PostRow {
  id: string;
  revision: number;
  fields: string;
  updated_by: string | null;
  last_receipt: string | null;
  updated_at: number;
}

/**
 * The sample upstream's content store. Fencing is per (post, coordination key): a write is refused if
 * any of its keys carries an epoch below that key's highest accepted one; keys never seen pass. A
 * refused write changes nothing, not even the remembered epochs: only accepted writes raise them.
 *
 * Concurrency control is field-versioned, as a CMS with per-field revisions would do: the post has one
 * revision counter, and each field remembers the revision that last wrote it. A write made from
 * revision V conflicts iff V is ahead of the post, or one of the fields it writes was written after V.
 * So writers of different fields who read the same revision both succeed, while no one overwrites a
 * field they have not seen. V = 0 ("I read nothing") creates a missing post and, on an existing one,
 * conflicts iff it writes a field that already has a value.
 */
export class SampleContentStore {
  private readonly postStmt;
  private readonly upsertStmt;
  private readonly insertRevisionStmt;
  private readonly revisionByReceiptStmt;
  private readonly historyStmt;
  private readonly writeCountsStmt;
  private readonly fencesStmt;
  private readonly raiseFenceStmt;
  private readonly fieldRevisionsStmt;
  private readonly writeFieldStmt;
  private readonly insertRequestStmt;
  private readonly putTx;
  private readonly mergeTx;

  constructor(
    private readonly db: UpstreamDatabase,
    private readonly clock: Clock,
  ) {
    this.postStmt = db.prepare('SELECT * FROM posts WHERE id = ?');
    this.upsertStmt = db.prepare(`
      INSERT INTO posts (id, revision, fields, updated_by, last_receipt, updated_at)
      VALUES (@id, @revision, @fields, @updated_by, @last_receipt, @updated_at)
      ON CONFLICT (id) DO UPDATE SET revision = excluded.revision, fields = excluded.fields, updated_by = excluded.updated_by,
        last_receipt = excluded.last_receipt, updated_at = excluded.updated_at`);
    this.insertRevisionStmt = db.prepare(`
      INSERT INTO revisions (post_id, revision, operation, fields, changed, written_by, fencing_epoch, fencing, receipt_id, at)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`);
    this.revisionByReceiptStmt = db.prepare('SELECT revision FROM revisions WHERE post_id = ? AND receipt_id = ?').pluck();
    this.historyStmt = db.prepare('SELECT * FROM revisions WHERE post_id = ? ORDER BY revision');
    this.writeCountsStmt = db.prepare('SELECT post_id, COUNT(*) AS n FROM revisions GROUP BY post_id ORDER BY post_id');
    this.fencesStmt = db.prepare('SELECT key, highest FROM fences WHERE post_id = ? ORDER BY key').raw();
    this.raiseFenceStmt = db.prepare(`
      INSERT INTO fences (post_id, key, highest) VALUES (?, ?, ?)
      ON CONFLICT (post_id, key) DO UPDATE SET highest = MAX(highest, excluded.highest)`);
    this.fieldRevisionsStmt = db.prepare('SELECT field, revision FROM field_revisions WHERE post_id = ? ORDER BY field').raw();
    this.writeFieldStmt = db.prepare(`
      INSERT INTO field_revisions (post_id, field, revision) VALUES (?, ?, ?)
      ON CONFLICT (post_id, field) DO UPDATE SET revision = excluded.revision`);
    this.insertRequestStmt = db.prepare(`
      INSERT INTO requests (at, method, url, post_id, status, code, principal, fencing_epoch, if_match, receipt_id)
      VALUES (@at, @method, @url, @post_id, @status, @code, @principal, @fencing_epoch, @if_match, @receipt_id)`);

    this.putTx = db.transaction((cmd: PutCommand): WriteOutcome => {
      const replay = this.replayOf(cmd);
      if (replay) return replay;
      const post = this.get(cmd.postId);
      const refused = this.fence(post, cmd.fencing) ?? this.precondition(post, cmd.ifMatch, Object.keys(cmd.fields));
      if (refused) return refused;
      return this.apply(post, cmd, 'put', { ...(post?.fields ?? {}), ...cmd.fields }, cmd.fields);
    });
    this.mergeTx = db.transaction((cmd: MergeCommand): WriteOutcome => {
      const replay = this.replayOf(cmd);
      if (replay) return replay;
      const post = this.get(cmd.postId);
      const fence = this.fence(post, cmd.fencing);
      if (fence) return fence;
      const remove = new Set(cmd.removeTags);
      const tags = [...new Set([...(post?.fields.tags ?? []), ...cmd.addTags])].filter((t) => !remove.has(t));
      return this.apply(post, cmd, 'merge', { ...(post?.fields ?? {}), tags }, { tags: { add: cmd.addTags, remove: cmd.removeTags } });
    });
  }

  get(postId: string): Post | null {
    const row = this.postStmt.get(postId) as PostRow | undefined;
    if (!row) return null;
    const fences = Object.fromEntries(this.fencesStmt.all(postId) as [string, number][]);
    return {
      id: row.id,
      revision: row.revision,
      fields: JSON.parse(row.fields) as PostFields,
      updated_by: row.updated_by,
      last_receipt: row.last_receipt,
      fences,
      fencing_epoch: highestEpoch(fences),
      field_revisions: Object.fromEntries(this.fieldRevisionsStmt.all(postId) as [string, number][]),
      updated_at: row.updated_at,
    };
  }

  /** Partial update guarded by the revision the writer read (If-Match, field-versioned) and the fencing epochs. */
  put(cmd: PutCommand): WriteOutcome {
    return this.putTx.immediate(cmd);
  }

  /** Tag merge: commutative, so no revision precondition; still fenced. */
  merge(cmd: MergeCommand): WriteOutcome {
    return this.mergeTx.immediate(cmd);
  }

  history(postId: string): PostRevision[] {
    return (this.historyStmt.all(postId) as (Omit<PostRevision, 'fields' | 'changed'> & { fields: string; changed: string })[]).map((r) => ({
      revision: r.revision,
      operation: r.operation,
      fields: JSON.parse(r.fields) as PostFields,
      changed: JSON.parse(r.changed) as Record<string, unknown>,
      written_by: r.written_by,
      fencing_epoch: r.fencing_epoch,
      fencing: r.fencing,
      receipt_id: r.receipt_id,
      at: r.at,
    }));
  }

  /** The revision at which the write carrying this receipt id was applied, or null. */
  revisionOfReceipt(postId: string, receiptId: string): number | null {
    return (this.revisionByReceiptStmt.get(postId, receiptId) as number | undefined) ?? null;
  }

  writeCounts(): Record<string, number> {
    const counts: Record<string, number> = {};
    for (const r of this.writeCountsStmt.all() as { post_id: string; n: number }[]) counts[r.post_id] = r.n;
    return counts;
  }

  recordRequest(r: Omit<RequestRecord, 'seq' | 'at'>): void {
    this.insertRequestStmt.run({ at: this.clock.now(), ...r }); // the new key first: see test/architecture/spread-then-add.test.ts
  }

  requests(filter: { postId?: string; after?: number; limit?: number } = {}): RequestRecord[] {
    const where: string[] = ['seq > ?'];
    const params: unknown[] = [filter.after ?? 0];
    if (filter.postId !== undefined) (where.push('post_id = ?'), params.push(filter.postId));
    return this.db
      .prepare(`SELECT * FROM requests WHERE ${where.join(' AND ')} ORDER BY seq LIMIT ?`)
      .all(...params, filter.limit ?? 10_000) as RequestRecord[];
  }

  private replayOf(cmd: { postId: string; receiptId: string | null }): WriteOutcome | null {
    if (cmd.receiptId === null) return null;
    const revision = this.revisionOfReceipt(cmd.postId, cmd.receiptId);
    return revision === null ? null : { kind: 'replayed', post: this.get(cmd.postId)!, revision };
  }

  /**
   * Refuses a write that carries, for some key, an epoch below the highest accepted for that key or for a
   * key of its family it conflicts with (src/wire/key-family.ts): a field write is fenced by its field and
   * by the whole resource, a whole-resource write by the resource and by every field of it. Writ grants
   * a family's epochs from one counter, so a lease that ended (whole or field) writes late below whoever
   * took any key of its family after it, once that one has written. Siblings (two fields) never fence
   * each other. The refusal names the write's key and the highest that stops it.
   */
  private fence(post: Post | null, fencing: FencingEpochs | null): WriteOutcome | null {
    if (!post || !fencing) return null;
    const seen = Object.keys(post.fences);
    for (const key of Object.keys(fencing).sort()) {
      let highest: number | null = null;
      for (const other of seen) {
        if (keysConflict(key, other)) highest = Math.max(highest ?? 0, post.fences[other]!);
      }
      if (highest !== null && fencing[key]! < highest) return { kind: 'stale_epoch', key, highest };
    }
    return null;
  }

  private precondition(post: Post | null, readRevision: number, written: string[]): WriteOutcome | null {
    const currentRevision = post?.revision ?? 0;
    if (readRevision > currentRevision) return { kind: 'precondition_failed', currentRevision, changedFields: [] };
    const changedFields = written.filter((f) => (post?.field_revisions[f] ?? 0) > readRevision).sort();
    return changedFields.length > 0 ? { kind: 'precondition_failed', currentRevision, changedFields } : null;
  }

  private apply(post: Post | null, cmd: WriterHeaders & { postId: string }, operation: 'put' | 'merge', fields: PostFields, changed: object): WriteOutcome {
    const at = this.clock.now();
    const revision = (post?.revision ?? 0) + 1;
    this.upsertStmt.run({ id: cmd.postId, revision, fields: JSON.stringify(fields), updated_by: cmd.principal, last_receipt: cmd.receiptId, updated_at: at });
    for (const [key, epoch] of Object.entries(cmd.fencing ?? {})) this.raiseFenceStmt.run(cmd.postId, key, epoch);
    for (const field of Object.keys(changed)) this.writeFieldStmt.run(cmd.postId, field, revision);
    this.insertRevisionStmt.run(
      cmd.postId, revision, operation, JSON.stringify(fields), JSON.stringify(changed),
      cmd.principal, highestEpoch(cmd.fencing), cmd.fencingHeader, cmd.receiptId, at,
    );
    return { kind: 'applied', post: this.get(cmd.postId)!, created: post === null };
  }
}
