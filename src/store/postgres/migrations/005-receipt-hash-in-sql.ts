import type { PostgresMigration } from './types.js';

/**
 * A receipt append in one statement: the entry's hash is computed by the database
 * (`writ_receipt_hash`, the same bytes as hash-chain.ts `hashOf`: version 1 on the legacy chain '',
 * version 2 on every other), so an append locks its chain's head, advances it and writes the entry in
 * one upsert, with no round trip to read the head first. The head row keeps the hash before it
 * (`prev_hash`): the upsert's RETURNING gives the new head and what it linked to at once.
 *
 * `to_json(chain)::text` quotes the chain as JSON.stringify does (the same escapes for `"`, `\` and
 * control characters, nothing else escaped); the text is hashed as UTF-8.
 */
export const receiptHashInSql: PostgresMigration = {
  version: 5,
  name: 'receipt log: the entry hash computed in the database, one statement per append',
  sql: `
    CREATE FUNCTION writ_receipt_hash(prev_hash text, body text, chain text, pos bigint, seq bigint, kind text, receipt_id text)
      RETURNS text LANGUAGE sql STABLE STRICT PARALLEL SAFE AS $$
        SELECT encode(sha256(convert_to(
          CASE WHEN $3 = ''
            THEN $1 || E'\\n' || $2 || E'\\n' || $4::text || E'\\n' || $6 || E'\\n' || $7
            ELSE 'writ-receipt-v2' || E'\\n' || $1 || E'\\n' || $2 || E'\\n' || to_json($3)::text || E'\\n' || $4::text || E'\\n' || $5::text || E'\\n' || $6 || E'\\n' || $7
          END, 'UTF8')), 'hex')
      $$;
    ALTER TABLE receipt_chains ADD COLUMN prev_hash text;
  `,
};
