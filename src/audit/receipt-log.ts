import { randomUUID } from 'node:crypto';
import type { Clock } from '../clock.js';
import { WritError } from '../errors.js';
import { canonicalJson } from './canonical-json.js';
import { foldReceipt } from './fold.js';
import { ChainVerifier, type ReceiptChainVerdict } from './hash-chain.js';
import type { Receipt, ReceiptCompletion, ReceiptIntent, ReceiptPage, ReceiptQuery, ReceiptRejection, ReconcileOutcome } from './receipt.js';
import type { ReceiptFilter, ReceiptRepository, SettlementAppend } from './repository.js';

/** Entries read and checked per step of a chain verification (8–15 ms of work on these machines). */
export const VERIFY_CHUNK = 1_000;

export interface ReceiptLogOptions {
  repository: ReceiptRepository;
  clock: Clock;
  /** New receipt ids; defaults to `rcpt_<uuid>`. */
  newId?: () => string;
}

const DEFAULT_LIMIT = 100;
const MAX_LIMIT = 1000;

/**
 * The append-only, hash-chained receipt log. An intent is written before a write is forwarded and
 * settled after it, so a crash leaves a visible PENDING receipt, never a silent gap. Refused requests
 * are recorded too, as one REJECTED entry.
 */
export class ReceiptLog {
  private readonly repo: ReceiptRepository;
  private readonly clock: Clock;
  private readonly newId: () => string;

  constructor(options: ReceiptLogOptions) {
    this.repo = options.repository;
    this.clock = options.clock;
    this.newId = options.newId ?? (() => `rcpt_${randomUUID()}`);
  }

  /**
   * Writes the intent entry (status PENDING). If this principal already used `idempotency_key`:
   * with the same request_hash the existing receipt is returned with `replayed: true` and nothing is
   * written; with another request_hash it throws IDEMPOTENCY_MISMATCH.
   */
  recordIntent(intent: ReceiptIntent): Receipt {
    const at = this.clock.now();
    const receiptId = intent.receipt_id ?? this.newId();
    const body = { at, ...normalizedIntent(intent) };
    const result = this.repo.appendIntent(
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
    return { ...this.mustGet(result.existing.receipt_id), replayed: true };
  }

  /**
   * Settles a PENDING receipt as COMPLETED or FAILED. First settlement wins: if the receipt is already
   * settled (e.g. reconciled by another process) nothing is written and it is returned with `replayed: true`.
   */
  complete(receiptId: string, completion: ReceiptCompletion): Receipt {
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
    return this.settle(receiptId, this.repo.appendSettlement({ receipt_id: receiptId, kind, body: canonicalJson(body) }, completion.status, at));
  }

  /** Settles a PENDING receipt from what the upstream says (after a crash or a timeout). Same first-wins rule. */
  reconcile(receiptId: string, outcome: ReconcileOutcome): Receipt {
    const at = this.clock.now();
    const body =
      outcome.status === 'COMPLETED'
        ? { at, status: outcome.status, final_version: outcome.final_version, upstream_status: outcome.upstream_status ?? null, error: null, note: outcome.note }
        : { at, status: outcome.status, error: outcome.error, upstream_status: outcome.upstream_status ?? null, note: outcome.note };
    return this.settle(receiptId, this.repo.appendSettlement({ receipt_id: receiptId, kind: 'reconciled', body: canonicalJson(body) }, outcome.status, at));
  }

  /** Records a refused request as a single REJECTED entry. */
  recordRejection(rejection: ReceiptRejection): Receipt {
    const at = this.clock.now();
    const receiptId = this.newId();
    const body = {
      at,
      ...normalizedIntent({ ...rejection, request_hash: rejection.request_hash ?? undefined }),
      error: rejection.error,
      conflicts: rejection.conflicts ?? [],
      upstream_status: rejection.upstream_status ?? null,
    };
    const entry = this.repo.appendRejection(
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
  findReplay(principal: string, idempotencyKey: string, requestHash: string): Receipt | null {
    const found = this.repo.findByIdempotencyKey(principal, idempotencyKey);
    if (!found) return null;
    checkSameRequest(idempotencyKey, found, requestHash);
    return this.mustGet(found.receipt_id);
  }

  get(receiptId: string): Receipt | null {
    const entries = this.repo.entriesOf(receiptId);
    return entries.length === 0 ? null : foldReceipt(entries);
  }

  query(q: ReceiptQuery = {}): ReceiptPage {
    return this.page({ resource: q.resource, principal: q.principal, status: q.status, after: q.after }, q.limit ?? DEFAULT_LIMIT);
  }

  /** Receipts still PENDING, oldest first; `createdAtOrBefore` leaves out writes that may still be in flight. */
  pending(options: { createdAtOrBefore?: number; after?: number; limit?: number } = {}): ReceiptPage {
    return this.page({ status: 'PENDING', createdAtOrBefore: options.createdAtOrBefore, after: options.after }, options.limit ?? MAX_LIMIT);
  }

  /** One page of receipts; asks for one more than the page to know whether there is a next one. */
  private page(filter: Omit<ReceiptFilter, 'limit'>, requested: number): ReceiptPage {
    const limit = Math.min(Math.max(1, Math.floor(requested)), MAX_LIMIT);
    const found = this.repo.find({ ...filter, limit: limit + 1 });
    const page = found.slice(0, limit);
    return { receipts: page.map((f) => foldReceipt(f.entries)), next: found.length > limit ? page[page.length - 1]!.first_seq : null };
  }

  /**
   * Walks the whole chain from disk, in chunks, and reports the first entry that is missing, altered
   * or out of place. A cut tail is detected against the receipts index; compare `head` with a
   * previously published head to detect a cut of both. Synchronous: for the CLI. A server calls
   * `verifyChainYielding`, which lets other requests run between chunks.
   */
  verifyChain(): ReceiptChainVerdict {
    const steps = this.verifySteps();
    for (;;) {
      const step = steps.next();
      if (step.done) return step.value;
    }
  }

  /** The same check, awaiting `pause()` between chunks (default: one turn of the event loop). */
  async verifyChainYielding(pause: () => Promise<void> = () => new Promise((resolve) => setImmediate(resolve))): Promise<ReceiptChainVerdict> {
    const steps = this.verifySteps();
    for (;;) {
      const step = steps.next();
      if (step.done) return step.value;
      await pause();
    }
  }

  /** Yields after each chunk of VERIFY_CHUNK entries; returns the verdict. Entries appended meanwhile are checked too. */
  private *verifySteps(): Generator<void, ReceiptChainVerdict> {
    // Read the index first: entries and index are written together, so a later scan sees at least this much.
    const indexedHead = this.repo.indexedHead();
    const verifier = new ChainVerifier();
    for (;;) {
      const chunk = this.repo.entriesAfter(verifier.verified, VERIFY_CHUNK);
      const bad = verifier.feed(chunk);
      if (bad) return bad;
      if (chunk.length < VERIFY_CHUNK) return verifier.finish(indexedHead);
      yield;
    }
  }

  private settle(receiptId: string, result: SettlementAppend): Receipt {
    if (!result.appended && result.reason === 'unknown') throw new WritError('NOT_FOUND', `no receipt '${receiptId}'`);
    const receipt = this.mustGet(receiptId);
    return result.appended ? receipt : { ...receipt, replayed: true };
  }

  private mustGet(receiptId: string): Receipt {
    const receipt = this.get(receiptId);
    if (!receipt) throw new WritError('NOT_FOUND', `no receipt '${receiptId}'`);
    return receipt;
  }
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
