import type { Migration } from './types.js';

/**
 * `writ store copy` marks the file before the database commits the copy (`pending` = 1), and confirms
 * the mark once it has (0): killed between the two, the file is refused all the same, and the copy run
 * again on it finishes the move or confirms the one the database committed. Rows written before this
 * migration (and rows a restore carries over from a replaced file) are moves that were committed.
 */
export const storeMovePending: Migration = {
  version: 16,
  name: 'store_moves.pending: a move marked before the database committed it, until confirmed',
  sql: `
    ALTER TABLE store_moves ADD COLUMN pending INTEGER NOT NULL DEFAULT 0 CHECK (pending IN (0, 1));
  `,
};
