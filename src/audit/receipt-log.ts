import { randomUUID } from 'node:crypto';
import type { Clock } from '../clock.js';
import type { TxRunner } from '../transactions.js';
import { WritError } from '../errors.js';
import { ArchiveWriter } from './archive-file.js';
import { canonicalJson } from './canonical-json.js';
import { sameCheckpoint, type CheckpointPayload, type CheckpointSigner, type StoredCheckpoint } from './checkpoint.js';
import { foldReceipt } from './fold.js';
import { ChainVerifier, GENESIS_HASH, type ReceiptChainVerdict } from './hash-chain.js';
import { checkIndexRows } from './index-check.js';
import type { Receipt, ReceiptCompletion, ReceiptIntent, ReceiptPage, ReceiptQuery, ReceiptRejection, ReconcileOutcome } from './receipt.js';
import type { ReceiptFilter, ReceiptRepository, SettlementAppend } from './repository.js';

/** Entries read and checked per step of a chain verification (8–15 ms of work on these machines). */
export const VERIFY_CHUNK = 1_000;

/** The transaction handle the receipt log needs. */
export interface ReceiptTx {
  readonly receipts: ReceiptRepository;
}

export interface ReceiptLogOptions {
  store: TxRunner<ReceiptTx>;
  clock: Clock;
  /** New receipt ids; defaults to `rcpt_<uuid>`. */
  newId?: () => string;
  /** Signs checkpoints when archiving and checks the latest one when verifying (the KeyRing's). */
  checkpoints?: CheckpointSigner;
}

/** What `archive` did: nothing (no receipt old and settled enough), or the checkpoint it recorded. */
export type ArchiveResult =
  | { archived: false; reason: string; archived_through: number }
  | { archived: true; file: string; checkpoint: StoredCheckpoint; entries: number; receipts: number };

const DEFAULT_LIMIT = 100;
const MAX_LIMIT = 1000;

/**
 * The append-only, hash-chained receipt log. An intent is written before a write is forwarded and
 * settled after it, so a crash leaves a visible PENDING receipt, never a silent gap. Refused requests
 * are recorded too, as one REJECTED entry. Each write runs in its own transaction, or in the caller's
 * (`tx`), so that it commits together with the caller's other writes (e.g. the spent decision).
 */
export class ReceiptLog {
  private readonly store: TxRunner<ReceiptTx>;
  private readonly clock: Clock;
  private readonly newId: () => string;
  private readonly checkpoints: CheckpointSigner | undefined;

  constructor(options: ReceiptLogOptions) {
    this.store = options.store;
    this.clock = options.clock;
    this.newId = options.newId ?? (() => `rcpt_${randomUUID()}`);
    this.checkpoints = options.checkpoints;
  }

  /**
   * Writes the intent entry (status PENDING). If this principal already used `idempotency_key`:
   * with the same request_hash the existing receipt is returned with `replayed: true` and nothing is
   * written; with another request_hash it throws IDEMPOTENCY_MISMATCH.
   */
  async recordIntent(intent: ReceiptIntent, tx?: ReceiptTx): Promise<Receipt> {
    if (!tx) return this.store.readWrite((t) => this.recordIntent(intent, t));
    const at = this.clock.now();
    const receiptId = intent.receipt_id ?? this.newId();
    const body = { at, ...normalizedIntent(intent) };
    const result = await tx.receipts.appendIntent(
      { receipt_id: receiptId, kind: 'intent', body: canonicalJson(body) },
      {
        receipt_id: receiptId,
        principal: intent.principal,
        resource_key: intent.resource_key,
        status: 'PENDING',
        idempotency_key: intent.idempotency_key ?? null,
        request_hash: intent.request_hash,
        created_at: at,
        completed_at: null,
      },
    );
    if (result.appended) return foldReceipt([result.entry]);
    checkSameRequest(intent.idempotency_key ?? '', result.existing, intent.request_hash);
    return { ...(await this.mustGet(tx, result.existing.receipt_id)), replayed: true };
  }

  /**
   * Settles a PENDING receipt as COMPLETED or FAILED. First settlement wins: if the receipt is already
   * settled (e.g. reconciled by another process) nothing is written and it is returned with `replayed: true`.
   */
  async complete(receiptId: string, completion: ReceiptCompletion, tx?: ReceiptTx): Promise<Receipt> {
    if (!tx) return this.store.readWrite((t) => this.complete(receiptId, completion, t));
    const at = this.clock.now();
    const body = {
      at,
      status: completion.status,
      final_version: completion.final_version ?? null,
      upstream_status: completion.upstream_status ?? null,
      error: completion.error ?? null,
      conflicts: completion.conflicts ?? [],
    };
    const kind = completion.status === 'COMPLETED' ? 'completed' : 'failed';
    return this.settle(tx, receiptId, await tx.receipts.appendSettlement({ receipt_id: receiptId, kind, body: canonicalJson(body) }, completion.status, at));
  }

  /** Settles a PENDING receipt from what the upstream says (after a crash or a timeout). Same first-wins rule. */
  async reconcile(receiptId: string, outcome: ReconcileOutcome, tx?: ReceiptTx): Promise<Receipt> {
    if (!tx) return this.store.readWrite((t) => this.reconcile(receiptId, outcome, t));
    const at = this.clock.now();
    const body =
      outcome.status === 'COMPLETED'
        ? { at, status: outcome.status, final_version: outcome.final_version, upstream_status: outcome.upstream_status ?? null, error: null, note: outcome.note }
        : { at, status: outcome.status, error: outcome.error, upstream_status: outcome.upstream_status ?? null, note: outcome.note };
    return this.settle(tx, receiptId, await tx.receipts.appendSettlement({ receipt_id: receiptId, kind: 'reconciled', body: canonicalJson(body) }, outcome.status, at));
  }

  /** Records a refused request as a single REJECTED entry. */
  async recordRejection(rejection: ReceiptRejection, tx?: ReceiptTx): Promise<Receipt> {
    if (!tx) return this.store.readWrite((t) => this.recordRejection(rejection, t));
    const at = this.clock.now();
    const receiptId = this.newId();
    const body = {
      at,
      ...normalizedIntent({ ...rejection, request_hash: rejection.request_hash ?? undefined }),
      error: rejection.error,
      conflicts: rejection.conflicts ?? [],
      upstream_status: rejection.upstream_status ?? null,
    };
    const entry = await tx.receipts.appendRejection(
      { receipt_id: receiptId, kind: 'rejected', body: canonicalJson(body) },
      {
        receipt_id: receiptId,
        principal: rejection.principal,
        resource_key: rejection.resource_key,
        status: 'REJECTED',
        idempotency_key: null,
        request_hash: rejection.request_hash ?? null,
        created_at: at,
        completed_at: at,
      },
    );
    return foldReceipt([entry]);
  }

  /**
   * The first receipt of this principal's idempotency key, for a retry of the same request (it gets that
   * receipt instead of writing again); IDEMPOTENCY_MISMATCH when the key was used for another request.
   */
  findReplay(principal: string, idempotencyKey: string, requestHash: string): Promise<Receipt | null> {
    return this.store.read(async (tx) => {
      const found = await tx.receipts.findByIdempotencyKey(principal, idempotencyKey);
      if (!found) return null;
      checkSameRequest(idempotencyKey, found, requestHash);
      return this.mustGet(tx, found.receipt_id);
    });
  }

  get(receiptId: string): Promise<Receipt | null> {
    return this.store.read((tx) => receiptOf(tx, receiptId));
  }

  query(q: ReceiptQuery = {}): Promise<ReceiptPage> {
    return this.page({
      resource: q.resource, principal: q.principal, status: q.status, after: q.after, before: q.before, newestFirst: q.newestFirst, createdAtOrAfter: q.since, createdAtOrBefore: q.until,
    }, q.limit ?? DEFAULT_LIMIT);
  }

  /** Receipts still PENDING, oldest first; `createdAtOrBefore` leaves out writes that may still be in flight. */
  pending(options: { createdAtOrBefore?: number; after?: number; limit?: number } = {}): Promise<ReceiptPage> {
    return this.page({ status: 'PENDING', createdAtOrBefore: options.createdAtOrBefore, after: options.after }, options.limit ?? MAX_LIMIT);
  }

  /** One page of receipts; asks for one more than the page to know whether there is a next one. */
  private async page(filter: Omit<ReceiptFilter, 'limit'>, requested: number): Promise<ReceiptPage> {
    const limit = Math.min(Math.max(1, Math.floor(requested)), MAX_LIMIT);
    const found = await this.store.read((tx) => tx.receipts.find({ ...filter, limit: limit + 1 }));
    const page = found.slice(0, limit);
    return { receipts: page.map((f) => foldReceipt(f.entries)), next: found.length > limit ? page[page.length - 1]!.first_seq : null };
  }

  /**
   * Walks the whole chain from the store, in chunks of VERIFY_CHUNK entries, and reports the first
   * entry that is missing, altered or out of place; awaits `pause()` between chunks (default: one turn
   * of the event loop) so a server keeps answering other requests. A cut tail is detected against the
   * receipts index; compare `head` with a previously published head to detect a cut of both. Entries
   * appended meanwhile are checked too.
   */
  async verifyChain(pause: () => Promise<void> = () => new Promise((resolve) => setImmediate(resolve))): Promise<ReceiptChainVerdict> {
    // Read the index first: entries and index are written together, so a later scan sees at least this much.
    const indexedHead = await this.store.read((tx) => tx.receipts.indexedHead());
    const checkpoint = await this.store.read((tx) => tx.receipts.latestCheckpoint());
    let verifier = new ChainVerifier();
    let from: ReceiptChainVerdict['checkpoint'];
    if (checkpoint) {
      // Entries up to the checkpoint are archived: the chain in the store starts from its signed hash.
      from = { seq: checkpoint.seq, archived_through: checkpoint.archived_through, hash: checkpoint.hash, at: checkpoint.at };
      const problem = this.checkpointProblem(checkpoint);
      if (problem) return { ...verifier.broken(checkpoint.archived_through, `checkpoint ${checkpoint.seq}: ${problem}`), checkpoint: from };
      verifier = new ChainVerifier(checkpoint.archived_through, checkpoint.hash);
    }
    const verdict = await this.walk(verifier, indexedHead, pause);
    return from ? { ...verdict, checkpoint: from } : verdict;
  }

  private checkpointProblem(checkpoint: StoredCheckpoint): string | undefined {
    if (!this.checkpoints) return 'there is no key to check its signature with';
    const signed = this.checkpoints.verify(checkpoint.jws);
    if ('problem' in signed) return signed.problem;
    if (!sameCheckpoint(signed.payload, checkpoint)) return 'its row differs from what its signature covers (the checkpoint was altered)';
    return undefined;
  }

  private async walk(verifier: ChainVerifier, indexedHead: number, pause: () => Promise<void>): Promise<ReceiptChainVerdict> {
    let opened = 0;
    let settled = 0;
    for (;;) {
      const chunk = await this.store.read((tx) => tx.receipts.entriesAfter(verifier.verified, VERIFY_CHUNK));
      const bad = verifier.feed(chunk);
      if (bad) return bad;
      // The index rows of the receipts this chunk opens: what queries show must be what was hashed.
      const firsts = chunk.filter((e) => e.kind === 'intent' || e.kind === 'rejected');
      opened += firsts.length;
      settled += chunk.length - firsts.length;
      if (firsts.length > 0) {
        const rows = await this.store.read((tx) => tx.receipts.indexOf(firsts.map((e) => e.receipt_id)));
        const wrong = checkIndexRows(firsts, rows, verifier.verified);
        if (wrong) return verifier.broken(wrong.seq, wrong.problem);
      }
      if (chunk.length < VERIFY_CHUNK) break;
      await pause();
    }
    const end = verifier.finish(indexedHead);
    if (!end.ok) return end;
    // No row more or less than the chain's receipts, and no settlement the index does not point at.
    const counts = await this.store.read((tx) => tx.receipts.indexCounts(verifier.verified));
    if (counts.receipts !== opened) {
      return verifier.broken(verifier.verified, `the receipts index has ${counts.receipts} receipts up to entry ${verifier.verified}, the chain opens ${opened} (the receipts index was altered)`);
    }
    if (counts.settled !== settled) {
      return verifier.broken(verifier.verified, `the receipts index points at ${counts.settled} settlements up to entry ${verifier.verified}, the chain has ${settled} (a settled receipt is shown as pending, or the reverse: the receipts index was altered)`);
    }
    return end;
  }

  /**
   * Archives the oldest receipts: those whose every entry is older than `olderThanMs` and that are
   * settled (never a PENDING one, nor one opened after it), whole (a receipt's intent and settlement go
   * together), up to the entry before the head (the head stays: appends link to it). Writes the entries
   * from the latest checkpoint to the cut to `file` (JSON lines, a header holding the new signed
   * checkpoint), checking their chain as it goes, syncs and renames it into place, then records the
   * checkpoint and deletes those entries and their receipts' index rows in one transaction. If that
   * transaction fails, the file exists but nothing was deleted (archiving again writes a new file).
   */
  async archive(options: { olderThanMs: number; file: string }): Promise<ArchiveResult> {
    if (!this.checkpoints) throw new WritError('INTERNAL', 'archiving needs a checkpoint signer');
    const now = this.clock.now();
    const before = now - options.olderThanMs;
    const plan = await this.store.read(async (tx) => {
      const last = await tx.receipts.latestCheckpoint();
      const start = last?.archived_through ?? 0;
      let cut = (await tx.receipts.indexedHead()) - 1;
      const blocked = await tx.receipts.firstUnarchivable(before);
      if (blocked !== null) cut = Math.min(cut, blocked - 1);
      for (let straddling = await tx.receipts.firstStraddling(cut); straddling !== null && cut > start; straddling = await tx.receipts.firstStraddling(cut)) {
        cut = straddling - 1;
      }
      const end = cut > start ? (await tx.receipts.entriesAfter(cut - 1, 1))[0] : undefined;
      return { last, start, cut, end };
    });
    const { last, start, cut, end } = plan;
    // Never build on a checkpoint that does not verify: the new signature would vouch for it.
    const problem = last ? this.checkpointProblem(last) : undefined;
    if (problem) throw new WritError('UNPROCESSABLE', `checkpoint ${last!.seq} does not verify, so nothing is archived after it: ${problem}`);
    if (cut <= start || !end || end.seq !== cut) {
      return { archived: false, reason: `no receipt from entry ${start + 1} on is both settled and older than ${new Date(before).toISOString()} (or only the head is)`, archived_through: start };
    }
    const payload: CheckpointPayload = { seq: (last?.seq ?? 0) + 1, archived_through: cut, hash: end.hash, prev_hash: last?.hash ?? GENESIS_HASH, count: cut - start, at: now };
    const checkpoint: StoredCheckpoint = { ...payload, jws: this.checkpoints.sign(payload) };
    const writer = new ArchiveWriter(options.file, { writ_receipt_archive: 1, checkpoint });
    try {
      const verifier = new ChainVerifier(start, payload.prev_hash);
      while (verifier.verified < cut) {
        const chunk = await this.store.read((tx) => tx.receipts.entriesAfter(verifier.verified, Math.min(VERIFY_CHUNK, cut - verifier.verified)));
        const bad = verifier.feed(chunk) ?? (chunk.length === 0 ? verifier.broken(verifier.verified + 1, `entry ${verifier.verified + 1} is missing`) : undefined);
        if (bad) throw new WritError('UNPROCESSABLE', `the chain is broken at entry ${bad.firstBadSeq}: ${bad.problem}; nothing was archived (run writ audit verify)`);
        writer.append(chunk);
      }
      if (verifier.headHash !== end.hash) throw new WritError('UNPROCESSABLE', `entry ${cut} changed while it was archived; nothing was archived`);
      writer.commit();
    } catch (e) {
      writer.abort();
      throw e;
    }
    const deleted = await this.store.readWrite(async (tx) => {
      const now = await tx.receipts.latestCheckpoint();
      if ((now?.seq ?? 0) !== (last?.seq ?? 0)) {
        throw new WritError('UNPROCESSABLE', `another archive recorded checkpoint ${now?.seq} meanwhile; ${options.file} holds entries it archived too, nothing more was deleted`);
      }
      const done = await tx.receipts.archiveThrough(checkpoint);
      if (!done) throw new WritError('UNPROCESSABLE', `another archive recorded checkpoint ${checkpoint.seq} meanwhile; ${options.file} holds entries it archived too, nothing more was deleted`);
      return done;
    });
    return { archived: true, file: options.file, checkpoint, ...deleted };
  }

  /**
   * Signs the latest checkpoint again with the current key, as a new checkpoint that archives nothing
   * (count 0, the same archived_through and hash): after a key rotation, before the old key leaves the
   * JWKS, so that verification from the checkpoint keeps working. The latest checkpoint must verify
   * first (a forged one is never re-signed). Null when there is no checkpoint.
   */
  async resignCheckpoint(): Promise<StoredCheckpoint | null> {
    if (!this.checkpoints) throw new WritError('INTERNAL', 're-signing needs a checkpoint signer');
    const signer = this.checkpoints;
    return this.store.readWrite(async (tx) => {
      const last = await tx.receipts.latestCheckpoint();
      if (!last) return null;
      const problem = this.checkpointProblem(last);
      if (problem) throw new WritError('UNPROCESSABLE', `checkpoint ${last.seq} does not verify, so it is not signed again: ${problem}`);
      const payload: CheckpointPayload = { seq: last.seq + 1, archived_through: last.archived_through, hash: last.hash, prev_hash: last.hash, count: 0, at: this.clock.now() };
      const checkpoint = { ...payload, jws: signer.sign(payload) };
      if (!(await tx.receipts.archiveThrough(checkpoint))) throw new WritError('UNPROCESSABLE', `checkpoint ${payload.seq} was recorded meanwhile: not signed again`);
      return checkpoint;
    });
  }

  private async settle(tx: ReceiptTx, receiptId: string, result: SettlementAppend): Promise<Receipt> {
    if (!result.appended && result.reason === 'unknown') throw new WritError('NOT_FOUND', `no receipt '${receiptId}'`);
    const receipt = await this.mustGet(tx, receiptId);
    return result.appended ? receipt : { ...receipt, replayed: true };
  }

  private async mustGet(tx: ReceiptTx, receiptId: string): Promise<Receipt> {
    const receipt = await receiptOf(tx, receiptId);
    if (!receipt) throw new WritError('NOT_FOUND', `no receipt '${receiptId}'`);
    return receipt;
  }
}

async function receiptOf(tx: ReceiptTx, receiptId: string): Promise<Receipt | null> {
  const entries = await tx.receipts.entriesOf(receiptId);
  return entries.length === 0 ? null : foldReceipt(entries);
}

function normalizedIntent(i: Partial<ReceiptIntent> & Pick<ReceiptIntent, 'principal' | 'action' | 'resource_key'>) {
  return {
    principal: i.principal,
    action: i.action,
    resource_key: i.resource_key,
    fields: i.fields ?? [],
    owners: i.owners ?? [],
    authority_epoch: i.authority_epoch ?? null,
    ownership_epoch: i.ownership_epoch ?? null,
    decision_id: i.decision_id ?? null,
    policy_revision: i.policy_revision ?? null,
    graph_revision: i.graph_revision ?? null,
    chain: i.chain ?? [],
    lease_id: i.lease_id ?? null,
    lease_epoch: i.lease_epoch ?? null,
    expected_version: i.expected_version ?? null,
    idempotency_key: i.idempotency_key ?? null,
    request_hash: i.request_hash ?? null,
  };
}

function checkSameRequest(idempotencyKey: string, first: { receipt_id: string; request_hash: string | null }, requestHash: string): void {
  if (first.request_hash !== requestHash) {
    throw new WritError('IDEMPOTENCY_MISMATCH', `Idempotency-Key '${idempotencyKey}' was already used for a different request`, { receipt_id: first.receipt_id });
  }
}
