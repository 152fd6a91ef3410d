import { GENESIS_HASH } from '../../../audit/hash-chain.js';
import { catchUpGraphChain } from '../graph-event-log.js';
import type { Migration } from './types.js';

/**
 * The graph's event log becomes a hash chain (src/audit/graph-chain.ts): each event row gets its hash,
 * and `graph_chain_head` keeps the last hashed revision and its hash, so an append links without
 * reading the log back; a checkpoint (version 3) signs that head, kept beside it in
 * receipt_head_checkpoints. The events already there are hashed here, at the upgrade: what was done to
 * them before it is not detectable.
 *
 * A Writ from before this migration still running on the file (several processes may share it)
 * appends events without a hash: the update trigger now lets a missing hash be filled in (nothing else
 * of an event may change), and the next append of this Writ hashes them before its own.
 */
export const graphEventChain: Migration = {
  version: 20,
  name: 'graph events: hash-chained (tamper evidence), the chain head kept beside the log',
  sql: `
    ALTER TABLE graph_events ADD COLUMN hash TEXT;
    CREATE TABLE graph_chain_head (
      only_row INTEGER PRIMARY KEY CHECK (only_row = 1),
      revision INTEGER NOT NULL,
      hash     TEXT    NOT NULL
    );
    INSERT INTO graph_chain_head (only_row, revision, hash) VALUES (1, 0, '${GENESIS_HASH}');
    ALTER TABLE receipt_head_checkpoints ADD COLUMN graph_revision INTEGER;
    ALTER TABLE receipt_head_checkpoints ADD COLUMN graph_hash TEXT;
    DROP TRIGGER graph_events_no_update;
    CREATE TRIGGER graph_events_no_update BEFORE UPDATE ON graph_events
      WHEN NOT (OLD.hash IS NULL AND NEW.hash IS NOT NULL AND NEW.revision = OLD.revision AND NEW.at = OLD.at
                AND NEW.actor = OLD.actor AND NEW.type = OLD.type AND NEW.payload = OLD.payload)
      BEGIN SELECT RAISE(ABORT, 'graph events are append-only'); END;
  `,
  run: (db) => catchUpGraphChain(db),
};
