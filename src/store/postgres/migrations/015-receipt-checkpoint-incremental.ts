import type { PostgresMigration } from './types.js';

/**
 * The periodic receipt checkpoint without a pass over every chain (ReceiptLog keeps the leaves it signed):
 *
 * - `receipt_entries.xact`: the transaction that appended the entry (set by the column's default, so a
 *   server from before this migration still fills it in). A checkpoint reads the chains that moved since
 *   the snapshot of its previous read as the entries whose transaction that snapshot did not see
 *   (`xact >= its xmin AND NOT pg_visible_in_snapshot(xact, it)`, through the index): appends commit out of
 *   seq order, so a seq watermark would miss one that committed late. Entries from before have none, and
 *   are older than any snapshot a server still running holds (it read its heads in full after starting).
 * - `receipt_checkpoint_turn`: which replica takes the periodic checkpoints (one row: a holder and until
 *   when, by the database's clock), so that one replica checkpoints per interval and another takes over
 *   when it stops renewing.
 */
export const receiptCheckpointIncremental: PostgresMigration = {
  version: 15,
  name: 'receipt checkpoints: the appending transaction of each entry, and whose turn it is to checkpoint',
  sql: `
    ALTER TABLE receipt_entries ADD COLUMN xact xid8;
    ALTER TABLE receipt_entries ALTER COLUMN xact SET DEFAULT pg_current_xact_id();
    CREATE INDEX receipt_entries_xact ON receipt_entries (xact);
    CREATE TABLE receipt_checkpoint_turn (
      id     integer PRIMARY KEY CHECK (id = 1),
      holder text    NOT NULL,
      until  bigint  NOT NULL
    );
  `,
};
