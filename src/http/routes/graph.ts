import type { FastifyInstance } from 'fastify';
import { WritError } from '../../errors.js';
import {
  createApproval, createDelegation, createGrant, createOwnership, createPreemption, exportGraph, getPrincipal,
  readableEdge, registerPrincipal, revokeEdge, revokePrincipal, unknownEdge, whomMayAsk,
  type ApprovalInput, type DelegationInput, type EdgeResult, type GrantInput, type OwnershipInput, type PreemptionInput, type PrincipalInput,
} from '../../service/index.js';
import type { EdgeRevoked, EdgeWritten } from '../../wire/v1.js';
import { AUTHENTICATED, errorResponses, ref, WITH_INPUT } from '../components.js';
import { checkOwn } from './audit-reads.js';
import { approvalBody, delegationBody, grantBody, ownershipBody, preemptionBody, principalBody, reasonQuery, revokeBody } from '../schemas.js';
import { edgeToWire, graphExportToWire, principalToWire } from '../wire.js';

const principalReply = (description: string, extra: object = {}) => ({
  type: 'object', description, required: ['principal', ...Object.keys(extra)], properties: { principal: ref('Principal'), ...extra },
});
const edgeReplySchema = (description: string) => ({
  type: 'object', description, required: ['edge', 'created', 'graph_revision'],
  properties: { edge: ref('Edge'), created: { type: 'boolean', description: 'false: an identical edge existed (idempotent)' }, graph_revision: { type: 'integer' } },
});
const graphRevision = { graph_revision: { type: 'integer' } };

/** The reason of a revocation: from the body or the `reason` query parameter (DELETE bodies are optional). */
function reasonOf(request: { body?: { reason?: string } | null; query: { reason?: string } }): string {
  return request.body?.reason ?? request.query.reason ?? 'revoked';
}

function edgeReply(r: EdgeResult): EdgeWritten {
  return { edge: edgeToWire(r.edge), created: r.created, graph_revision: r.graph_revision };
}

export function registerGraphRoutes(app: FastifyInstance): void {
  const ctx = app.writ;

  app.post<{ Body: PrincipalInput }>('/v1/principals', {
    schema: {
      body: principalBody, operationId: 'registerPrincipal', tags: ['Graph'], summary: 'Register a principal (governance only)',
      response: {
        200: principalReply('An identical principal existed (idempotent)', { created: { type: 'boolean' }, ...graphRevision }),
        201: principalReply('Registered', { created: { type: 'boolean' }, ...graphRevision }),
        ...errorResponses([...WITH_INPUT, ...AUTHENTICATED, 'FORBIDDEN', 'ALREADY_EXISTS', 'UNPROCESSABLE', 'GRAPH_LOG_UNHASHED']),
      },
    },
  }, async (request, reply) => {
    const caller = await app.caller(request);
    const r = await registerPrincipal(ctx, caller, request.body);
    return reply.code(r.created ? 201 : 200).send({ principal: principalToWire(r.principal), created: r.created, graph_revision: r.graph_revision });
  });

  app.get<{ Params: { id: string } }>('/v1/principals/:id', {
    schema: { operationId: 'getPrincipal', tags: ['Graph'], summary: 'Read a principal: the principal itself, an auditor (governance, audit_read on audit:principal:* in every environment) or a holder of audit_read on audit:principal:<id> in every environment may (anyone else: NOT_FOUND)', response: { 200: principalReply('The principal'), ...errorResponses([...AUTHENTICATED, 'UNKNOWN_PRINCIPAL', 'NOT_FOUND']) } },
  }, async (request) => {
    await app.caller(request);
    await checkOwn(ctx, request, request.params.id, 'principal'); // before the lookup: an unknown id and another's read alike
    return { principal: principalToWire(await getPrincipal(ctx, request.params.id)) };
  });

  app.delete<{ Params: { id: string }; Body: { reason?: string } | null; Querystring: { reason?: string } }>('/v1/principals/:id', {
    schema: {
      body: revokeBody, querystring: reasonQuery, operationId: 'revokePrincipal', tags: ['Graph'], summary: 'Revoke a principal (governance only); the reason goes in the optional body or the `reason` query parameter',
      response: { 200: principalReply('Revoked (revoking again changes nothing)', graphRevision), ...errorResponses([...WITH_INPUT, ...AUTHENTICATED, 'FORBIDDEN', 'UNKNOWN_PRINCIPAL', 'UNPROCESSABLE', 'GRAPH_LOG_UNHASHED']) },
    },
  }, async (request) => {
    const caller = await app.caller(request);
    const r = await revokePrincipal(ctx, caller, request.params.id, reasonOf(request));
    return { principal: principalToWire(r.principal), graph_revision: r.graph_revision };
  });

  const edgeErrors = errorResponses([...WITH_INPUT, ...AUTHENTICATED, 'FORBIDDEN', 'ATTENUATION_VIOLATION', 'TOO_MANY_DELEGATIONS', 'OWNERSHIP_CONFLICT', 'ALREADY_EXISTS', 'UNKNOWN_PRINCIPAL', 'UNPROCESSABLE', 'POLICY_UNAVAILABLE', 'BUDGET_EXCEEDED', 'GRAPH_LOG_UNHASHED']);
  const edgeRoute = <B>(path: string, operationId: string, schema: object, summary: string, create: (caller: string, body: B) => Promise<EdgeResult>) => {
    app.post<{ Body: B }>(path, {
      schema: { operationId, tags: ['Graph'], body: schema, summary, response: { 200: edgeReplySchema('An identical edge existed (idempotent)'), 201: edgeReplySchema('Created'), ...edgeErrors } },
    }, async (request, reply) => {
      const caller = await app.caller(request);
      const r = await create(caller, request.body as B);
      // A retry by id answers the edge made before, unless it has been revoked since: a 200 would read as
      // "delegated" to a caller that does not look at revoked_at (a manifest applied again leaves it so).
      if (r.edge.revoked_at !== null) {
        throw new WritError('ALREADY_EXISTS', `edge ${r.edge.id} was revoked at ${new Date(r.edge.revoked_at).toISOString()}: a revoked edge stays revoked; make a new one under a new id`, { edge_id: r.edge.id });
      }
      return reply.code(r.created ? 201 : 200).send(edgeReply(r));
    });
  };
  edgeRoute<GrantInput>('/v1/grants', 'createGrant', grantBody, 'Root grant governance → principal', (c, b) => createGrant(ctx, c, b));
  edgeRoute<DelegationInput>('/v1/delegations', 'createDelegation', delegationBody, 'Delegate part of your scope (attenuation enforced). An `id` taken by an edge the caller may not read (as GET /v1/edges/:id) is judged as if it were free, every check and error alike, and only then refused ALREADY_EXISTS saying the id is taken; one it may read answers as itself (200 for a retry with the same content, else ALREADY_EXISTS). A revoked delegate the caller may not ask about is UNKNOWN_PRINCIPAL, as one never registered', (c, b) => createDelegation(ctx, c, b));
  edgeRoute<OwnershipInput>('/v1/ownerships', 'createOwnership', ownershipBody, 'Assign the owner of managed state', (c, b) => createOwnership(ctx, c, b));
  edgeRoute<ApprovalInput>('/v1/approvals', 'createApproval', approvalBody, 'Let a principal approve another\'s risky actions', (c, b) => createApproval(ctx, c, b));
  edgeRoute<PreemptionInput>('/v1/preemptions', 'createPreemption', preemptionBody, 'Let a principal preempt another\'s leases during incidents', (c, b) => createPreemption(ctx, c, b));

  app.get<{ Params: { id: string } }>('/v1/edges/:id', {
    schema: { operationId: 'getEdge', tags: ['Graph'], summary: 'Read an edge: one the caller made, gives or holds, or one from or into a principal it may ask about (audit_read on audit:principal:<id> in every environment); an auditor any (anyone else: UNKNOWN_EDGE, as for none)', response: { 200: { type: 'object', description: 'The edge (revoked ones too)', required: ['edge'], properties: { edge: ref('Edge') } }, ...errorResponses([...AUTHENTICATED, 'UNKNOWN_EDGE']) } },
  }, async (request) => {
    const caller = await app.caller(request);
    // Whom the caller may ask about is read before the edge is looked up: an edge it may not read costs
    // the same work as an id no edge has, and gets the same answer.
    const asks = await whomMayAsk(ctx, caller);
    const edge = readableEdge(await ctx.graph.current(), caller, request.params.id, asks);
    if (!edge) throw unknownEdge(request.params.id);
    return { edge: edgeToWire(edge) };
  });

  app.delete<{ Params: { id: string }; Body: { reason?: string } | null; Querystring: { reason?: string } }>('/v1/edges/:id', {
    schema: {
      body: revokeBody, querystring: reasonQuery,
      operationId: 'revokeEdge', tags: ['Graph'], summary: 'Revoke an edge (governance, its creator or its `from`); every chain through it stops counting. The reason goes in the optional body or the `reason` query parameter. An edge the caller may not read (as GET /v1/edges/:id) is UNKNOWN_EDGE, as for none; FORBIDDEN, naming who may revoke it, only to a caller who may read it',
      response: {
        200: { type: 'object', description: 'Revoked (revoking again changes nothing)', required: ['edge', 'revoked', 'graph_revision'], properties: { edge: ref('Edge'), revoked: { type: 'boolean', description: 'false: it was revoked already' }, ...graphRevision } },
        ...errorResponses([...WITH_INPUT, ...AUTHENTICATED, 'FORBIDDEN', 'UNKNOWN_EDGE', 'GRAPH_LOG_UNHASHED']),
      },
    },
  }, async (request) => {
    const caller = await app.caller(request);
    const r = await revokeEdge(ctx, caller, request.params.id, reasonOf(request));
    return { edge: edgeToWire(r.edge), revoked: r.revoked, graph_revision: r.graph_revision } satisfies EdgeRevoked;
  });

  app.get<{ Querystring: { at?: string; format?: string } }>('/v1/graph', {
    schema: {
      operationId: 'exportGraph', tags: ['Graph'], summary: 'Graph export, optionally as of a revision or time (JSON; DOT with Accept: text/vnd.graphviz)',
      querystring: { type: 'object', additionalProperties: false, properties: { at: { type: 'string', description: 'a graph revision or an RFC 3339 time' }, format: { type: 'string', enum: ['json', 'dot'] } } },
      response: {
        200: {
          description: 'The graph (principals and edges sorted by id), or Graphviz DOT',
          content: {
            'application/json': { schema: { type: 'object', required: ['revision', 'principals', 'edges'], properties: { revision: { type: 'integer' }, principals: { type: 'array', items: ref('Principal') }, edges: { type: 'array', items: ref('Edge') } } } },
            'text/vnd.graphviz': { schema: { type: 'string' } },
          },
        },
        ...errorResponses([...WITH_INPUT, ...AUTHENTICATED, 'UNPROCESSABLE']),
      },
    },
  }, async (request, reply) => {
    await app.caller(request);
    const dot = request.query.format === 'dot' || (request.headers.accept ?? '').includes('text/vnd.graphviz');
    if (dot) return reply.type('text/vnd.graphviz').send(await exportGraph(ctx, request.query.at, 'dot'));
    return graphExportToWire(await exportGraph(ctx, request.query.at, 'json'));
  });
}
