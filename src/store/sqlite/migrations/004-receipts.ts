import type { Migration } from './types.js';

/**
 * The receipt log: hash-chained entries (append-only; triggers refuse UPDATE and DELETE, and the
 * unique prev_hash makes a fork impossible even for a writer that skipped the immediate transaction)
 * and a receipts index derived from them in the same transaction (filters, idempotency keys).
 */
export const receipts: Migration = {
  version: 4,
  name: 'receipt log (hash-chained entries) and receipts index',
  sql: `
    CREATE TABLE receipt_entries (
      seq        INTEGER PRIMARY KEY,
      receipt_id TEXT    NOT NULL,
      kind       TEXT    NOT NULL CHECK (kind IN ('intent', 'completed', 'failed', 'rejected', 'reconciled')),
      body       TEXT    NOT NULL,
      prev_hash  TEXT    NOT NULL,
      hash       TEXT    NOT NULL
    );
    CREATE INDEX receipt_entries_receipt ON receipt_entries (receipt_id, seq);
    CREATE UNIQUE INDEX receipt_entries_prev_hash ON receipt_entries (prev_hash);
    CREATE TRIGGER receipt_entries_no_update BEFORE UPDATE ON receipt_entries
      BEGIN SELECT RAISE(ABORT, 'receipt entries are append-only'); END;
    CREATE TRIGGER receipt_entries_no_delete BEFORE DELETE ON receipt_entries
      BEGIN SELECT RAISE(ABORT, 'receipt entries are append-only'); END;

    CREATE TABLE receipts (
      receipt_id      TEXT    PRIMARY KEY,
      principal       TEXT    NOT NULL,
      resource_key    TEXT    NOT NULL,
      status          TEXT    NOT NULL CHECK (status IN ('PENDING', 'COMPLETED', 'FAILED', 'REJECTED')),
      idempotency_key TEXT,
      request_hash    TEXT,
      created_at      INTEGER NOT NULL,
      completed_at    INTEGER,
      first_seq       INTEGER NOT NULL,
      last_seq        INTEGER NOT NULL
    );
    CREATE UNIQUE INDEX receipts_idempotency ON receipts (principal, idempotency_key) WHERE idempotency_key IS NOT NULL;
    CREATE INDEX receipts_resource ON receipts (resource_key, first_seq);
    CREATE INDEX receipts_principal ON receipts (principal, first_seq);
    CREATE INDEX receipts_status ON receipts (status, first_seq);
  `,
};
