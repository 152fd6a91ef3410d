import { GENESIS_HASH } from '../../../audit/hash-chain.js';
import { GRAPH_LOG_LOCK } from '../graph-event-store.js';
import type { PostgresMigration } from './types.js';

/**
 * As SQLite's migration 20: the graph's event log becomes a hash chain (src/audit/graph-chain.ts).
 * graph_head keeps, beside the log's head revision, the last hashed revision and its hash, so an append
 * links without reading the log back. `writ_graph_event_hash` computes the bytes graph-chain.ts
 * `graphEventHash` does (`to_json(text)::text` quotes as JSON.stringify does); the events already there
 * are hashed here, at the upgrade (what was done to them before it is not detectable).
 *
 * A replica from before this migration (a rolling upgrade) appends events without a hash and moves only
 * graph_head.revision: the append-only trigger now lets a missing hash be filled in (nothing else of an
 * event may change), and the next append of this Writ hashes them before its own.
 *
 * The graph log's advisory lock first (GRAPH_LOG_LOCK, graph-event-store.ts): an old appender holds it
 * while it moves graph_head and then inserts, so taking the tables' locks without it could deadlock.
 */
export const graphEventChain: PostgresMigration = {
  version: 13,
  name: 'graph events: hash-chained (tamper evidence), the chain head kept in graph_head',
  sql: `
    SELECT pg_advisory_xact_lock(${GRAPH_LOG_LOCK});
    ALTER TABLE graph_head ADD COLUMN hashed bigint NOT NULL DEFAULT 0, ADD COLUMN hash text NOT NULL DEFAULT '${GENESIS_HASH}';
    ALTER TABLE graph_events ADD COLUMN hash text;
    ALTER TABLE receipt_head_checkpoints ADD COLUMN graph_revision bigint, ADD COLUMN graph_hash text;
    CREATE FUNCTION writ_graph_event_hash(prev_hash text, revision bigint, at bigint, actor text, type text, payload text)
      RETURNS text LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
        SELECT encode(sha256(convert_to('writ-graph-v1' || E'\\n' || $1 || E'\\n' || $2::text || E'\\n' || $3::text || E'\\n'
          || to_json($4)::text || E'\\n' || to_json($5)::text || E'\\n' || $6, 'UTF8')), 'hex')
      $$;
    CREATE OR REPLACE FUNCTION writ_graph_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF TG_OP = 'UPDATE' AND OLD.hash IS NULL AND NEW.hash IS NOT NULL
           AND (NEW.revision, NEW.at, NEW.actor, NEW.type, NEW.payload) = (OLD.revision, OLD.at, OLD.actor, OLD.type, OLD.payload) THEN
          RETURN NEW;
        END IF;
        RAISE EXCEPTION 'graph events are append-only';
      END $$;
    DO $$
      DECLARE
        prev text := '${GENESIS_HASH}';
        last bigint := 0;
        r record;
      BEGIN
        FOR r IN SELECT revision, at, actor, type, payload FROM graph_events ORDER BY revision LOOP
          prev := writ_graph_event_hash(prev, r.revision, r.at, r.actor, r.type, r.payload);
          UPDATE graph_events SET hash = prev WHERE revision = r.revision;
          last := r.revision;
        END LOOP;
        UPDATE graph_head SET hashed = last, hash = prev;
      END $$;
  `,
};
