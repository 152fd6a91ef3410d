import type { PostgresMigration } from './types.js';

/**
 * Receipts without one global lock, as SQLite's migration 11: one hash chain per coordination key
 * (`chain` = the resource key, `pos` = the place in it), each with its own head row in `receipt_chains`
 * that only appends to that key lock; `seq` is drawn from a sequence (store-wide order, gaps allowed);
 * signed checkpoints over all chain heads (Merkle root; the leaves that changed stored beside each).
 *
 * Existing entries become the legacy chain ('') as they are (positions = their seqs, version-1 hashes),
 * so they verify exactly as before; its head row is the old global head. Chains are compared in "C"
 * collation: (chain, pos) order is byte order on every server, and the index serves it.
 *
 * Entries are never updated, and deleted only at or below their chain's latest floor (the legacy
 * chain's from the version-1 checkpoints until a version-2 one carries it).
 */
export const receiptChains: PostgresMigration = {
  version: 4,
  name: 'receipt log: one hash chain per coordination key, signed checkpoints over all chain heads',
  sql: `
    ALTER TABLE receipt_entries ADD COLUMN chain text COLLATE "C" NOT NULL DEFAULT '', ADD COLUMN pos bigint;
    ALTER TABLE receipt_entries DISABLE TRIGGER receipt_entries_no_update;
    UPDATE receipt_entries SET pos = seq;
    ALTER TABLE receipt_entries ENABLE TRIGGER receipt_entries_no_update;
    ALTER TABLE receipt_entries ALTER COLUMN pos SET NOT NULL, ALTER COLUMN chain DROP DEFAULT, ADD CONSTRAINT receipt_entries_pos CHECK (pos >= 1);
    CREATE UNIQUE INDEX receipt_entries_chain_pos ON receipt_entries (chain, pos);

    CREATE TABLE receipt_chains (
      chain text   COLLATE "C" PRIMARY KEY,
      pos   bigint NOT NULL CHECK (pos >= 0),
      hash  text   NOT NULL
    );
    INSERT INTO receipt_chains (chain, pos, hash) SELECT '', seq, hash FROM receipt_chain_head WHERE seq > 0;
    CREATE SEQUENCE receipt_entry_seq AS bigint;
    SELECT setval('receipt_entry_seq', (SELECT seq FROM receipt_chain_head) + 1, false);
    DROP TABLE receipt_chain_head;

    CREATE TABLE receipt_head_checkpoints (
      seq      bigint PRIMARY KEY,
      at       bigint NOT NULL,
      chains   bigint NOT NULL,
      root     text   NOT NULL,
      archived bigint NOT NULL,
      jws      text   NOT NULL
    );
    CREATE TABLE receipt_checkpoint_leaves (
      chain      text   COLLATE "C" NOT NULL,
      checkpoint bigint NOT NULL,
      pos        bigint NOT NULL,
      hash       text   NOT NULL,
      floor_pos  bigint NOT NULL,
      floor_hash text   NOT NULL,
      PRIMARY KEY (chain, checkpoint)
    );
    CREATE TRIGGER receipt_head_checkpoints_append_only BEFORE UPDATE OR DELETE ON receipt_head_checkpoints
      FOR EACH ROW EXECUTE FUNCTION writ_receipt_checkpoints_append_only();
    CREATE TRIGGER receipt_checkpoint_leaves_append_only BEFORE UPDATE OR DELETE ON receipt_checkpoint_leaves
      FOR EACH ROW EXECUTE FUNCTION writ_receipt_checkpoints_append_only();

    CREATE OR REPLACE FUNCTION writ_receipt_entries_delete_archived() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF OLD.pos <= coalesce(
             (SELECT floor_pos FROM receipt_checkpoint_leaves WHERE chain = OLD.chain ORDER BY checkpoint DESC LIMIT 1),
             CASE WHEN OLD.chain = '' THEN (SELECT archived_through FROM receipt_checkpoints ORDER BY seq DESC LIMIT 1) END,
             0) THEN RETURN OLD; END IF;
        RAISE EXCEPTION 'receipt entries are append-only (only entries at or below their chain''s archive floor may be deleted)';
      END $$;
  `,
};
