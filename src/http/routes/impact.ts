import type { FastifyInstance } from 'fastify';
import { analyseImpact, type ImpactChange } from '../../service/index.js';
import { AUTHENTICATED, errorResponses, ref, WITH_INPUT } from '../components.js';
import { impactBody } from '../schemas.js';
import { impactToWire } from '../wire.js';

const strings = { type: 'array', items: { type: 'string' } } as const;
const iso = { type: 'string', format: 'date-time', description: 'RFC 3339 time' } as const;
const isoOrNullSchema = { type: ['string', 'null'], format: 'date-time', description: 'RFC 3339 time, or null' } as const;

const capability = {
  type: 'object', required: ['action', 'resource', 'environment', 'fields', 'via'],
  description: 'An action on a resource pattern in an environment, for these fields (`*`: every field)',
  properties: {
    action: { type: 'string' }, resource: { type: 'string' }, environment: { type: 'string' }, fields: strings,
    via: { type: 'array', items: strings, description: 'edge ids of the chains (governance first) that give it, or would give it' },
  },
} as const;
const principalImpact = {
  type: 'object', required: ['principal', 'capabilities'],
  properties: { principal: { type: 'string' }, capabilities: { type: 'array', items: capability } },
} as const;
const impactEdge = {
  type: 'object', required: ['edge', 'reasons'],
  properties: {
    edge: {
      type: 'object', required: ['id', 'kind', 'from', 'to', 'scope', 'max_depth', 'creator', 'reason', 'created_at', 'not_before', 'expires_at', 'revoked_at'],
      properties: {
        id: { type: 'string' }, kind: { type: 'string' }, from: { type: 'string' }, to: { type: 'string' }, scope: ref('Scope'),
        max_depth: { type: ['integer', 'null'] }, creator: { type: 'string' }, reason: { type: 'string' },
        created_at: iso, not_before: isoOrNullSchema, expires_at: isoOrNullSchema, revoked_at: isoOrNullSchema,
      },
    },
    reasons: { ...strings, description: 'why it would become an orphan (the policy\'s delegation check) or stop counting' },
  },
} as const;
const impactReply = {
  type: 'object',
  description: 'What the change would do, computed on a copy of the graph: nothing was written (graph_revision is still the live one).',
  required: ['change', 'graph_revision', 'computed_at', 'principals_examined', 'exact', 'inexact_principals', 'through_change_only', 'lost', 'gained', 'leases_ending', 'orphaned_delegations', 'healed_delegations', 'approvals_ending'],
  properties: {
    change: { type: 'object', additionalProperties: true, description: 'the change analysed, as asked' },
    graph_revision: { type: 'integer', description: 'the live graph revision the copy was taken from' },
    computed_at: iso,
    principals_examined: { type: 'integer', description: 'the principals whose capabilities the change can touch: the revoked principal or the edge\'s to, and every principal below them; 0 for an owns, approves or preempts edge, which gives no capability' },
    exact: { type: 'boolean', description: 'false: lost and gained may be wrong for the principals in inexact_principals (before or after the change they had more chains adding to their valid ones than Writ judges for one principal, 64)' },
    inexact_principals: { ...strings, description: 'principals whose lost/gained may be wrong (empty when exact)' },
    through_change_only: { ...strings, description: 'principals the caller may learn about only as the other ends of its own edges the change makes or ends (no audit_read on them): their lost and gained count only the chains whose last edge is one of those edges, whatever else they hold (empty for governance and for an auditor of every principal concerned)' },
    lost: { type: 'array', items: principalImpact, description: 'capabilities principals would lose' },
    gained: { type: 'array', items: principalImpact, description: 'capabilities principals would gain' },
    leases_ending: {
      type: 'array', description: 'live leases whose recorded authority would no longer hold: their next renewal would be refused',
      items: {
        type: 'object', required: ['lease_id', 'holder', 'keys', 'code', 'reason'],
        properties: { lease_id: { type: 'string' }, holder: { type: 'string' }, keys: strings, code: { type: 'string' }, reason: { type: 'string' } },
      },
    },
    orphaned_delegations: { type: 'array', items: impactEdge, description: 'live delegations whose delegator would no longer hold what they give' },
    healed_delegations: { type: 'array', items: impactEdge, description: 'orphaned delegations that would hold again' },
    approvals_ending: { type: 'array', items: impactEdge, description: 'approves edges that would stop counting (approvals signed through them would be refused)' },
  },
} as const;

export function registerImpactRoutes(app: FastifyInstance): void {
  const ctx = app.writ;

  app.post<{ Body: ImpactChange }>('/v1/impact', {
    schema: {
      body: impactBody, operationId: 'analyseImpact', tags: ['Audit'],
      summary: 'Impact analysis: who would lose (or gain) what if an edge or a principal were revoked, or a delegation added. Changes nothing. '
        + 'Governance, or a holder of audit_read on every principal the report concerns, may ask; the principal who could make the change itself '
        + '(an edge\'s creator or from, a delegation\'s from) or a principal about its own revocation needs none for itself and the other ends of the edges the change makes or ends, '
        + 'of which it learns only what comes through those edges (through_change_only), but does for every principal below them. A principal the caller may not ask about is FORBIDDEN whether it exists or not; an edge it may not read (as GET /v1/edges/{id}) is UNKNOWN_EDGE, '
        + 'and a delegation id taken by an edge it may not read is judged as POST /v1/delegations judges it: as a free one, every refusal alike, then ALREADY_EXISTS saying only that the id is taken',
      response: {
        200: impactReply,
        ...errorResponses([...WITH_INPUT, ...AUTHENTICATED, 'FORBIDDEN', 'UNKNOWN_EDGE', 'UNKNOWN_PRINCIPAL', 'UNPROCESSABLE', 'ATTENUATION_VIOLATION', 'TOO_MANY_DELEGATIONS', 'ALREADY_EXISTS', 'POLICY_UNAVAILABLE', 'BUDGET_EXCEEDED']),
      },
    },
  }, async (request) => {
    const caller = await app.caller(request);
    return impactToWire(await analyseImpact(ctx, caller, request.body));
  });
}
