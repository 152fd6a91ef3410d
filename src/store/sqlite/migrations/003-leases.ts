import type { Migration } from './types.js';

/**
 * Coordination tables. `lease_keys` has one row per coordination key that was ever leased; its
 * `epoch` is the fencing high-water mark and only grows (kept on release and expiry). `leases` is one
 * row per acquisition (all keys of it share lease_id and token). Waiters are two tables so that one
 * waiter (one ticket, one place in the age order) can wait for several keys at once. The history is
 * append-only, for audit and for tests that replay it.
 */
export const leases: Migration = {
  version: 3,
  name: 'leases, fencing epochs, wait queue, lease history',
  sql: `
    CREATE TABLE lease_keys (
      key             TEXT    PRIMARY KEY,
      epoch           INTEGER NOT NULL DEFAULT 0 CHECK (epoch >= 0),
      lease_id        TEXT,
      holder          TEXT,
      holder_instance TEXT,
      token_hash      TEXT,
      priority        INTEGER,
      acquired_at     INTEGER,
      renewed_at      INTEGER,
      expires_at      INTEGER,
      duration_ms     INTEGER,
      transitions     INTEGER NOT NULL DEFAULT 0,
      last_holder     TEXT,
      prev_lease_id   TEXT,
      preempted_by    TEXT
    ) WITHOUT ROWID;
    CREATE INDEX lease_keys_lease ON lease_keys (lease_id);
    CREATE INDEX lease_keys_holder ON lease_keys (holder);

    CREATE TABLE leases (
      lease_id        TEXT    PRIMARY KEY,
      holder          TEXT    NOT NULL,
      holder_instance TEXT,
      resources       TEXT    NOT NULL,
      epochs          TEXT    NOT NULL,
      token_hash      TEXT    NOT NULL,
      priority        INTEGER NOT NULL,
      state           TEXT    NOT NULL CHECK (state IN ('ACTIVE', 'RELEASED', 'EXPIRED', 'PREEMPTED')),
      created_at      INTEGER NOT NULL,
      renewed_at      INTEGER NOT NULL,
      expires_at      INTEGER NOT NULL,
      duration_ms     INTEGER NOT NULL,
      ended_at        INTEGER,
      preempted_by    TEXT
    ) WITHOUT ROWID;
    CREATE INDEX leases_token ON leases (token_hash);
    CREATE INDEX leases_holder ON leases (holder, state);

    CREATE TABLE lease_waiters (
      ticket          INTEGER PRIMARY KEY AUTOINCREMENT,
      holder          TEXT    NOT NULL,
      holder_instance TEXT,
      priority        INTEGER NOT NULL,
      enqueued_at     INTEGER NOT NULL,
      deadline        INTEGER NOT NULL
    );
    CREATE INDEX lease_waiters_deadline ON lease_waiters (deadline);
    CREATE TABLE lease_waiter_keys (
      key    TEXT    NOT NULL,
      ticket INTEGER NOT NULL REFERENCES lease_waiters (ticket) ON DELETE CASCADE,
      PRIMARY KEY (key, ticket)
    ) WITHOUT ROWID;
    CREATE INDEX lease_waiter_keys_ticket ON lease_waiter_keys (ticket);

    CREATE TABLE lease_history (
      seq      INTEGER PRIMARY KEY AUTOINCREMENT,
      at       INTEGER NOT NULL,
      event    TEXT    NOT NULL CHECK (event IN ('ACQUIRE', 'RENEW', 'RELEASE', 'PREEMPT', 'EXPIRE')),
      key      TEXT    NOT NULL,
      epoch    INTEGER NOT NULL,
      lease_id TEXT    NOT NULL,
      holder   TEXT    NOT NULL,
      actor    TEXT
    );
    CREATE INDEX lease_history_key ON lease_history (key, seq);
    CREATE INDEX lease_history_lease ON lease_history (lease_id);
  `,
};
