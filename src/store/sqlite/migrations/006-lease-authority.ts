import type { Migration } from './types.js';

export const leaseAuthority: Migration = {
  version: 6,
  name: 'the decisions each lease was taken with (renewals re-check their authority)',
  sql: `
    CREATE TABLE lease_authority (
      lease_id   TEXT    PRIMARY KEY,
      holder     TEXT    NOT NULL,
      decisions  TEXT    NOT NULL,
      created_at INTEGER NOT NULL
    );
  `,
};
