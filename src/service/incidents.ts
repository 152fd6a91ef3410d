import { WritError } from '../errors.js';
import type { AuthorityGraph } from '../graph/index.js';
import { GOVERNANCE_ID } from '../graph/model.js';
import { checkDecisionBinding, decisionSpendRefused } from '../decision/index.js';
import { checkAuthorityStillValid } from '../gateway/authority-watermark.js';
import type { IncidentRecord } from '../lease/index.js';
import type { WritContext } from './context.js';
import { explain } from './decide.js';
import { checkReason } from './validate.js';
import { verifyPresentedDecision } from './presented-decision.js';

export type Incident = IncidentRecord;

/**
 * Declares an incident. It needs an allow decision for `declare_incident` on `incident:<id>` (so who may
 * declare is governed by the graph like everything else), and it is declared for that decision's
 * environment: while active, principals with a `preempts` edge may take over leases in that environment
 * only (see `incidentsCounting`).
 */
export async function declareIncident(ctx: WritContext, caller: string, input: { id: string; reason: string; ttl_ms?: number; decision: string }): Promise<Incident> {
  checkReason(input.reason, 'an incident');
  const now = ctx.clock.now();
  const claims = await verifyPresentedDecision(ctx, input.decision, now);
  checkDecisionBinding(claims, { principal: caller, action: 'declare_incident', resource: `incident:${input.id}`, environment: claims.environment, fields: claims.fields });
  checkAuthorityStillValid(await ctx.graph.current(), claims, now);
  const ttl = input.ttl_ms ?? 3_600_000;
  if (!Number.isInteger(ttl) || ttl <= 0 || ttl > 7 * 86_400_000) throw new WritError('UNPROCESSABLE', 'ttl_ms must be between 1 ms and 7 days');
  const incident: Incident = { id: input.id, declared_by: caller, reason: input.reason, decision_id: claims.decision_id, environment: claims.environment, declared_at: now, ends_at: now + ttl, resolved_at: null };
  // The decision is spent with the declaration, or not at all.
  return ctx.store.readWrite(async (tx) => {
    // (An id already expired at `now` is refused too; verifyDecision has just checked it is not.)
    await tx.singleUse.spendOrRefuse('decision', claims.decision_id, claims.expires_at, now, (why) =>
      decisionSpendRefused(why, claims.decision_id, claims.expires_at, now, `decision ${claims.decision_id} was already used`));
    if (!(await tx.incidents.declare(incident))) throw new WritError('ALREADY_EXISTS', `incident ${input.id} was already declared`);
    return incident;
  });
}

export async function resolveIncident(ctx: WritContext, caller: string, id: string): Promise<Incident> {
  return ctx.store.readWrite(async (tx) => {
    const row = await tx.incidents.get(id);
    if (!row) throw new WritError('NOT_FOUND', `no incident ${id}`);
    if (caller !== row.declared_by && caller !== GOVERNANCE_ID) throw new WritError('FORBIDDEN', `only ${row.declared_by} or governance may resolve incident ${id}`);
    await tx.incidents.resolve(id, ctx.clock.now());
    return (await tx.incidents.get(id))!;
  });
}

/**
 * The incidents not resolved nor ended whose declarer still stands (declarerStands): those that can let
 * preemption happen, as GET /v1/incidents lists them. One whose declarer was revoked counts for nothing
 * and is not listed; governance can still resolve it by id.
 */
export async function activeIncidents(ctx: WritContext): Promise<Incident[]> {
  const now = ctx.clock.now();
  const [graph, active] = await Promise.all([ctx.graph.current(), ctx.store.read((tx) => tx.incidents.active(now))]);
  return active.filter((i) => declarerStands(graph, i.declared_by));
}

/**
 * For each environment, the ids of the active incidents that let preemption happen there: those declared
 * for it, and those declared before Writ recorded an incident's environment (`environment: null`) whose
 * declarer may declare that incident in it now (the policy is asked, nothing is signed or spent). The
 * declaring decision's environment of such an incident is lost; reading it as "every environment" would
 * keep the hole this closes open until it ends, and as "no environment" would take preemption away from a
 * commander in the middle of a real incident. What its declarer is allowed now is what it would have been
 * declared for had the environment been recorded, as far as Writ can still tell.
 */
export async function incidentsCounting(ctx: WritContext, environments: readonly string[]): Promise<Map<string, string[]>> {
  const active = await activeIncidents(ctx);
  const counting = new Map<string, string[]>();
  for (const environment of environments) {
    const ids: string[] = [];
    for (const i of active) {
      if (i.environment === environment || (i.environment === null && (await mayDeclareIn(ctx, i, environment)))) ids.push(i.id);
    }
    counting.set(environment, ids);
  }
  return counting;
}

/**
 * An incident counts only while the principal that declared it is registered and not revoked (any
 * recorded revocation, whatever time it records: replicas share the graph, not a clock). Revoking a
 * principal says it can no longer be trusted (its key compromised, say), and an incident it declared may
 * have been the pretext for taking leases over. Revoking its grant does not end the incident (a
 * commander's grant revoked at the end of a shift leaves the incident it declared standing).
 * Governance can still resolve any incident.
 */
export function declarerStands(graph: Pick<AuthorityGraph, 'principal'>, declarer: string): boolean {
  if (declarer === GOVERNANCE_ID) return true;
  const p = graph.principal(declarer);
  return p !== undefined && p.revoked_at === null;
}

async function mayDeclareIn(ctx: WritContext, incident: Incident, environment: string): Promise<boolean> {
  try {
    const verdict = await explain(ctx, GOVERNANCE_ID, { principal: incident.declared_by, action: 'declare_incident', resource: `incident:${incident.id}`, environment, fields: [] });
    return verdict.allow;
  } catch (e) {
    // A declarer no longer registered (or a request the policy data no longer accepts) declares nothing.
    if (e instanceof WritError) return false;
    throw e;
  }
}
