import type { LeaseKeyRow } from './repository.js';
import type { LeaseRecord } from './types.js';

const iso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());

/** A key's row in the Kubernetes Lease vocabulary. */
export function toLeaseRecord(row: LeaseKeyRow, now: number): LeaseRecord {
  const state = row.holder === null ? 'FREE' : row.expires_at !== null && row.expires_at > now ? 'HELD' : 'EXPIRED';
  return {
    key: row.key,
    holderIdentity: row.holder,
    holderInstance: row.holder_instance,
    leaseDurationSeconds: row.duration_ms === null ? null : row.duration_ms / 1000,
    acquireTime: iso(row.acquired_at),
    renewTime: iso(row.renewed_at),
    leaseTransitions: row.transitions,
    epoch: row.epoch,
    expiresAt: iso(row.expires_at),
    leaseId: row.lease_id,
    priority: row.priority,
    state,
    preemptedBy: row.preempted_by,
  };
}
