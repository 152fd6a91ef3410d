import { WritError } from '../errors.js';
import type { PresentedLease, Receipt, ReceiptConflict, ReceiptError, ReceiptStatus, StoredEntry } from './receipt.js';

export interface EntryBody {
  at: number;
  [k: string]: unknown;
}

/**
 * An entry's body as Writ wrote it (a JSON object with its time), or null: it was written by someone
 * else (rewritten and re-hashed in the store). The chain walk reports such an entry as a break.
 */
export function entryBody(e: Pick<StoredEntry, 'body'>): EntryBody | null {
  let v: unknown;
  try {
    v = JSON.parse(e.body);
  } catch {
    return null;
  }
  return typeof v === 'object' && v !== null && !Array.isArray(v) && typeof (v as { at?: unknown }).at === 'number' ? (v as EntryBody) : null;
}

/** The body of an entry a reader needs; RECEIPT_DAMAGED, naming the entry, when it is not one Writ wrote. */
export function readEntryBody(e: Pick<StoredEntry, 'body' | 'seq' | 'chain' | 'pos' | 'receipt_id'>): EntryBody {
  const body = entryBody(e);
  if (body === null) {
    throw new WritError('RECEIPT_DAMAGED', `receipt ${e.receipt_id}: its stored entry seq ${e.seq} (chain ${JSON.stringify(e.chain)}, entry ${e.pos}) is not the JSON object Writ writes: the receipt log was altered outside Writ (writ audit verify names the first break)`, { receipt_id: e.receipt_id, seq: e.seq });
  }
  return body;
}

/** The receipt that a receipt's entries (in seq order, first one an intent or a rejection) add up to. */
export function foldReceipt(entries: readonly StoredEntry[]): Receipt {
  const first = entries[0];
  if (!first) throw new Error('a receipt has at least one entry');
  const start = readEntryBody(first);
  const receipt: Receipt = {
    receipt_id: first.receipt_id,
    coordination_id: first.receipt_id,
    status: first.kind === 'rejected' ? 'REJECTED' : 'PENDING',
    principal: str(start.principal),
    action: str(start.action),
    resource_key: str(start.resource_key),
    fields: arr<string>(start.fields),
    owners: arr<string>(start.owners),
    authority_epoch: num(start.authority_epoch),
    ownership_epoch: num(start.ownership_epoch),
    decision_id: strOrNull(start.decision_id),
    policy_revision: strOrNull(start.policy_revision),
    graph_revision: num(start.graph_revision),
    chain: arr<string>(start.chain),
    lease_id: strOrNull(start.lease_id),
    lease_epoch: num(start.lease_epoch),
    expected_version: num(start.expected_version),
    final_version: null,
    conflicts: arr<ReceiptConflict>(start.conflicts),
    upstream_status: num(start.upstream_status),
    error: (start.error as ReceiptError | undefined) ?? null,
    // Recorded on rejections since Writ keeps it: absent from older entries (and from every other kind).
    presented_lease: (start.presented_lease as PresentedLease | undefined) ?? null,
    idempotency_key: strOrNull(start.idempotency_key),
    request_hash: strOrNull(start.request_hash),
    created_at: start.at,
    completed_at: first.kind === 'rejected' ? start.at : null,
    reconciled: false,
    hash_chain: first.chain,
    prev_hash: first.prev_hash,
    hash: first.hash,
    entries: [],
  };
  for (const e of entries) {
    const body = e === first ? start : readEntryBody(e);
    receipt.entries.push({ seq: e.seq, pos: e.pos, kind: e.kind, at: body.at, prev_hash: e.prev_hash, hash: e.hash });
    receipt.hash = e.hash;
    if (e.kind === 'intent' || e.kind === 'rejected') continue;
    receipt.status = (e.kind === 'completed' ? 'COMPLETED' : e.kind === 'failed' ? 'FAILED' : body.status) as ReceiptStatus;
    receipt.completed_at = body.at;
    if (e.kind === 'reconciled') receipt.reconciled = true;
    if ('final_version' in body) receipt.final_version = num(body.final_version);
    if ('upstream_status' in body) receipt.upstream_status = num(body.upstream_status);
    if ('error' in body) receipt.error = (body.error as ReceiptError | null) ?? null;
    if (Array.isArray(body.conflicts)) receipt.conflicts = [...receipt.conflicts, ...(body.conflicts as ReceiptConflict[])];
  }
  return receipt;
}

const str = (v: unknown): string => (typeof v === 'string' ? v : '');
const strOrNull = (v: unknown): string | null => (typeof v === 'string' ? v : null);
const num = (v: unknown): number | null => (typeof v === 'number' ? v : null);
const arr = <T>(v: unknown): T[] => (Array.isArray(v) ? (v as T[]) : []);
