import type { ReceiptLog } from './receipt-log.js';

/**
 * What reconciliation needs from an upstream: whether the write carrying this receipt id (sent as
 * `Writ-Receipt-Id`) was applied, and at which version. src/upstream/client.ts implements it over HTTP.
 */
export interface UpstreamLookup {
  lookup(resourceKey: string, receiptId: string): Promise<{ applied: boolean; revision?: number }>;
}

export interface ReconcileReport {
  examined: number;
  completed: string[];
  failed: string[];
  /** The upstream could not be asked; these stay PENDING for a later run. */
  unresolved: { receipt_id: string; error: string }[];
}

/**
 * Settles PENDING receipts from the upstream's own record: applied → COMPLETED at the upstream's
 * revision, not applied → FAILED. Run it on start-up. `createdAtLeastMsAgo` must leave out writes that
 * may still be in flight in a live process (longer than the upstream timeout, so that the write's
 * Writ-Deadline has passed); it is judged by the store's clock, which every replica shares, never by
 * this process's (a replica whose clock runs ahead would ask about writes another replica still has in
 * flight, settle them FAILED, and the upstream would then apply them). After a crash of the only writer, none are in flight.
 */
export async function reconcilePending(
  log: ReceiptLog,
  upstream: UpstreamLookup,
  options: { createdAtLeastMsAgo?: number } = {},
): Promise<ReconcileReport> {
  const report: ReconcileReport = { examined: 0, completed: [], failed: [], unresolved: [] };
  let after: number | undefined;
  for (;;) {
    const page = await log.pending({ createdAtLeastMsAgo: options.createdAtLeastMsAgo, after, limit: 200 });
    for (const receipt of page.receipts) {
      report.examined += 1;
      let found: { applied: boolean; revision?: number };
      try {
        found = await upstream.lookup(receipt.resource_key, receipt.receipt_id);
      } catch (e) {
        report.unresolved.push({ receipt_id: receipt.receipt_id, error: e instanceof Error ? e.message : String(e) });
        continue;
      }
      const settled = found.applied
        ? await log.reconcile(receipt.receipt_id, { status: 'COMPLETED', final_version: found.revision ?? null, note: 'applied by upstream' })
        : await log.reconcile(receipt.receipt_id, {
            status: 'FAILED',
            error: { code: 'UPSTREAM_FAILED', message: 'not applied by upstream' },
            note: 'not applied by upstream',
          });
      if (settled.replayed) continue; // settled meanwhile by its writer
      (settled.status === 'COMPLETED' ? report.completed : report.failed).push(receipt.receipt_id);
    }
    if (page.next === null) return report;
    after = page.next;
  }
}
