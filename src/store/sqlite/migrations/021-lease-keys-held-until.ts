import type { Migration } from './types.js';

/**
 * The keys with a holder, by expiry: the held read (`expires_at > now`) finds the live leases as one
 * range of this index, instead of reading every key with a holder recorded, which includes every lease
 * that lapsed without a release (its holder stays until the key is taken again). Partial, so a key no
 * one holds costs no entry. The index of keys with a holder (lease_keys_holder) stays: the list by
 * holder uses it.
 */
export const leaseKeysHeldUntil: Migration = {
  version: 21,
  name: 'lease keys: the keys with a holder indexed by expiry (the held read skips lapsed leases)',
  sql: `
    CREATE INDEX lease_keys_held_until ON lease_keys (expires_at) WHERE holder IS NOT NULL;
  `,
};
