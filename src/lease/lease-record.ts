import type { LeaseKeyRow } from './repository.js';
import type { LeaseRecord } from './types.js';

/** A key's row in the Kubernetes Lease vocabulary (times in ms; the wire shows them RFC 3339). */
export function toLeaseRecord(row: LeaseKeyRow, now: number): LeaseRecord {
  const state = row.holder === null ? 'FREE' : row.expires_at !== null && row.expires_at > now ? 'HELD' : 'EXPIRED';
  return {
    key: row.key,
    holderIdentity: row.holder,
    holderInstance: row.holder_instance,
    leaseDurationSeconds: row.duration_ms === null ? null : row.duration_ms / 1000,
    acquireTime: row.acquired_at,
    renewTime: row.renewed_at,
    leaseTransitions: row.transitions,
    epoch: row.epoch,
    expiresAt: row.expires_at,
    leaseId: row.lease_id,
    priority: row.priority,
    state,
    preemptedBy: row.preempted_by,
  };
}
