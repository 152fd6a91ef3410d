import type { Migration } from './types.js';

/**
 * Which process takes the periodic receipt checkpoints when several serve one file (one row: a holder and
 * until when, by the machine's clock, which all of them share): one checkpoints per interval, another takes
 * over when it stops renewing. (The chains that moved since a checkpoint are found by seq: on SQLite seqs
 * are drawn under the one writer's lock, so they commit in order.)
 */
export const receiptCheckpointTurn: Migration = {
  version: 22,
  name: 'receipt checkpoints: whose turn it is to checkpoint',
  sql: `
    CREATE TABLE receipt_checkpoint_turn (
      id     INTEGER PRIMARY KEY CHECK (id = 1),
      holder TEXT    NOT NULL,
      until  INTEGER NOT NULL
    );
  `,
};
