import type { Migration } from './types.js';

/**
 * A one-row table the checkpoint worker updates right after a checkpoint has copied the whole WAL into
 * the database file (src/store/sqlite/checkpointer.ts). The first write after that restarts the WAL from
 * its start, and SQLite syncs the new WAL header inside that write: this makes it the worker's, on its
 * own thread, instead of a request's commit on the event loop.
 */
export const walRestarts: Migration = {
  version: 12,
  name: 'wal_restarts: the checkpoint worker restarts the WAL off the event loop',
  sql: `
    CREATE TABLE wal_restarts (
      id       INTEGER PRIMARY KEY CHECK (id = 1),
      restarts INTEGER NOT NULL
    );
    INSERT INTO wal_restarts (id, restarts) VALUES (1, 0);
  `,
};
