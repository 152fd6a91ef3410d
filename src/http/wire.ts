/**
 * Domain objects → v1 wire shapes: the one place where the HTTP answers' instants (ms numbers inside
 * Writ) become RFC 3339 strings (src/wire/time.ts). Each wire type has one serializer here, used by
 * the routes and by the CLI's --json; where the SDK shares the type (src/wire/v1.ts) the serializer
 * returns it, so the compiler refuses a number where the type says a time.
 */
import type { Receipt as DomainReceipt } from '../audit/index.js';
import type { GraphExport } from '../graph/index.js';
import type { Edge, Principal } from '../graph/model.js';
import type { PolicyEdge } from '../graph/policy-view.js';
import type { LeaseRecord as DomainLeaseRecord, RenewedLease } from '../lease/index.js';
import type { DecisionOutcome, EdgeImpact, Explanation, ImpactReport, Incident as DomainIncident, LeaseOutcome, PolicyImpactReport, Revocation, WhyReport } from '../service/index.js';
import { toWireTime, toWireTimeOrNull } from '../wire/time.js';
import type { ChainEdge, Decision, Explanation as WireExplanation, Incident, LeaseGrant, LeaseRecord, LeaseRenewal, Receipt } from '../wire/v1.js';

export function principalToWire(p: Principal) {
  return { ...p, created_at: toWireTime(p.created_at), revoked_at: toWireTimeOrNull(p.revoked_at) };
}

/** An edge's time window and revocation; the rest of the edge as it is. */
export function edgeToWire<T extends Pick<Edge, 'created_at' | 'not_before' | 'expires_at' | 'revoked_at'>>(e: T) {
  return {
    ...e,
    created_at: toWireTime(e.created_at),
    not_before: toWireTimeOrNull(e.not_before),
    expires_at: toWireTimeOrNull(e.expires_at),
    revoked_at: toWireTimeOrNull(e.revoked_at),
  };
}

export function chainEdgeToWire(e: PolicyEdge): ChainEdge {
  return edgeToWire(e);
}

export function decisionToWire(d: DecisionOutcome): Decision {
  return { ...d, chain_edges: d.chain_edges.map(chainEdgeToWire), issued_at: toWireTime(d.issued_at), expires_at: toWireTimeOrNull(d.expires_at) };
}

export function explanationToWire(x: Explanation): WireExplanation {
  return { ...x, chains: x.chains.map((c) => ({ edges: c.edges.map(chainEdgeToWire), verdict: c.verdict })) };
}

export function leaseGrantToWire(g: LeaseOutcome): LeaseGrant {
  return { ...g, expires_at: toWireTime(g.expires_at) };
}

export function leaseRenewalToWire(r: RenewedLease): LeaseRenewal {
  return { ...r, expires_at: toWireTime(r.expires_at) };
}

/**
 * The folded receipt on the wire. Only this view changes: the stored, hash-chained entry bodies keep
 * their ms `at` (the chain verifies over them as they were written).
 */
export function receiptToWire(r: DomainReceipt): Receipt {
  return {
    ...r,
    created_at: toWireTime(r.created_at),
    completed_at: toWireTimeOrNull(r.completed_at),
    entries: r.entries.map((e) => ({ ...e, at: toWireTime(e.at) })),
  };
}

function revocationToWire(r: Revocation) {
  return { revoked_at: toWireTime(r.revoked_at), graph_revision: r.graph_revision, revoked_by: r.revoked_by, reason: r.reason };
}

/** `GET /v1/receipts/{id}/why` and `writ why --format json`. */
export function whyToWire(w: WhyReport) {
  return {
    receipt: receiptToWire(w.receipt),
    graph_revision: w.graph_revision,
    chain: w.chain.map((l) => ({ edge: chainEdgeToWire(l.edge), now: l.now && revocationToWire(l.now) })),
    principals_revoked: w.principals_revoked.map((p) => ({ principal: p.principal, ...revocationToWire(p) })),
  };
}

export function incidentToWire(i: DomainIncident): Incident {
  return { ...i, declared_at: toWireTime(i.declared_at), ends_at: toWireTime(i.ends_at), resolved_at: toWireTimeOrNull(i.resolved_at) };
}

export function leaseRecordToWire(l: DomainLeaseRecord): LeaseRecord {
  return { ...l, acquireTime: toWireTimeOrNull(l.acquireTime), renewTime: toWireTimeOrNull(l.renewTime), expiresAt: toWireTimeOrNull(l.expiresAt) };
}

export function graphExportToWire(g: GraphExport) {
  return { revision: g.revision, principals: g.principals.map(principalToWire), edges: g.edges.map(edgeToWire) };
}

function edgeImpactToWire(e: EdgeImpact) {
  return { edge: edgeToWire(e.edge), reasons: e.reasons };
}

/** `writ policy impact --json`: the replayed decisions' instants as on the wire. */
export function policyImpactToWire(r: PolicyImpactReport) {
  return {
    ...r,
    flips: r.flips.map((f) => ({ ...f, at: toWireTime(f.at) })),
    failures: r.failures.map((f) => ({ ...f, at: toWireTime(f.at) })),
    latest_recorded: r.latest_recorded && { ...r.latest_recorded, at: toWireTime(r.latest_recorded.at) },
  };
}

/** An impact report (src/service/impact.ts) for the wire: its edges and its time as RFC 3339. */
export function impactToWire(r: ImpactReport) {
  return {
    ...r,
    computed_at: toWireTime(r.computed_at),
    orphaned_delegations: r.orphaned_delegations.map(edgeImpactToWire),
    healed_delegations: r.healed_delegations.map(edgeImpactToWire),
    approvals_ending: r.approvals_ending.map(edgeImpactToWire),
  };
}
