import type { Migration } from './types.js';

/**
 * The graph's event log refuses UPDATE and DELETE, as the receipt entries and the epoch bumps do: every
 * replica's graph, `writ why`, `writ can --at` and `writ graph export --at` are folded from it, so an
 * event rewritten or deleted (a revocation's author or reason, a revocation taken out) would change what
 * they say of the past and bring revoked authority back. Writ only ever appends to it. Not tamper
 * evidence: whoever may drop the trigger can still rewrite the log (README, audit verify).
 */
export const graphEventsAppendOnly: Migration = {
  version: 17,
  name: 'graph events: append-only (UPDATE and DELETE refused)',
  sql: `
    CREATE TRIGGER graph_events_no_update BEFORE UPDATE ON graph_events
      BEGIN SELECT RAISE(ABORT, 'graph events are append-only'); END;
    CREATE TRIGGER graph_events_no_delete BEFORE DELETE ON graph_events
      BEGIN SELECT RAISE(ABORT, 'graph events are append-only'); END;
  `,
};
