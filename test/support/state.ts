import { listLeases } from '../../src/service/index.js';
import type { Harness } from './harness.js';

/**
 * What a refused request must leave as it was, read through the service layer: the graph revision,
 * every lease key (holder, epoch, expiry, transitions), and the receipt chain (its length and head).
 */
export async function durableState(h: Harness): Promise<{ graphRevision: number; leases: unknown[]; chain: { ok: boolean; entries: number; head: string }; receipts: unknown[] }> {
  const chain = await h.ctx.receipts.verifyChain();
  const receipts: unknown[] = [];
  for (let after: number | undefined; ;) {
    const page = await h.ctx.receipts.query({ limit: 1000, ...(after === undefined ? {} : { after }) });
    receipts.push(...page.receipts);
    if (page.next === null) break;
    after = page.next;
  }
  return {
    graphRevision: (await h.ctx.graph.current()).revision,
    leases: (await listLeases(h.ctx, {})).leases,
    chain: { ok: chain.ok, entries: chain.entries, head: chain.head },
    receipts,
  };
}

/** The state minus the REJECTED receipts a refused write leaves by design (the gateway records its refusals). */
export async function stateBesidesRejections(h: Harness) {
  const s = await durableState(h);
  return {
    graphRevision: s.graphRevision,
    leases: s.leases,
    chainOk: s.chain.ok,
    receipts: s.receipts.filter((r) => (r as { status: string }).status !== 'REJECTED'),
  };
}
