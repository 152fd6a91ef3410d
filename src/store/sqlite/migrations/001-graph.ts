import type { Migration } from './types.js';

export const graphEvents: Migration = {
  version: 1,
  name: 'graph event log',
  sql: `
    CREATE TABLE graph_events (
      revision INTEGER PRIMARY KEY,
      at       INTEGER NOT NULL,
      actor    TEXT    NOT NULL,
      type     TEXT    NOT NULL,
      payload  TEXT    NOT NULL
    );
    CREATE INDEX graph_events_at ON graph_events (at);
  `,
};
