import type { PostgresMigration } from './types.js';

/** Class id (the first int4 of pg_advisory_xact_lock(int4, int4)) of the lock on a key family: 'wrlf'. */
export const LEASE_FAMILY_LOCK_CLASS = 0x77726c66;

/**
 * Key families (src/wire/key-family.ts; the contract in src/lease/repository.ts): a key `R#f` is a child of
 * its root `R`. As SQLite's lease repository:
 * - A key is refused while a related key (its root if it is a child, its children if it is a root; never
 *   its siblings) is held by another lease. With preemption, such a lease is taken over as one holding the
 *   key is: only from a holder in p_preemptable (else refused); it ends PREEMPTED, all its keys freed.
 * - A taken key's epoch is one above the highest of its family (root and children): one counter per family.
 * - A live waiter ahead on a related key blocks a newcomer as one on the key does (writ_lease_family_queued_ahead).
 *   A takeover passes the queue whether the lease it ends holds the key itself or a related key (helper 131).
 * - A lease that lapsed holding a related key is ended (EXPIRED), so a renewal that read the clock before
 *   it lapsed waits for this row and is then refused, never revives it beside the new holder.
 * - A refusal because a related key is held names it (heldKey), its holder and expiry; not queued.
 *
 * Concurrency: READ COMMITTED replicas could each check and take different rows of one family (the checks
 * read other rows, which no row lock covers). So a family is serialised: before anything else, the
 * function takes a transaction advisory lock per distinct root of its keys, in ascending order of the lock
 * id (no deadlock; two roots with one hash share a lock, which only serialises more). Each check after it is
 * a new statement, with a snapshot that sees every family member committed by then. A key is now made
 * (epoch 0, raised to the floor by its trigger) and then taken by one conditional UPDATE, whose returned
 * row is the verdict; a refusal undoes both (the inner block). As migration 11's function otherwise.
 */
export const leaseKeyFamilies: PostgresMigration = {
  version: 16,
  name: 'lease key families: a root and its children are never held by two leases at once; one epoch counter per family',
  sql: `
    CREATE FUNCTION writ_lease_family_queued_ahead(p_key text, p_priority integer, p_ticket bigint, p_now bigint)
      RETURNS boolean LANGUAGE sql STABLE AS $$
        SELECT EXISTS (
          SELECT 1 FROM lease_waiter_keys wk JOIN lease_waiters w ON w.ticket = wk.ticket
           WHERE (wk.key = p_key
                  OR (strpos(p_key, '#') > 0 AND wk.key = split_part(p_key, '#', 1))
                  OR (strpos(p_key, '#') = 0 AND wk.key COLLATE "C" >= (p_key || '#') COLLATE "C"
                                             AND wk.key COLLATE "C" < (p_key || '$') COLLATE "C"))
             AND w.deadline > p_now AND w.ticket <> p_ticket
             AND (w.priority > p_priority OR (w.priority = p_priority AND w.ticket < p_ticket)))
      $$;

    -- The lease a key was taken from (or, preempting, a related key freed from) ends: preempted (its other
    -- keys are freed too) or expired. Returns the preempted entries to report.
    CREATE FUNCTION writ_lease_end_previous(p_prev_lease_id text, p_key text, p_epoch bigint, p_by_pre boolean,
                                            p_holder text, p_now bigint)
      RETURNS jsonb LANGUAGE plpgsql VOLATILE AS $$
    DECLARE
      v_prev      record;
      v_other     text;
      v_other_ep  bigint;
      v_preempted jsonb := '[]';
    BEGIN
      SELECT holder, resources INTO v_prev FROM leases WHERE lease_id = p_prev_lease_id;
      UPDATE leases SET state = CASE WHEN p_by_pre THEN 'PREEMPTED' ELSE 'EXPIRED' END, ended_at = p_now,
                        preempted_by = CASE WHEN p_by_pre THEN p_holder END
       WHERE lease_id = p_prev_lease_id AND state = 'ACTIVE';
      INSERT INTO lease_history (at, event, key, epoch, lease_id, holder, actor)
      VALUES (p_now, CASE WHEN p_by_pre THEN 'PREEMPT' ELSE 'EXPIRE' END, p_key, p_epoch,
              p_prev_lease_id, coalesce(v_prev.holder, ''), p_holder);
      IF NOT p_by_pre THEN
        RETURN v_preempted;
      END IF;
      v_preempted := jsonb_build_array(jsonb_build_object('lease_id', p_prev_lease_id,
        'holder', coalesce(v_prev.holder, ''), 'key', p_key, 'epoch', p_epoch));
      FOREACH v_other IN ARRAY coalesce(v_prev.resources, '{}'::text[]) LOOP
        UPDATE lease_keys SET lease_id = NULL, holder = NULL, holder_instance = NULL, token_hash = NULL,
                              priority = NULL, expires_at = NULL
         WHERE key = v_other AND lease_id = p_prev_lease_id
        RETURNING epoch INTO v_other_ep;
        IF FOUND THEN
          INSERT INTO lease_history (at, event, key, epoch, lease_id, holder, actor)
          VALUES (p_now, 'PREEMPT', v_other, v_other_ep, p_prev_lease_id, coalesce(v_prev.holder, ''), p_holder);
          v_preempted := v_preempted || jsonb_build_array(jsonb_build_object('lease_id', p_prev_lease_id,
            'holder', coalesce(v_prev.holder, ''), 'key', v_other, 'epoch', v_other_ep));
        END IF;
      END LOOP;
      RETURN v_preempted;
    END
    $$;

    CREATE OR REPLACE FUNCTION writ_lease_acquire(
      p_keys text[], p_lease_id text, p_token_hash text, p_holder text, p_instance text, p_priority integer,
      p_ttl bigint, p_preempt boolean, p_preemptable text[], p_ticket bigint
    ) RETURNS jsonb LANGUAGE plpgsql VOLATILE AS $$
    DECLARE
      v_now       bigint := writ_now_ms();
      v_expires   bigint := v_now + p_ttl;
      v_key       text;
      v_root      text;
      v_is_root   boolean;
      v_lock      integer;
      v_epochs    jsonb := '{}';
      v_preempted jsonb := '[]';
      v_taken     record;
      v_rel       record;
      v_freed_ep  bigint;
      v_holder    text;
      v_until     bigint;
      v_constraint text;
      v_took_over boolean;
    BEGIN
      -- A lease id, like its token, is used once: a lease with it (live or ended) refuses before any key is looked at.
      IF EXISTS (SELECT 1 FROM leases WHERE lease_id = p_lease_id) THEN
        RETURN jsonb_build_object('granted', false, 'tokenUsed', true, 'key', p_keys[1], 'holder', NULL, 'expiresAt', NULL,
                                  'queued', false, 'now', v_now);
      END IF;
      -- One family at a time (see the migration's comment): a lock per distinct root, in ascending lock id.
      FOR v_lock IN SELECT DISTINCT hashtext(split_part(u.key, '#', 1)) FROM unnest(p_keys) AS u (key) ORDER BY 1 LOOP
        PERFORM pg_advisory_xact_lock(${LEASE_FAMILY_LOCK_CLASS}, v_lock);
      END LOOP;
      BEGIN
        FOREACH v_key IN ARRAY p_keys LOOP
          v_root := split_part(v_key, '#', 1);
          v_is_root := v_root = v_key;
          -- The key's row first (made at epoch 0, raised to the floor by its trigger): lease_keys is written
          -- before any leases row is locked, as an epoch bump (LOCK TABLE lease_keys, then leases) orders them.
          INSERT INTO lease_keys (key, epoch, transitions) VALUES (v_key, 0, 0) ON CONFLICT (key) DO NOTHING;
          v_took_over := false;
          IF p_preempt THEN
            -- Related keys held by other leases are taken over with the key: all from preemptable holders, or refused.
            IF EXISTS (SELECT 1 FROM lease_keys o
                        WHERE ((NOT v_is_root AND o.key = v_root)
                               OR (v_is_root AND o.key COLLATE "C" >= (v_key || '#') COLLATE "C" AND o.key COLLATE "C" < (v_key || '$') COLLATE "C"))
                          AND o.holder IS NOT NULL AND o.expires_at > v_now AND o.lease_id <> p_lease_id
                          AND p_preemptable IS NOT NULL AND NOT (o.holder = ANY (p_preemptable))) THEN
              RAISE EXCEPTION USING ERRCODE = 'WR001', MESSAGE = 'lease key refused';
            END IF;
            FOR v_rel IN SELECT o.key, o.lease_id FROM lease_keys o
                          WHERE ((NOT v_is_root AND o.key = v_root)
                                 OR (v_is_root AND o.key COLLATE "C" >= (v_key || '#') COLLATE "C" AND o.key COLLATE "C" < (v_key || '$') COLLATE "C"))
                            AND o.holder IS NOT NULL AND o.expires_at > v_now AND o.lease_id <> p_lease_id
                          ORDER BY o.key COLLATE "C" LOOP
              -- Freed first, so the lease's end records its PREEMPT once; a row of a lease an earlier one ended is skipped.
              UPDATE lease_keys SET lease_id = NULL, holder = NULL, holder_instance = NULL, token_hash = NULL,
                                    priority = NULL, expires_at = NULL
               WHERE key = v_rel.key AND lease_id = v_rel.lease_id
              RETURNING epoch INTO v_freed_ep;
              IF FOUND THEN
                v_preempted := v_preempted || writ_lease_end_previous(v_rel.lease_id, v_rel.key, v_freed_ep, true, p_holder, v_now);
              END IF;
              v_took_over := true;
            END LOOP;
          END IF;
          UPDATE leases SET state = 'EXPIRED', ended_at = v_now
           WHERE state = 'ACTIVE' AND expires_at <= v_now AND lease_id IN (
             SELECT o.lease_id FROM lease_keys o
              WHERE ((NOT v_is_root AND o.key = v_root)
                     OR (v_is_root AND o.key COLLATE "C" >= (v_key || '#') COLLATE "C" AND o.key COLLATE "C" < (v_key || '$') COLLATE "C"))
                AND o.holder IS NOT NULL AND o.expires_at <= v_now AND o.lease_id <> p_lease_id);

          -- The verdict is whether this one statement returns a row; the family's epoch + 1 happens in it
          -- (never below the key's own + 1: k.epoch is this row's latest version).
          UPDATE lease_keys AS k SET
            epoch = greatest(k.epoch, (SELECT max(f.epoch) FROM lease_keys f
                                        WHERE f.key = v_root OR (f.key COLLATE "C" >= (v_root || '#') COLLATE "C"
                                                                 AND f.key COLLATE "C" < (v_root || '$') COLLATE "C"))) + 1,
            prev_lease_id = k.lease_id,
            lease_id = p_lease_id, holder = p_holder, holder_instance = p_instance, token_hash = p_token_hash,
            priority = p_priority, acquired_at = v_now, renewed_at = v_now, expires_at = v_expires, duration_ms = p_ttl,
            transitions = k.transitions + CASE WHEN k.last_holder IS NOT NULL AND k.last_holder <> p_holder THEN 1 ELSE 0 END,
            last_holder = p_holder,
            preempted_by = CASE WHEN p_preempt AND k.holder IS NOT NULL AND k.expires_at > v_now THEN p_holder ELSE NULL END
          WHERE k.key = v_key
            AND CASE WHEN NOT p_preempt THEN
                  (k.holder IS NULL OR k.expires_at <= v_now)
                  AND NOT writ_lease_family_queued_ahead(v_key, p_priority, p_ticket, v_now)
                ELSE
                  (p_preemptable IS NULL OR k.holder IS NULL OR k.expires_at <= v_now OR k.holder = ANY (p_preemptable))
                  AND ((k.holder IS NOT NULL AND k.expires_at > v_now) OR v_took_over
                       OR NOT writ_lease_family_queued_ahead(v_key, p_priority, p_ticket, v_now))
                END
            AND NOT EXISTS (SELECT 1 FROM lease_keys o
                             WHERE ((NOT v_is_root AND o.key = v_root)
                                    OR (v_is_root AND o.key COLLATE "C" >= (v_key || '#') COLLATE "C" AND o.key COLLATE "C" < (v_key || '$') COLLATE "C"))
                               AND o.holder IS NOT NULL AND o.expires_at > v_now AND o.lease_id <> p_lease_id)
          RETURNING k.epoch, k.prev_lease_id, k.preempted_by INTO v_taken;
          IF NOT FOUND THEN
            RAISE EXCEPTION USING ERRCODE = 'WR001', MESSAGE = 'lease key refused';
          END IF;
          v_epochs := v_epochs || jsonb_build_object(v_key, v_taken.epoch);
          IF v_taken.prev_lease_id IS NOT NULL THEN
            -- The previous holder's epoch: the key's before this take (the family counter may have moved it more than one).
            v_preempted := v_preempted || writ_lease_end_previous(v_taken.prev_lease_id, v_key,
              coalesce((SELECT (l.epochs ->> v_key)::bigint FROM leases l WHERE l.lease_id = v_taken.prev_lease_id), 0),
              v_taken.preempted_by IS NOT NULL, p_holder, v_now);
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
        -- Everything since the inner BEGIN is undone. A twin (this lease id) that committed meanwhile: tokenUsed (migration 11).
        IF EXISTS (SELECT 1 FROM leases WHERE lease_id = p_lease_id) THEN
          RETURN jsonb_build_object('granted', false, 'tokenUsed', true, 'key', p_keys[1], 'holder', NULL, 'expiresAt', NULL,
                                    'queued', false, 'now', v_now);
        END IF;
        -- These reads only explain the verdict: the key held, else a related key held, else a waiter ahead.
        SELECT holder, expires_at INTO v_holder, v_until FROM lease_keys WHERE key = v_key;
        IF NOT coalesce(v_holder IS NOT NULL AND v_until > v_now, false) THEN
          SELECT o.key, o.holder, o.expires_at INTO v_rel FROM lease_keys o
           WHERE ((NOT v_is_root AND o.key = v_root)
                  OR (v_is_root AND o.key COLLATE "C" >= (v_key || '#') COLLATE "C" AND o.key COLLATE "C" < (v_key || '$') COLLATE "C"))
             AND o.holder IS NOT NULL AND o.expires_at > v_now AND o.lease_id <> p_lease_id
           ORDER BY o.key COLLATE "C" LIMIT 1;
          IF FOUND THEN
            RETURN jsonb_build_object('granted', false, 'key', v_key, 'holder', v_rel.holder, 'expiresAt', v_rel.expires_at,
                                      'queued', false, 'heldKey', v_rel.key, 'now', v_now);
          END IF;
        END IF;
        RETURN jsonb_build_object('granted', false, 'key', v_key, 'holder', v_holder, 'expiresAt', v_until,
                                  'queued', NOT coalesce(v_holder IS NOT NULL AND v_until > v_now, false), 'now', v_now);
      END;
      RETURN jsonb_build_object('granted', true, 'epochs', v_epochs, 'expiresAt', v_expires, 'preempted', v_preempted, 'now', v_now);
    END
    $$;
  `,
};
