import type { Migration } from './types.js';

export const incidents: Migration = {
  version: 5,
  name: 'incidents (enable preemption while active)',
  sql: `
    CREATE TABLE incidents (
      id          TEXT    PRIMARY KEY,
      declared_by TEXT    NOT NULL,
      reason      TEXT    NOT NULL,
      decision_id TEXT    NOT NULL,
      declared_at INTEGER NOT NULL,
      ends_at     INTEGER NOT NULL,
      resolved_at INTEGER
    );
  `,
};
