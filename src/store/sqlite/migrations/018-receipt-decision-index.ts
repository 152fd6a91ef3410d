import type { Migration } from './types.js';

/**
 * The receipts index names the decision each receipt presented, so receipts can be found by decision
 * (GET /v1/receipts?decision_id=, `writ receipts --decision`) and a replayed decision's refusal can name
 * the write that used it. Filled in for the receipts already there from their first entry (its hashed
 * body: the intent's or the rejection's `decision_id`); a body that is not the JSON object Writ writes
 * leaves it NULL (`writ audit verify` reports that entry anyway). `writ audit verify` compares the
 * column with the entries like every other field a query filters on.
 */
export const receiptDecisionIndex: Migration = {
  version: 18,
  name: 'receipts index: the decision each receipt presented',
  sql: `
    ALTER TABLE receipts ADD COLUMN decision_id TEXT;
    UPDATE receipts SET decision_id = (
      SELECT CASE WHEN json_valid(e.body) THEN CASE WHEN json_type(e.body, '$.decision_id') = 'text' THEN json_extract(e.body, '$.decision_id') END END
        FROM receipt_entries e WHERE e.seq = receipts.first_seq);
    CREATE INDEX receipts_decision ON receipts (decision_id, first_seq);
  `,
};
