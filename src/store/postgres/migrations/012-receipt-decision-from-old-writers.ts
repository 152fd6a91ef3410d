import type { PostgresMigration } from './types.js';

/**
 * A replica still running a Writ from before migration 10 (a rolling upgrade) appends receipts whose
 * index row leaves decision_id out: `writ audit verify` took them for altered receipts and the decision
 * filter missed them. The database now fills it in from the receipt's first entry, as migration 10's
 * backfill did (`writ_receipt_decision_of`: NULL where the body is not the JSON object Writ writes).
 *
 * An AFTER trigger, not a BEFORE one: the old statement inserts the index row before the entry (the
 * entry's CTE reads the row's RETURNING), and an AFTER row trigger runs once the whole statement is done,
 * when both are there. It fires only for a row that arrives without a decision (WHEN), and writes only
 * when the entry names one: a row this Writ writes with its decision costs nothing, one without (a
 * refusal that presented none) one primary-key probe of the entry and a parse of its body. The row is the
 * inserting transaction's own, so the UPDATE waits on no one.
 *
 * The rows old replicas wrote between migration 10 and this one are mended here, after the trigger is
 * made: CREATE TRIGGER takes a lock that waits for every transaction inserting into receipts and holds
 * off new ones until this commits, so no row falls between the mending and the trigger.
 */
export const receiptDecisionFromOldWriters: PostgresMigration = {
  version: 12,
  name: 'receipts index: the decision filled in by the database for writers that leave it out',
  sql: `
    CREATE FUNCTION writ_receipt_decision_of(body text) RETURNS text LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
      BEGIN
        RETURN CASE WHEN json_typeof(body::json -> 'decision_id') = 'string' THEN body::json ->> 'decision_id' END;
      EXCEPTION WHEN others THEN RETURN NULL;
      END $$;
    CREATE FUNCTION writ_receipt_decision_fill() RETURNS trigger LANGUAGE plpgsql AS $$
      DECLARE
        v_decision text;
      BEGIN
        SELECT writ_receipt_decision_of(e.body) INTO v_decision FROM receipt_entries e WHERE e.seq = NEW.first_seq;
        IF v_decision IS NOT NULL THEN
          UPDATE receipts SET decision_id = v_decision WHERE receipt_id = NEW.receipt_id AND decision_id IS NULL;
        END IF;
        RETURN NULL;
      END $$;
    CREATE TRIGGER receipts_decision_fill AFTER INSERT ON receipts
      FOR EACH ROW WHEN (NEW.decision_id IS NULL) EXECUTE FUNCTION writ_receipt_decision_fill();
    UPDATE receipts r SET decision_id = writ_receipt_decision_of(e.body)
      FROM receipt_entries e
     WHERE e.seq = r.first_seq AND r.decision_id IS NULL AND writ_receipt_decision_of(e.body) IS NOT NULL;
  `,
};
