import type { PostgresMigration } from './types.js';

/**
 * Epoch bumps (`writ lease bump-epochs` after a point-in-time recovery or a restore from pg_dump), as
 * SQLite's migration 9: an append-only record of each, and the floor a key leased for the first time
 * afterwards starts from. The floor is added by a BEFORE INSERT trigger, which PostgreSQL runs for the
 * row `writ_lease_acquire` proposes even when it then goes the ON CONFLICT path (where the value is
 * unused), so a new key's first epoch is floor + 1 in the acquiring statement itself.
 */
export const epochBumps: PostgresMigration = {
  version: 2,
  name: 'epoch bumps: append-only record, and the epoch floor of keys leased for the first time',
  sql: `
    CREATE TABLE lease_epoch_bumps (
      seq          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      at           bigint NOT NULL,
      kind         text   NOT NULL CHECK (kind IN ('RESTORE', 'BUMP')),
      margin       bigint NOT NULL CHECK (margin >= 0),
      floor        bigint NOT NULL CHECK (floor >= 0),
      keys         bigint NOT NULL,
      leases_ended bigint NOT NULL,
      max_epoch    bigint NOT NULL,
      actor        text   NOT NULL,
      reason       text   NOT NULL,
      detail       jsonb  NOT NULL
    );
    CREATE FUNCTION writ_lease_epoch_bumps_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN RAISE EXCEPTION 'epoch bumps are append-only'; END $$;
    CREATE TRIGGER lease_epoch_bumps_append_only BEFORE UPDATE OR DELETE ON lease_epoch_bumps
      FOR EACH ROW EXECUTE FUNCTION writ_lease_epoch_bumps_append_only();

    CREATE FUNCTION writ_lease_keys_epoch_floor() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        NEW.epoch := NEW.epoch + coalesce((SELECT floor FROM lease_epoch_bumps ORDER BY seq DESC LIMIT 1), 0);
        RETURN NEW;
      END $$;
    CREATE TRIGGER lease_keys_epoch_floor BEFORE INSERT ON lease_keys
      FOR EACH ROW EXECUTE FUNCTION writ_lease_keys_epoch_floor();
  `,
};
