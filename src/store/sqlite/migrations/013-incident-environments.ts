import type { Migration } from './types.js';

/**
 * An incident names the environment of the decision that declared it: preemption counts only an active
 * incident of the environment it takes a lease in. Incidents declared before this migration keep NULL
 * (their declaring decision's environment was never recorded); the service decides what NULL means
 * (src/service/incidents.ts, `incidentEnvironments`).
 */
export const incidentEnvironments: Migration = {
  version: 13,
  name: 'incidents: the environment of the declaring decision (NULL for incidents declared before)',
  sql: `
    ALTER TABLE incidents ADD COLUMN environment TEXT;
  `,
};
