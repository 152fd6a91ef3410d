import { foldReceipt } from './fold.js';
import type { StoredEntry } from './receipt.js';
import type { IndexedReceipt } from './repository.js';

/** The index fields a query filters on or a reader sees, and that must be what the hashed entries say. */
const CHECKED = ['principal', 'resource_key', 'status', 'idempotency_key', 'request_hash', 'decision_id', 'created_at', 'completed_at'] as const;
const FIRST_ENTRY_FIELDS = ['principal', 'resource_key', 'idempotency_key', 'request_hash', 'decision_id', 'created_at'] as const;

export interface IndexProblem {
  entry: StoredEntry;
  problem: string;
}

/**
 * Checks the receipts index against hashed entries (already verified in their chain), both ways:
 * - each receipt opened by an entry of `checked` (its intent or rejection) has exactly one index row,
 *   naming that entry as its first and, as its last, a settlement of the same receipt in the same chain
 *   (or the first again), and every field a query filters on (principal, resource, status, idempotency
 *   key, request hash, decision, times) is what those entries add up to;
 * - each settlement of `checked` is the last entry its receipt's row names.
 * A named settlement that is not in the store at all is left to the chain walk (a missing entry) and to
 * `indexOrphans` (a row naming nothing); only what the first entry says is compared then.
 */
export function checkIndexRows(checked: readonly StoredEntry[], rows: readonly IndexedReceipt[]): IndexProblem | undefined {
  const byId = new Map(rows.map((r) => [r.row.receipt_id, r]));
  for (const e of checked) {
    const indexed = byId.get(e.receipt_id);
    const says = (what: string): IndexProblem => ({ entry: e, problem: `receipt ${e.receipt_id}: ${what} (the receipts index was altered)` });
    const opens = e.kind === 'intent' || e.kind === 'rejected';
    if (!indexed) return says(opens ? `its entry seq ${e.seq} has no row in the receipts index, so queries cannot find it` : `its settlement seq ${e.seq} has no row in the receipts index`);
    const { row, entries } = indexed;
    if (!opens) {
      if (row.last_seq !== e.seq) return says(`its settlement is entry seq ${e.seq}, its index row names ${row.last_seq === row.first_seq ? 'none (it shows the receipt unsettled)' : `seq ${row.last_seq}`}`);
      const first = entries.find((x) => x.seq === row.first_seq);
      if (first && first.chain !== e.chain) return says(`its settlement seq ${e.seq} is in chain ${JSON.stringify(e.chain)}, its first entry in ${JSON.stringify(first.chain)} (an entry was moved)`);
      continue;
    }
    if (row.first_seq !== e.seq) return says(`its index row names entry seq ${row.first_seq} as its first, the chain has it at seq ${e.seq}`);
    const first = entries.find((x) => x.seq === row.first_seq);
    if (!first || first.hash !== e.hash) return says(`its index row does not lead to its first entry seq ${e.seq}`);
    let fields: readonly (typeof CHECKED)[number][] = CHECKED;
    let folded = [first];
    if (row.last_seq !== row.first_seq) {
      const last = entries.find((x) => x.seq === row.last_seq);
      if (!last) fields = FIRST_ENTRY_FIELDS;
      else if (last.receipt_id !== row.receipt_id || last.kind === 'intent' || last.kind === 'rejected' || last.chain !== first.chain) {
        return says(`its index row names entry seq ${row.last_seq} as its settlement, which is not a settlement of this receipt`);
      } else folded = [first, last];
    }
    const receipt = foldReceipt(folded);
    for (const field of fields) {
      if (row[field] !== receipt[field]) return says(`its index row says ${field} ${JSON.stringify(row[field])}, its entries say ${JSON.stringify(receipt[field])}`);
    }
  }
  return undefined;
}
