import type { PostgresMigration } from './types.js';

/**
 * Retention of the receipt log, as SQLite's migration 10: signed checkpoints (append-only), and entries
 * may be deleted only at or below the latest checkpoint's archived_through; updates are still refused.
 */
export const receiptCheckpoints: PostgresMigration = {
  version: 3,
  name: 'receipt checkpoints: signed cut points below which archived entries may be deleted',
  sql: `
    CREATE TABLE receipt_checkpoints (
      seq              bigint PRIMARY KEY,
      archived_through bigint NOT NULL,
      hash             text   NOT NULL,
      prev_hash        text   NOT NULL,
      count            bigint NOT NULL,
      at               bigint NOT NULL,
      jws              text   NOT NULL
    );
    CREATE FUNCTION writ_receipt_checkpoints_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN RAISE EXCEPTION 'receipt checkpoints are append-only'; END $$;
    CREATE TRIGGER receipt_checkpoints_append_only BEFORE UPDATE OR DELETE ON receipt_checkpoints
      FOR EACH ROW EXECUTE FUNCTION writ_receipt_checkpoints_append_only();

    DROP TRIGGER receipt_entries_append_only ON receipt_entries;
    CREATE TRIGGER receipt_entries_no_update BEFORE UPDATE ON receipt_entries
      FOR EACH ROW EXECUTE FUNCTION writ_receipt_entries_append_only();
    CREATE FUNCTION writ_receipt_entries_delete_archived() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF OLD.seq <= coalesce((SELECT archived_through FROM receipt_checkpoints ORDER BY seq DESC LIMIT 1), 0) THEN RETURN OLD; END IF;
        RAISE EXCEPTION 'receipt entries are append-only (only entries archived below the latest checkpoint may be deleted)';
      END $$;
    CREATE TRIGGER receipt_entries_no_delete BEFORE DELETE ON receipt_entries
      FOR EACH ROW EXECUTE FUNCTION writ_receipt_entries_delete_archived();
  `,
};
