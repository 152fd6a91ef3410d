import type { PostgresMigration } from './types.js';

/**
 * As SQLite's migration 18: the receipts index names the decision each receipt presented, filled in
 * for the receipts already there from their first entry's hashed body (NULL where that body is not the
 * JSON object Writ writes: `writ audit verify` reports that entry anyway).
 */
export const receiptDecisionIndex: PostgresMigration = {
  version: 10,
  name: 'receipts index: the decision each receipt presented',
  sql: `
    ALTER TABLE receipts ADD COLUMN decision_id text;
    CREATE FUNCTION pg_temp.writ_decision_of(body text) RETURNS text LANGUAGE plpgsql AS $$
      BEGIN
        RETURN CASE WHEN json_typeof(body::json -> 'decision_id') = 'string' THEN body::json ->> 'decision_id' END;
      EXCEPTION WHEN others THEN RETURN NULL;
      END $$;
    UPDATE receipts r SET decision_id = pg_temp.writ_decision_of(e.body) FROM receipt_entries e WHERE e.seq = r.first_seq;
    DROP FUNCTION pg_temp.writ_decision_of(text);
    CREATE INDEX receipts_decision ON receipts (decision_id, first_seq);
  `,
};
