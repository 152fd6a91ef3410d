import type { PostgresMigration } from './types.js';

/**
 * As SQLite's migration 15: a key leased for the first time starts above the highest floor recorded,
 * not the latest row's. A record merged from two histories (a SQLite file restored over another and then
 * copied here, `writ store copy`) can have a lower floor after a higher one.
 */
export const epochFloorHighest: PostgresMigration = {
  version: 7,
  name: 'epoch floor: a new key starts above the highest floor recorded, not the latest row\'s',
  sql: `
    CREATE OR REPLACE FUNCTION writ_lease_keys_epoch_floor() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        NEW.epoch := NEW.epoch + coalesce((SELECT max(floor) FROM lease_epoch_bumps), 0);
        RETURN NEW;
      END $$;
  `,
};
