import type { Migration } from './types.js';

/**
 * Retention of the receipt log: signed checkpoints (append-only), and entries may be deleted only at or
 * below the latest checkpoint's archived_through, which `writ audit archive` records in the same
 * transaction as the delete. Every other delete (and every update) is still refused.
 */
export const receiptCheckpoints: Migration = {
  version: 10,
  name: 'receipt checkpoints: signed cut points below which archived entries may be deleted',
  sql: `
    CREATE TABLE receipt_checkpoints (
      seq              INTEGER PRIMARY KEY,
      archived_through INTEGER NOT NULL,
      hash             TEXT    NOT NULL,
      prev_hash        TEXT    NOT NULL,
      count            INTEGER NOT NULL,
      at               INTEGER NOT NULL,
      jws              TEXT    NOT NULL
    );
    CREATE TRIGGER receipt_checkpoints_no_update BEFORE UPDATE ON receipt_checkpoints
      BEGIN SELECT RAISE(ABORT, 'receipt checkpoints are append-only'); END;
    CREATE TRIGGER receipt_checkpoints_no_delete BEFORE DELETE ON receipt_checkpoints
      BEGIN SELECT RAISE(ABORT, 'receipt checkpoints are append-only'); END;
    DROP TRIGGER receipt_entries_no_delete;
    CREATE TRIGGER receipt_entries_no_delete BEFORE DELETE ON receipt_entries
      WHEN OLD.seq > COALESCE((SELECT archived_through FROM receipt_checkpoints ORDER BY seq DESC LIMIT 1), 0)
      BEGIN SELECT RAISE(ABORT, 'receipt entries are append-only (only entries archived below the latest checkpoint may be deleted)'); END;
  `,
};
