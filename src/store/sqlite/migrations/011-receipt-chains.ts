import type { Migration } from './types.js';

const GENESIS = '0'.repeat(64);

/**
 * Receipts without one global chain: one hash chain per coordination key (`chain` = the resource key,
 * `pos` = the place in it), under signed checkpoints over all chain heads (Merkle root; the leaves that
 * changed are stored beside each checkpoint). `seq` stays the store-wide order that pages follow.
 *
 * Existing entries become the legacy chain ('') as they are: their positions are their seqs and they
 * keep their version-1 hashes, so the chain verifies exactly as before and nothing is re-signed; the
 * latest version-1 checkpoint still gives its floor until a version-2 checkpoint carries it. The table
 * is rebuilt (its append-only triggers refuse the UPDATE that adding the columns would need).
 *
 * Triggers: an entry must extend its own chain (pos = the chain's last + 1, prev_hash = that entry's
 * hash); entries are never updated, and deleted only at or below their chain's latest floor.
 */
export const receiptChains: Migration = {
  version: 11,
  name: 'receipt log: one hash chain per coordination key, signed checkpoints over all chain heads',
  sql: `
    CREATE TABLE receipt_entries_v11 (
      seq        INTEGER PRIMARY KEY,
      chain      TEXT    NOT NULL,
      pos        INTEGER NOT NULL CHECK (pos >= 1),
      receipt_id TEXT    NOT NULL,
      kind       TEXT    NOT NULL CHECK (kind IN ('intent', 'completed', 'failed', 'rejected', 'reconciled')),
      body       TEXT    NOT NULL,
      prev_hash  TEXT    NOT NULL,
      hash       TEXT    NOT NULL
    );
    INSERT INTO receipt_entries_v11 (seq, chain, pos, receipt_id, kind, body, prev_hash, hash)
      SELECT seq, '', seq, receipt_id, kind, body, prev_hash, hash FROM receipt_entries;
    DROP TABLE receipt_entries;
    ALTER TABLE receipt_entries_v11 RENAME TO receipt_entries;
    CREATE UNIQUE INDEX receipt_entries_chain_pos ON receipt_entries (chain, pos);

    CREATE TABLE receipt_head_checkpoints (
      seq      INTEGER PRIMARY KEY,
      at       INTEGER NOT NULL,
      chains   INTEGER NOT NULL,
      root     TEXT    NOT NULL,
      archived INTEGER NOT NULL,
      jws      TEXT    NOT NULL
    );
    CREATE TABLE receipt_checkpoint_leaves (
      chain      TEXT    NOT NULL,
      checkpoint INTEGER NOT NULL,
      pos        INTEGER NOT NULL,
      hash       TEXT    NOT NULL,
      floor_pos  INTEGER NOT NULL,
      floor_hash TEXT    NOT NULL,
      PRIMARY KEY (chain, checkpoint)
    ) WITHOUT ROWID;
    CREATE TRIGGER receipt_head_checkpoints_no_update BEFORE UPDATE ON receipt_head_checkpoints
      BEGIN SELECT RAISE(ABORT, 'receipt checkpoints are append-only'); END;
    CREATE TRIGGER receipt_head_checkpoints_no_delete BEFORE DELETE ON receipt_head_checkpoints
      BEGIN SELECT RAISE(ABORT, 'receipt checkpoints are append-only'); END;
    CREATE TRIGGER receipt_checkpoint_leaves_no_update BEFORE UPDATE ON receipt_checkpoint_leaves
      BEGIN SELECT RAISE(ABORT, 'receipt checkpoints are append-only'); END;
    CREATE TRIGGER receipt_checkpoint_leaves_no_delete BEFORE DELETE ON receipt_checkpoint_leaves
      BEGIN SELECT RAISE(ABORT, 'receipt checkpoints are append-only'); END;

    CREATE TRIGGER receipt_entries_extend_chain BEFORE INSERT ON receipt_entries
      WHEN NEW.pos IS NOT COALESCE((SELECT MAX(pos) FROM receipt_entries WHERE chain = NEW.chain), 0) + 1
        OR NEW.prev_hash IS NOT COALESCE((SELECT hash FROM receipt_entries WHERE chain = NEW.chain AND pos = NEW.pos - 1), '${GENESIS}')
      BEGIN SELECT RAISE(ABORT, 'a receipt entry must extend its chain: pos = the chain''s last + 1 and prev_hash = that entry''s hash'); END;
    CREATE TRIGGER receipt_entries_no_update BEFORE UPDATE ON receipt_entries
      BEGIN SELECT RAISE(ABORT, 'receipt entries are append-only'); END;
    CREATE TRIGGER receipt_entries_no_delete BEFORE DELETE ON receipt_entries
      WHEN OLD.pos > COALESCE(
        (SELECT floor_pos FROM receipt_checkpoint_leaves WHERE chain = OLD.chain ORDER BY checkpoint DESC LIMIT 1),
        CASE WHEN OLD.chain = '' THEN (SELECT archived_through FROM receipt_checkpoints ORDER BY seq DESC LIMIT 1) END,
        0)
      BEGIN SELECT RAISE(ABORT, 'receipt entries are append-only (only entries at or below their chain''s archive floor may be deleted)'); END;
  `,
};
