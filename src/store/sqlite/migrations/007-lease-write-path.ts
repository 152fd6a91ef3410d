import type { Migration } from './types.js';

/**
 * Fewer pages written per lease operation (every page a commit dirties is a WAL frame written and
 * synced, then copied again by the checkpoint). Measured with bench/lease.ts; see bench/RESULTS.md.
 *
 * - `leases_holder` (holder, state): no query reads it, and every acquire and release moved an entry
 *   in it on a page of its own. Dropped.
 * - `leases_token` (token_hash): one entry on a random page per acquisition, forever. A lease's id
 *   is now derived from its token (src/lease/token.ts), so the fence finds the lease of a token by
 *   primary key and then compares the stored hash. Tokens issued before this migration do not carry
 *   their lease id; their hashes move to `lease_legacy_tokens`, which nothing new is written to.
 * - `lease_keys_lease` (lease_id): releases, renewals and preemptions now reach a lease's keys by
 *   primary key, from the lease's own `resources`. Dropped.
 * - `lease_keys_holder`: only keys with a recorded holder (the only ones a holder filter can match),
 *   so a release deletes an entry instead of moving it.
 * - `lease_history_key` (key, seq): one entry per event at the end of its key's range, i.e. on a page
 *   of its own per key, the largest cost left. Replaced by a chain: each event records the previous
 *   event of its key (`prev_seq`) and each key its latest event (`lease_keys.last_seq`), kept by a
 *   trigger in the inserting statement, so the history of a key is read newest to oldest by primary
 *   key (O(events of the key), src/store/sqlite/lease-repository.ts) and writing an event dirties only
 *   the history's last page and the key's row, which the operation writes anyway. The table is rebuilt
 *   for the new column and without AUTOINCREMENT: nothing deletes from it, so INTEGER PRIMARY KEY
 *   already hands out ever-growing seqs, without the sqlite_sequence update per event.
 */
export const leaseWritePath: Migration = {
  version: 7,
  name: 'lease write path: token-derived lease ids, chained key history, no unread indexes',
  sql: `
    DROP INDEX leases_holder;

    CREATE TABLE lease_legacy_tokens (
      token_hash TEXT NOT NULL,
      lease_id   TEXT NOT NULL,
      PRIMARY KEY (token_hash, lease_id)
    ) WITHOUT ROWID;
    INSERT INTO lease_legacy_tokens (token_hash, lease_id) SELECT token_hash, lease_id FROM leases;
    DROP INDEX leases_token;

    DROP INDEX lease_keys_lease;
    DROP INDEX lease_keys_holder;
    CREATE INDEX lease_keys_holder ON lease_keys (holder) WHERE holder IS NOT NULL;

    CREATE TABLE lease_history_chained (
      seq      INTEGER PRIMARY KEY,
      at       INTEGER NOT NULL,
      event    TEXT    NOT NULL CHECK (event IN ('ACQUIRE', 'RENEW', 'RELEASE', 'PREEMPT', 'EXPIRE')),
      key      TEXT    NOT NULL,
      epoch    INTEGER NOT NULL,
      lease_id TEXT    NOT NULL,
      holder   TEXT    NOT NULL,
      actor    TEXT,
      prev_seq INTEGER
    );
    INSERT INTO lease_history_chained (seq, at, event, key, epoch, lease_id, holder, actor, prev_seq)
      SELECT seq, at, event, key, epoch, lease_id, holder, actor, LAG(seq) OVER (PARTITION BY key ORDER BY seq)
      FROM lease_history ORDER BY seq;
    DROP TABLE lease_history;
    ALTER TABLE lease_history_chained RENAME TO lease_history;
    CREATE INDEX lease_history_lease ON lease_history (lease_id);

    ALTER TABLE lease_keys ADD COLUMN last_seq INTEGER;
    UPDATE lease_keys SET last_seq = (SELECT max(seq) FROM lease_history h WHERE h.key = lease_keys.key);
    CREATE TRIGGER lease_history_chain AFTER INSERT ON lease_history BEGIN
      SELECT RAISE(ABORT, 'lease_history: the key of an event must be in lease_keys, and its prev_seq, if given, the key''s last event')
        WHERE NOT EXISTS (SELECT 1 FROM lease_keys WHERE key = NEW.key AND (NEW.prev_seq IS NULL OR last_seq = NEW.prev_seq));
      UPDATE lease_history SET prev_seq = (SELECT last_seq FROM lease_keys WHERE key = NEW.key)
        WHERE NEW.prev_seq IS NULL AND seq = NEW.seq;
      UPDATE lease_keys SET last_seq = NEW.seq WHERE key = NEW.key;
    END;
  `,
};
