import { GENESIS_HASH } from '../../../audit/hash-chain.js';
import type { PostgresMigration } from './types.js';

/**
 * The whole datastore of src/store/contract.ts on PostgreSQL, as SQLite has it after its migration 8,
 * with what several replicas sharing one database need on top:
 *
 * - Lease time is the database's clock (`writ_now_ms()`, clock_timestamp() in ms), never a replica's.
 * - One acquisition is one call of `writ_lease_acquire` (one round trip): per key one
 *   `INSERT … ON CONFLICT (key) DO UPDATE … WHERE free-or-expired AND not queued ahead … RETURNING epoch`,
 *   all keys inside one PL/pgSQL exception block, i.e. a subtransaction, so a refused key undoes the
 *   keys taken before it and leaves the caller's transaction usable and as it was.
 * - Heads that must not fork (the graph revision, the receipt chain) are single rows that every
 *   appender locks (UPDATE / SELECT … FOR UPDATE), so appenders of all replicas queue on them.
 * - Times are bigint milliseconds since the epoch, as on SQLite and in the ports.
 */
export const initial: PostgresMigration = {
  version: 1,
  name: 'graph events, single-use ids, leases, receipts, incidents, lease authority',
  sql: `
    CREATE FUNCTION writ_now_ms() RETURNS bigint LANGUAGE sql VOLATILE
      AS $$ SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint $$;

    -- graph event log
    CREATE TABLE graph_head (
      only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
      revision bigint  NOT NULL CHECK (revision >= 0)
    );
    INSERT INTO graph_head (only_row, revision) VALUES (true, 0);
    CREATE TABLE graph_events (
      revision bigint PRIMARY KEY,
      at       bigint NOT NULL,
      actor    text   NOT NULL,
      type     text   NOT NULL,
      payload  text   NOT NULL
    );
    CREATE INDEX graph_events_at ON graph_events (at);

    -- single-use ids
    CREATE TABLE single_use_ids (
      namespace  text   NOT NULL,
      id         text   NOT NULL,
      expires_at bigint NOT NULL,
      PRIMARY KEY (namespace, id)
    );
    CREATE INDEX single_use_ids_expiry ON single_use_ids (expires_at);

    -- leases
    CREATE TABLE lease_keys (
      key             text    PRIMARY KEY,
      epoch           bigint  NOT NULL DEFAULT 0 CHECK (epoch >= 0),
      lease_id        text,
      holder          text,
      holder_instance text,
      token_hash      text,
      priority        integer,
      acquired_at     bigint,
      renewed_at      bigint,
      expires_at      bigint,
      duration_ms     bigint,
      transitions     bigint  NOT NULL DEFAULT 0,
      last_holder     text,
      prev_lease_id   text,
      preempted_by    text
    );
    CREATE INDEX lease_keys_holder ON lease_keys (holder) WHERE holder IS NOT NULL;

    CREATE TABLE leases (
      lease_id        text    PRIMARY KEY,
      holder          text    NOT NULL,
      holder_instance text,
      resources       text[]  NOT NULL,
      epochs          jsonb   NOT NULL,
      token_hash      text    NOT NULL,
      priority        integer NOT NULL,
      state           text    NOT NULL CHECK (state IN ('ACTIVE', 'RELEASED', 'EXPIRED', 'PREEMPTED')),
      created_at      bigint  NOT NULL,
      renewed_at      bigint  NOT NULL,
      expires_at      bigint  NOT NULL,
      duration_ms     bigint  NOT NULL,
      ended_at        bigint,
      preempted_by    text
    );

    CREATE TABLE lease_waiters (
      ticket          bigint  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      holder          text    NOT NULL,
      holder_instance text,
      priority        integer NOT NULL,
      enqueued_at     bigint  NOT NULL,
      deadline        bigint  NOT NULL
    );
    CREATE INDEX lease_waiters_deadline ON lease_waiters (deadline);
    CREATE TABLE lease_waiter_keys (
      key    text   NOT NULL,
      ticket bigint NOT NULL REFERENCES lease_waiters (ticket) ON DELETE CASCADE,
      PRIMARY KEY (key, ticket)
    );
    CREATE INDEX lease_waiter_keys_ticket ON lease_waiter_keys (ticket);

    CREATE TABLE lease_history (
      seq      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      at       bigint NOT NULL,
      event    text   NOT NULL CHECK (event IN ('ACQUIRE', 'RENEW', 'RELEASE', 'PREEMPT', 'EXPIRE')),
      key      text   NOT NULL,
      epoch    bigint NOT NULL,
      lease_id text   NOT NULL,
      holder   text   NOT NULL,
      actor    text
    );
    CREATE INDEX lease_history_key ON lease_history (key, seq);
    CREATE INDEX lease_history_lease ON lease_history (lease_id, seq);

    -- Whether a live waiter other than p_ticket is ahead of (p_priority, p_ticket) on p_key.
    CREATE FUNCTION writ_lease_queued_ahead(p_key text, p_priority integer, p_ticket bigint, p_now bigint)
      RETURNS boolean LANGUAGE sql STABLE AS $$
        SELECT EXISTS (
          SELECT 1 FROM lease_waiter_keys wk JOIN lease_waiters w ON w.ticket = wk.ticket
           WHERE wk.key = p_key AND w.deadline > p_now AND w.ticket <> p_ticket
             AND (w.priority > p_priority OR (w.priority = p_priority AND w.ticket < p_ticket)))
      $$;

    -- Why renew/release of (lease id, token hash) was refused (nothing matched the conditional update).
    CREATE FUNCTION writ_lease_refusal(p_lease_id text, p_token_hash text)
      RETURNS text LANGUAGE sql STABLE AS $$
        SELECT CASE WHEN l.lease_id IS NULL THEN 'NOT_FOUND'
                    WHEN l.token_hash <> p_token_hash THEN 'TOKEN_MISMATCH'
                    WHEN l.state = 'PREEMPTED' THEN 'PREEMPTED'
                    ELSE 'EXPIRED' END
          FROM (SELECT 1) one LEFT JOIN leases l ON l.lease_id = p_lease_id
      $$;

    CREATE FUNCTION writ_lease_acquire(
      p_keys text[], p_lease_id text, p_token_hash text, p_holder text, p_instance text, p_priority integer,
      p_ttl bigint, p_preempt boolean, p_preemptable text[], p_ticket bigint
    ) RETURNS jsonb LANGUAGE plpgsql VOLATILE AS $$
    DECLARE
      v_now       bigint := writ_now_ms();
      v_expires   bigint := v_now + p_ttl;
      v_key       text;
      v_epochs    jsonb := '{}';
      v_preempted jsonb := '[]';
      v_taken     record;
      v_prev      record;
      v_by_pre    boolean;
      v_other     text;
      v_other_ep  bigint;
      v_holder    text;
      v_until     bigint;
    BEGIN
      BEGIN
        FOREACH v_key IN ARRAY p_keys LOOP
          -- The verdict is whether this one statement returns a row; epoch + 1 happens in it.
          INSERT INTO lease_keys AS k (key, epoch, lease_id, holder, holder_instance, token_hash, priority,
                                       acquired_at, renewed_at, expires_at, duration_ms, transitions, last_holder,
                                       prev_lease_id, preempted_by)
          SELECT v_key, 1, p_lease_id, p_holder, p_instance, p_token_hash, p_priority,
                 v_now, v_now, v_expires, p_ttl, 0, p_holder, NULL, NULL
           WHERE EXISTS (SELECT 1 FROM lease_keys WHERE key = v_key)
              OR NOT writ_lease_queued_ahead(v_key, p_priority, p_ticket, v_now)
          ON CONFLICT (key) DO UPDATE SET
            epoch = k.epoch + 1,
            prev_lease_id = k.lease_id,
            lease_id = p_lease_id, holder = p_holder, holder_instance = p_instance, token_hash = p_token_hash,
            priority = p_priority, acquired_at = v_now, renewed_at = v_now, expires_at = v_expires, duration_ms = p_ttl,
            transitions = k.transitions + CASE WHEN k.last_holder IS NOT NULL AND k.last_holder <> p_holder THEN 1 ELSE 0 END,
            last_holder = p_holder,
            preempted_by = CASE WHEN p_preempt AND k.holder IS NOT NULL AND k.expires_at > v_now THEN p_holder ELSE NULL END
          WHERE CASE WHEN NOT p_preempt THEN
                  (k.holder IS NULL OR k.expires_at <= v_now)
                  AND NOT writ_lease_queued_ahead(v_key, p_priority, p_ticket, v_now)
                ELSE
                  (p_preemptable IS NULL OR k.holder IS NULL OR k.expires_at <= v_now OR k.holder = ANY (p_preemptable))
                  AND ((k.holder IS NOT NULL AND k.expires_at > v_now) OR NOT writ_lease_queued_ahead(v_key, p_priority, p_ticket, v_now))
                END
          RETURNING k.epoch, k.prev_lease_id, k.preempted_by INTO v_taken;
          IF NOT FOUND THEN
            RAISE EXCEPTION USING ERRCODE = 'WR001', MESSAGE = 'lease key refused';
          END IF;
          v_epochs := v_epochs || jsonb_build_object(v_key, v_taken.epoch);

          IF v_taken.prev_lease_id IS NOT NULL THEN
            -- The lease this key was just taken from ends: preempted (its other keys are freed too) or expired.
            v_by_pre := v_taken.preempted_by IS NOT NULL;
            SELECT holder, resources INTO v_prev FROM leases WHERE lease_id = v_taken.prev_lease_id;
            UPDATE leases SET state = CASE WHEN v_by_pre THEN 'PREEMPTED' ELSE 'EXPIRED' END, ended_at = v_now,
                              preempted_by = CASE WHEN v_by_pre THEN p_holder END
             WHERE lease_id = v_taken.prev_lease_id AND state = 'ACTIVE';
            INSERT INTO lease_history (at, event, key, epoch, lease_id, holder, actor)
            VALUES (v_now, CASE WHEN v_by_pre THEN 'PREEMPT' ELSE 'EXPIRE' END, v_key, v_taken.epoch - 1,
                    v_taken.prev_lease_id, coalesce(v_prev.holder, ''), p_holder);
            IF v_by_pre THEN
              v_preempted := v_preempted || jsonb_build_array(jsonb_build_object('lease_id', v_taken.prev_lease_id,
                'holder', coalesce(v_prev.holder, ''), 'key', v_key, 'epoch', v_taken.epoch - 1));
              FOREACH v_other IN ARRAY coalesce(v_prev.resources, '{}'::text[]) LOOP
                UPDATE lease_keys SET lease_id = NULL, holder = NULL, holder_instance = NULL, token_hash = NULL,
                                      priority = NULL, expires_at = NULL
                 WHERE key = v_other AND lease_id = v_taken.prev_lease_id
                RETURNING epoch INTO v_other_ep;
                IF FOUND THEN
                  INSERT INTO lease_history (at, event, key, epoch, lease_id, holder, actor)
                  VALUES (v_now, 'PREEMPT', v_other, v_other_ep, v_taken.prev_lease_id, coalesce(v_prev.holder, ''), p_holder);
                  v_preempted := v_preempted || jsonb_build_array(jsonb_build_object('lease_id', v_taken.prev_lease_id,
                    'holder', coalesce(v_prev.holder, ''), 'key', v_other, 'epoch', v_other_ep));
                END IF;
              END LOOP;
            END IF;
          END IF;
        END LOOP;

        INSERT INTO leases (lease_id, holder, holder_instance, resources, epochs, token_hash, priority, state,
                            created_at, renewed_at, expires_at, duration_ms)
        VALUES (p_lease_id, p_holder, p_instance, p_keys, v_epochs, p_token_hash, p_priority, 'ACTIVE',
                v_now, v_now, v_expires, p_ttl);
        INSERT INTO lease_history (at, event, key, epoch, lease_id, holder, actor)
        SELECT v_now, 'ACQUIRE', u.key, (v_epochs ->> u.key)::bigint, p_lease_id, p_holder, NULL
          FROM unnest(p_keys) WITH ORDINALITY AS u (key, n) ORDER BY u.n;
        IF p_ticket <> 9007199254740991 THEN
          DELETE FROM lease_waiters WHERE ticket = p_ticket;
        END IF;
      EXCEPTION WHEN SQLSTATE 'WR001' THEN
        -- Everything since the inner BEGIN is undone; this read only explains the verdict.
        SELECT holder, expires_at INTO v_holder, v_until FROM lease_keys WHERE key = v_key;
        RETURN jsonb_build_object('granted', false, 'key', v_key, 'holder', v_holder, 'expiresAt', v_until,
                                  'queued', NOT coalesce(v_holder IS NOT NULL AND v_until > v_now, false), 'now', v_now);
      END;
      RETURN jsonb_build_object('granted', true, 'epochs', v_epochs, 'expiresAt', v_expires, 'preempted', v_preempted, 'now', v_now);
    END
    $$;

    -- Renews (p_release false) or releases every key of a lease, conditional on id + token hash + ACTIVE + not expired.
    CREATE FUNCTION writ_lease_end_or_renew(p_lease_id text, p_token_hash text, p_ttl bigint, p_release boolean)
      RETURNS jsonb LANGUAGE plpgsql VOLATILE AS $$
    DECLARE
      v_now   bigint := writ_now_ms();
      v_lease record;
      v_n     bigint;
    BEGIN
      IF p_release THEN
        UPDATE leases SET state = 'RELEASED', ended_at = v_now
         WHERE lease_id = p_lease_id AND token_hash = p_token_hash AND state = 'ACTIVE' AND expires_at > v_now
        RETURNING resources, epochs, holder, expires_at, duration_ms INTO v_lease;
      ELSE
        UPDATE leases SET renewed_at = v_now, duration_ms = coalesce(p_ttl, duration_ms),
                          expires_at = v_now + coalesce(p_ttl, duration_ms)
         WHERE lease_id = p_lease_id AND token_hash = p_token_hash AND state = 'ACTIVE' AND expires_at > v_now
        RETURNING resources, epochs, holder, expires_at, duration_ms INTO v_lease;
      END IF;
      IF NOT FOUND THEN
        RETURN jsonb_build_object('ok', false, 'reason', writ_lease_refusal(p_lease_id, p_token_hash), 'now', v_now);
      END IF;
      IF p_release THEN
        UPDATE lease_keys SET lease_id = NULL, holder = NULL, holder_instance = NULL, token_hash = NULL,
                              priority = NULL, expires_at = NULL
         WHERE key = ANY (v_lease.resources) AND lease_id = p_lease_id AND token_hash = p_token_hash AND expires_at > v_now;
      ELSE
        UPDATE lease_keys SET renewed_at = v_now, expires_at = v_lease.expires_at, duration_ms = v_lease.duration_ms
         WHERE key = ANY (v_lease.resources) AND lease_id = p_lease_id AND token_hash = p_token_hash AND expires_at > v_now;
      END IF;
      GET DIAGNOSTICS v_n = ROW_COUNT;
      -- Cannot happen while takeovers end the lease in the same transaction; refuse rather than half-apply.
      IF v_n <> cardinality(v_lease.resources) THEN
        RAISE EXCEPTION 'lease % holds % of its % keys', p_lease_id, v_n, cardinality(v_lease.resources);
      END IF;
      INSERT INTO lease_history (at, event, key, epoch, lease_id, holder, actor)
      SELECT v_now, CASE WHEN p_release THEN 'RELEASE' ELSE 'RENEW' END, u.key, (v_lease.epochs ->> u.key)::bigint,
             p_lease_id, v_lease.holder, NULL
        FROM unnest(v_lease.resources) WITH ORDINALITY AS u (key, n) ORDER BY u.n;
      RETURN jsonb_build_object('ok', true, 'epochs', v_lease.epochs, 'expiresAt', v_lease.expires_at, 'now', v_now);
    END
    $$;

    -- receipts: one hash chain whose head row every appender locks (see receipt-repository.ts)
    CREATE TABLE receipt_chain_head (
      only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
      seq      bigint  NOT NULL,
      hash     text    NOT NULL
    );
    INSERT INTO receipt_chain_head (only_row, seq, hash) VALUES (true, 0, '${GENESIS_HASH}');
    CREATE TABLE receipt_entries (
      seq        bigint PRIMARY KEY,
      receipt_id text   NOT NULL,
      kind       text   NOT NULL CHECK (kind IN ('intent', 'completed', 'failed', 'rejected', 'reconciled')),
      body       text   NOT NULL,
      prev_hash  text   NOT NULL,
      hash       text   NOT NULL
    );
    CREATE FUNCTION writ_receipt_entries_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN RAISE EXCEPTION 'receipt entries are append-only'; END $$;
    CREATE TRIGGER receipt_entries_append_only BEFORE UPDATE OR DELETE ON receipt_entries
      FOR EACH ROW EXECUTE FUNCTION writ_receipt_entries_append_only();
    CREATE TABLE receipts (
      receipt_id      text   PRIMARY KEY,
      principal       text   NOT NULL,
      resource_key    text   NOT NULL,
      status          text   NOT NULL CHECK (status IN ('PENDING', 'COMPLETED', 'FAILED', 'REJECTED')),
      idempotency_key text,
      request_hash    text,
      created_at      bigint NOT NULL,
      completed_at    bigint,
      first_seq       bigint NOT NULL,
      last_seq        bigint NOT NULL
    );
    CREATE UNIQUE INDEX receipts_idempotency ON receipts (principal, idempotency_key) WHERE idempotency_key IS NOT NULL;
    CREATE INDEX receipts_resource ON receipts (resource_key, first_seq);
    CREATE INDEX receipts_principal ON receipts (principal, first_seq);
    CREATE INDEX receipts_status ON receipts (status, first_seq);
    CREATE INDEX receipts_first_seq ON receipts (first_seq);

    -- incidents, lease authority
    CREATE TABLE incidents (
      id          text   PRIMARY KEY,
      declared_by text   NOT NULL,
      reason      text   NOT NULL,
      decision_id text   NOT NULL,
      declared_at bigint NOT NULL,
      ends_at     bigint NOT NULL,
      resolved_at bigint
    );
    CREATE TABLE lease_authority (
      lease_id   text   PRIMARY KEY,
      holder     text   NOT NULL,
      decisions  jsonb  NOT NULL,
      created_at bigint NOT NULL
    );
  `,
};
