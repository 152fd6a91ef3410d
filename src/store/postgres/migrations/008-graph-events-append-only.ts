import type { PostgresMigration } from './types.js';

/** As SQLite's migration 17: the graph's event log refuses UPDATE and DELETE (Writ only appends to it). */
export const graphEventsAppendOnly: PostgresMigration = {
  version: 8,
  name: 'graph events: append-only (UPDATE and DELETE refused)',
  sql: `
    CREATE FUNCTION writ_graph_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN RAISE EXCEPTION 'graph events are append-only'; END $$;
    CREATE TRIGGER graph_events_append_only BEFORE UPDATE OR DELETE ON graph_events
      FOR EACH ROW EXECUTE FUNCTION writ_graph_events_append_only();
  `,
};
