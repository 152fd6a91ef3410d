import type { Migration } from './types.js';

/** Migration 18's backfill: the decision the entry at `seq` names, NULL where its body is not Writ's JSON object. */
const DECISION_OF_FIRST_ENTRY = (seq: string) => `SELECT CASE WHEN json_valid(e.body) THEN CASE WHEN json_type(e.body, '$.decision_id') = 'text' THEN json_extract(e.body, '$.decision_id') END END
       FROM receipt_entries e WHERE e.seq = ${seq}`;

/**
 * A `writ serve` from before migration 18 still running on a file a newer Writ migrated appends
 * receipts whose index row leaves decision_id out: `writ audit verify` took them for altered receipts
 * and the decision filter missed them. The file now fills it in from the receipt's first entry (written
 * just before the row, in the same transaction), as migration 18's backfill did: NULL where the body is
 * not the JSON object Writ writes. The trigger fires only for a row that arrives without a decision, and
 * writes only when the entry names one; a row this Writ writes with its decision costs nothing. The rows
 * an old process wrote between migration 18 and this one are mended here.
 */
export const receiptDecisionFromOldWriters: Migration = {
  version: 19,
  name: 'receipts index: the decision filled in by the database for writers that leave it out',
  sql: `
    CREATE TRIGGER receipts_decision_fill AFTER INSERT ON receipts
      WHEN NEW.decision_id IS NULL AND (${DECISION_OF_FIRST_ENTRY('NEW.first_seq')}) IS NOT NULL
    BEGIN
      UPDATE receipts SET decision_id = (${DECISION_OF_FIRST_ENTRY('NEW.first_seq')}) WHERE receipt_id = NEW.receipt_id;
    END;
    UPDATE receipts SET decision_id = (${DECISION_OF_FIRST_ENTRY('receipts.first_seq')}) WHERE decision_id IS NULL;
  `,
};
