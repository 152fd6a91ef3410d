import { reconcilePending, type ReconcileReport } from '../audit/index.js';
import type { WritContext } from './context.js';

/**
 * Settles PENDING receipts by asking each resource's upstream whether the write with that receipt id
 * was applied. On start-up (after a crash) every PENDING receipt is examined; the periodic sweep only
 * looks at receipts older than `olderThanMs` by the store's clock (the database's on PostgreSQL), so
 * writes still in flight in another process are left alone whatever this process's clock says.
 */
export function reconcileReceipts(ctx: WritContext, options: { olderThanMs?: number } = {}): Promise<ReconcileReport> {
  return reconcilePending(ctx.receipts, ctx.upstreams, options.olderThanMs !== undefined ? { createdAtLeastMsAgo: options.olderThanMs } : {});
}
