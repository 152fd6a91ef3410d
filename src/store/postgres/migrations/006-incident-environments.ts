import type { PostgresMigration } from './types.js';

/** As SQLite's migration 13: an incident names the environment it was declared for (NULL: declared before). */
export const incidentEnvironments: PostgresMigration = {
  version: 6,
  name: 'incidents: the environment of the declaring decision (NULL for incidents declared before)',
  sql: `
    ALTER TABLE incidents ADD COLUMN environment text;
  `,
};
