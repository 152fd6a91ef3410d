import { WritError } from '../errors.js';
import { GOVERNANCE_ID } from '../graph/model.js';
import { checkDecisionBinding, verifyDecision } from '../decision/index.js';
import { checkAuthorityStillValid } from '../gateway/authority-watermark.js';
import type { IncidentRecord } from '../store/types.js';
import type { WritContext } from './context.js';

export type Incident = IncidentRecord;

/**
 * Declares an incident. It needs an allow decision for `declare_incident` on `incident:<id>` (so who may
 * declare is governed by the graph like everything else). While active, principals with a `preempts`
 * edge may take over leases.
 */
export async function declareIncident(ctx: WritContext, caller: string, input: { id: string; reason: string; ttl_ms?: number; decision: string }): Promise<Incident> {
  const now = ctx.clock.now();
  const claims = await verifyDecision(input.decision, { keys: ctx.keys, audience: ctx.config.gatewayAudience, now });
  checkDecisionBinding(claims, { principal: caller, action: 'declare_incident', resource: `incident:${input.id}`, environment: claims.environment, fields: claims.fields });
  checkAuthorityStillValid(ctx.graph.current(), claims, now);
  // (remember() refuses an id already expired at `now`; verifyDecision has just checked it is not.)
  if (!ctx.replay.remember('decision', claims.decision_id, claims.expires_at, now)) {
    throw new WritError('DECISION_REPLAYED', `decision ${claims.decision_id} was already used`);
  }
  const ttl = input.ttl_ms ?? 3_600_000;
  if (!Number.isInteger(ttl) || ttl <= 0 || ttl > 7 * 86_400_000) throw new WritError('UNPROCESSABLE', 'ttl_ms must be between 1 ms and 7 days');
  const incident: Incident = { id: input.id, declared_by: caller, reason: input.reason, decision_id: claims.decision_id, declared_at: now, ends_at: now + ttl, resolved_at: null };
  if (!ctx.incidents.declare(incident)) throw new WritError('ALREADY_EXISTS', `incident ${input.id} was already declared`);
  return incident;
}

export function resolveIncident(ctx: WritContext, caller: string, id: string): Incident {
  const row = ctx.incidents.get(id);
  if (!row) throw new WritError('NOT_FOUND', `no incident ${id}`);
  if (caller !== row.declared_by && caller !== GOVERNANCE_ID) throw new WritError('FORBIDDEN', `only ${row.declared_by} or governance may resolve incident ${id}`);
  ctx.incidents.resolve(id, ctx.clock.now());
  return ctx.incidents.get(id)!;
}

export function activeIncidents(ctx: WritContext): Incident[] {
  return ctx.incidents.active(ctx.clock.now());
}
