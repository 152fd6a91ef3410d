import type { Migration } from './types.js';

/**
 * Epoch bumps (a restore from a backup, `writ lease bump-epochs`): an append-only record of each,
 * and the floor every key leased for the first time afterwards starts from. A backup knows only the
 * keys leased before it was taken; a key first leased after it had epochs 1, 2, … that the restored
 * store has never seen, so raising the rows that exist is not enough: a new row starts at the floor
 * (the sum of all margins), set by the trigger in the statement that inserts the key.
 */
export const epochBumps: Migration = {
  version: 9,
  name: 'epoch bumps: append-only record, and the epoch floor of keys leased for the first time',
  sql: `
    CREATE TABLE lease_epoch_bumps (
      seq          INTEGER PRIMARY KEY,
      at           INTEGER NOT NULL,
      kind         TEXT    NOT NULL CHECK (kind IN ('RESTORE', 'BUMP')),
      margin       INTEGER NOT NULL CHECK (margin >= 0),
      floor        INTEGER NOT NULL CHECK (floor >= 0),
      keys         INTEGER NOT NULL,
      leases_ended INTEGER NOT NULL,
      max_epoch    INTEGER NOT NULL,
      actor        TEXT    NOT NULL,
      reason       TEXT    NOT NULL,
      detail       TEXT    NOT NULL
    );
    CREATE TRIGGER lease_epoch_bumps_no_update BEFORE UPDATE ON lease_epoch_bumps
      BEGIN SELECT RAISE(ABORT, 'epoch bumps are append-only'); END;
    CREATE TRIGGER lease_epoch_bumps_no_delete BEFORE DELETE ON lease_epoch_bumps
      BEGIN SELECT RAISE(ABORT, 'epoch bumps are append-only'); END;
    CREATE TRIGGER lease_keys_epoch_floor AFTER INSERT ON lease_keys
      WHEN EXISTS (SELECT 1 FROM lease_epoch_bumps WHERE floor > 0)
      BEGIN
        UPDATE lease_keys SET epoch = NEW.epoch + (SELECT floor FROM lease_epoch_bumps ORDER BY seq DESC LIMIT 1) WHERE key = NEW.key;
      END;
  `,
};
