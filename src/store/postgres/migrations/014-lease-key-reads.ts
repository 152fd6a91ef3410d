import type { PostgresMigration } from './types.js';

/**
 * Two indexes for the reads of lease keys that must not grow with every key ever leased:
 * - lease_keys_key_c: the keys in bytewise order (COLLATE "C", the order every lease read gives, as on
 *   SQLite). The primary key's index is in the database's collation, which the planner cannot use for
 *   that order unless the database's collation is "C" itself, so a page of the list (a limit after a
 *   key) sorted every key ever leased. With it a page is one range of the index.
 * - lease_keys_held_until: the keys with a holder by expiry, so that the held read (expires_at > now)
 *   reads only the live leases, not every lease that lapsed without a release (its holder stays recorded
 *   until the key is taken again). Partial: a key no one holds costs no entry.
 *
 * Plain CREATE INDEX (a migration runs in a transaction): writes to lease_keys wait while they are built,
 * about a second per million keys.
 */
export const leaseKeyReads: PostgresMigration = {
  version: 14,
  name: 'lease keys: bytewise key order for paged lists, the keys with a holder by expiry for the held read',
  sql: `
    CREATE INDEX lease_keys_key_c ON lease_keys (key COLLATE "C");
    CREATE INDEX lease_keys_held_until ON lease_keys (expires_at) WHERE holder IS NOT NULL;
  `,
};
