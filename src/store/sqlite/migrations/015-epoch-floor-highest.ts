import type { Migration } from './types.js';

/**
 * The floor a key leased for the first time starts from is the highest floor recorded, not the latest
 * row's. Migration 9's trigger took the latest, which was the same while bumps only added up; but a
 * restore carries the replaced store's record after the backup's (backup.ts), and the two need not be
 * one history: a carried row can have a lower floor than one before it. A key inserted then (the
 * restore's own carry, or a first acquisition) started below a floor already in force, at epochs the
 * backup's timeline may have issued.
 */
export const epochFloorHighest: Migration = {
  version: 15,
  name: 'epoch floor: a new key starts above the highest floor recorded, not the latest row\'s',
  sql: `
    DROP TRIGGER lease_keys_epoch_floor;
    CREATE TRIGGER lease_keys_epoch_floor AFTER INSERT ON lease_keys
      WHEN EXISTS (SELECT 1 FROM lease_epoch_bumps WHERE floor > 0)
      BEGIN
        UPDATE lease_keys SET epoch = NEW.epoch + (SELECT MAX(floor) FROM lease_epoch_bumps) WHERE key = NEW.key;
      END;
  `,
};
