import type { Migration } from './types.js';

/**
 * `writ store copy` records here that the file was moved to PostgreSQL (where, masked, and when): the
 * database is the store from then on, and a server opening the file refuses it (STORE_MOVED) instead of
 * issuing fencing epochs the database issued. `writ lease bump-epochs` on the file, the deliberate way
 * back, records when and why the refusal was lifted; the row stays.
 */
export const storeMoves: Migration = {
  version: 14,
  name: 'store_moves: a file copied to PostgreSQL is refused until deliberately taken back',
  sql: `
    CREATE TABLE store_moves (
      seq           INTEGER PRIMARY KEY,
      at            INTEGER NOT NULL,
      moved_to      TEXT    NOT NULL,
      lifted_at     INTEGER,
      lifted_by     TEXT,
      lifted_reason TEXT
    );
  `,
};
