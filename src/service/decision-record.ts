import type { DecisionRecord } from '../decision-log/index.js';
import { POLICY_ENTRYPOINTS } from '../policy/index.js';
import type { DecisionInput, DecisionResult } from '../policy/types.js';
import { toWireTime, toWireTimeOrNull } from '../wire/time.js';
import type { DecisionOutcome } from './decide.js';

/**
 * A decision as a decision log event (OPA's shape). `input` is the request as the policy judged it
 * (request, properties, context, owners, the verified approval) without the candidate chains and
 * principals: those are the graph at `writ.graph_revision`, which `writ graph export --at` rebuilds.
 */
export function decisionRecord(
  outcome: DecisionOutcome,
  input: DecisionInput,
  result: DecisionResult,
  meta: { via: 'v1' | 'authzen'; askedBy: string; elapsedNs: number; requestedBy?: string },
): DecisionRecord {
  return {
    decision_id: outcome.decision_id,
    bundles: { writ: { revision: outcome.policy_revision } },
    path: POLICY_ENTRYPOINTS[0],
    input: {
      request: input.request,
      properties: input.properties ?? { subject: {}, resource: {}, action: {} },
      context: input.context ?? {},
      owners: input.owners,
      approval: input.approval ? { by: input.approval.by, edges: input.approval.edges.map((e) => e.id) } : null,
    },
    result: { allow: result.allow, reasons: result.reasons, obligations: result.obligations, risk: result.risk },
    timestamp: toWireTime(outcome.issued_at),
    ...(meta.requestedBy !== undefined ? { requested_by: meta.requestedBy } : {}),
    metrics: { timer_writ_decide_ns: meta.elapsedNs },
    writ: {
      principal: outcome.principal,
      asked_by: meta.askedBy,
      front_door: meta.via,
      graph_revision: outcome.graph_revision,
      chain: outcome.chain,
      expires_at: toWireTimeOrNull(outcome.expires_at),
    },
  };
}
