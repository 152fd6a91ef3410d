import { foldReceipt } from './fold.js';
import type { StoredEntry } from './receipt.js';
import type { IndexedReceipt } from './repository.js';

/** The index fields a query filters on or a reader sees, and that must be what the hashed entries say. */
const CHECKED = ['principal', 'resource_key', 'status', 'idempotency_key', 'request_hash', 'created_at', 'completed_at'] as const;
const FIRST_ENTRY_FIELDS = ['principal', 'resource_key', 'idempotency_key', 'request_hash', 'created_at'] as const;

/**
 * Checks the receipts index against the hashed entries: each receipt opened by `firsts` (its intent or
 * rejection, already verified in the chain) must have exactly one index row, naming that entry as its
 * first and, as its last, a settling entry of the same receipt (or the first again); and every field
 * a query filters on (principal, resource, status, idempotency key, request hash, times) must be what
 * those entries add up to. Returns the problem and the seq it concerns, or undefined.
 */
export function checkIndexRows(firsts: readonly StoredEntry[], rows: readonly IndexedReceipt[], upTo: number): { seq: number; problem: string } | undefined {
  const byId = new Map(rows.map((r) => [r.row.receipt_id, r]));
  for (const first of firsts) {
    const indexed = byId.get(first.receipt_id);
    const says = (what: string) => ({ seq: first.seq, problem: `receipt ${first.receipt_id}: ${what} (the receipts index was altered)` });
    if (!indexed) return says('its entry ' + first.seq + ' has no row in the receipts index, so queries cannot find it');
    const { row, entries } = indexed;
    if (row.first_seq !== first.seq) return says(`its index row names entry ${row.first_seq} as its first, the chain has it at ${first.seq}`);
    const named = entries.filter((e) => e.seq === row.first_seq || e.seq === row.last_seq);
    const last = named[named.length - 1];
    if (named[0]?.seq !== first.seq || named[0].hash !== first.hash) return says(`its index row does not lead to its first entry ${first.seq}`);
    let fields: readonly (typeof CHECKED)[number][] = CHECKED;
    if (row.last_seq !== row.first_seq && row.last_seq > upTo && last?.seq !== row.last_seq) {
      // A settlement beyond the entries checked so far that is not there: the chain walk reports the
      // missing entry itself (a cut tail, a gap); here only what the first entry says is compared.
      fields = FIRST_ENTRY_FIELDS;
    } else if (row.last_seq !== row.first_seq) {
      if (!last || last.seq !== row.last_seq) return says(`its index row names entry ${row.last_seq}, which does not exist`);
      if (last.receipt_id !== row.receipt_id || last.kind === 'intent' || last.kind === 'rejected') {
        return says(`its index row names entry ${row.last_seq} as its settlement, which is not a settlement of this receipt`);
      }
    }
    const folded = foldReceipt(fields !== CHECKED || row.last_seq === row.first_seq ? [first] : [first, last!]);
    for (const field of fields) {
      if (row[field] !== folded[field]) {
        return says(`its index row says ${field} ${JSON.stringify(row[field])}, its entries say ${JSON.stringify(folded[field])}`);
      }
    }
  }
  return undefined;
}
