import type { PostgresMigration } from './types.js';

/**
 * Twins: two acquisitions with one lease id in flight at once (an SDK's retry racing its original, which
 * is still under way, maybe on another replica). Both could pass migration 9's check that the id is
 * unused before either committed; the second then waited for the key the first had taken and, once
 * the first committed, found it held and was refused as busy, naming as holder the lease it had
 * itself asked for (RESOURCE_BUSY over HTTP, instead of the lease, replayed). Now a refused key is
 * tokenUsed when a lease with the id exists by then (looked at again after the wait). As migration 9's
 * function otherwise; a unique violation on leases_pkey stays tokenUsed as there.
 */
export const leaseTokenTwins: PostgresMigration = {
  version: 11,
  name: 'lease acquisition: a key refused because a twin with the same lease id took it is tokenUsed, not busy',
  sql: `
    CREATE OR REPLACE FUNCTION writ_lease_acquire(
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
      v_constraint text;
    BEGIN
      -- A lease id, like its token, is used once: a lease with it (live or ended) refuses before any key is looked at.
      IF EXISTS (SELECT 1 FROM leases WHERE lease_id = p_lease_id) THEN
        RETURN jsonb_build_object('granted', false, 'tokenUsed', true, 'key', p_keys[1], 'holder', NULL, 'expiresAt', NULL,
                                  'queued', false, 'now', v_now);
      END IF;
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
      EXCEPTION WHEN unique_violation THEN
        -- The lease's id: a concurrent acquisition with the same token committed it after the check above.
        -- Everything since the inner BEGIN is undone. Any other unique key is not this function's to explain.
        GET STACKED DIAGNOSTICS v_constraint = CONSTRAINT_NAME;
        IF v_constraint IS DISTINCT FROM 'leases_pkey' THEN
          RAISE;
        END IF;
        RETURN jsonb_build_object('granted', false, 'tokenUsed', true, 'key', p_keys[1], 'holder', NULL, 'expiresAt', NULL,
                                  'queued', false, 'now', v_now);
      WHEN SQLSTATE 'WR001' THEN
        -- Everything since the inner BEGIN is undone. A key refused after waiting for its row lock may have
        -- been taken by a twin, an acquisition with this very lease id that passed the check above before
        -- this one and committed meanwhile: this statement's snapshot is newer than the check's (READ
        -- COMMITTED), so it sees that lease, and the refusal is tokenUsed, never "held by" the lease itself.
        IF EXISTS (SELECT 1 FROM leases WHERE lease_id = p_lease_id) THEN
          RETURN jsonb_build_object('granted', false, 'tokenUsed', true, 'key', p_keys[1], 'holder', NULL, 'expiresAt', NULL,
                                    'queued', false, 'now', v_now);
        END IF;
        -- This read only explains the verdict.
        SELECT holder, expires_at INTO v_holder, v_until FROM lease_keys WHERE key = v_key;
        RETURN jsonb_build_object('granted', false, 'key', v_key, 'holder', v_holder, 'expiresAt', v_until,
                                  'queued', NOT coalesce(v_holder IS NOT NULL AND v_until > v_now, false), 'now', v_now);
      END;
      RETURN jsonb_build_object('granted', true, 'epochs', v_epochs, 'expiresAt', v_expires, 'preempted', v_preempted, 'now', v_now);
    END
    $$;
  `,
};
