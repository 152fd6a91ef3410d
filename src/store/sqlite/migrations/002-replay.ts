import type { Migration } from './types.js';

export const replayGuard: Migration = {
  version: 2,
  name: 'single-use ids (assertion jti, used decisions)',
  sql: `
    CREATE TABLE seen_ids (
      namespace  TEXT    NOT NULL,
      id         TEXT    NOT NULL,
      expires_at INTEGER NOT NULL,
      PRIMARY KEY (namespace, id)
    ) WITHOUT ROWID;
    CREATE INDEX seen_ids_expiry ON seen_ids (expires_at);
  `,
};
