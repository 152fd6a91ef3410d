import type { FastifyInstance } from 'fastify';
import { WritError } from '../../errors.js';
import {
  createApproval, createDelegation, createGrant, createOwnership, createPreemption, exportGraph, getPrincipal,
  registerPrincipal, revokeEdge, revokePrincipal,
  type ApprovalInput, type DelegationInput, type EdgeResult, type GrantInput, type OwnershipInput, type PreemptionInput, type PrincipalInput,
} from '../../service/index.js';
import { approvalBody, delegationBody, grantBody, ownershipBody, preemptionBody, principalBody, revokeBody } from '../schemas.js';
import { edgeToWire, principalToWire } from '../wire.js';

function edgeReply(r: EdgeResult) {
  return { edge: edgeToWire(r.edge), created: r.created, graph_revision: r.graph_revision };
}

export function registerGraphRoutes(app: FastifyInstance): void {
  const ctx = app.writ;

  app.post<{ Body: PrincipalInput }>('/v1/principals', { schema: { body: principalBody, summary: 'Register a principal (governance only)' } }, async (request, reply) => {
    const caller = await app.caller(request);
    const r = await registerPrincipal(ctx, caller, request.body);
    return reply.code(r.created ? 201 : 200).send({ principal: principalToWire(r.principal), created: r.created, graph_revision: r.graph_revision });
  });

  app.get<{ Params: { id: string } }>('/v1/principals/:id', { schema: { summary: 'Read a principal' } }, async (request) => {
    await app.caller(request);
    return { principal: principalToWire(await getPrincipal(ctx, request.params.id)) };
  });

  app.delete<{ Params: { id: string }; Body: { reason?: string } | null }>('/v1/principals/:id', { schema: { body: revokeBody, summary: 'Revoke a principal (governance only)' } }, async (request) => {
    const caller = await app.caller(request);
    const r = await revokePrincipal(ctx, caller, request.params.id, request.body?.reason ?? 'revoked');
    return { principal: principalToWire(r.principal), graph_revision: r.graph_revision };
  });

  const edgeRoute = <B>(path: string, schema: object, summary: string, create: (caller: string, body: B) => Promise<EdgeResult>) => {
    app.post<{ Body: B }>(path, { schema: { body: schema, summary } }, async (request, reply) => {
      const caller = await app.caller(request);
      const r = await create(caller, request.body as B);
      return reply.code(r.created ? 201 : 200).send(edgeReply(r));
    });
  };
  edgeRoute<GrantInput>('/v1/grants', grantBody, 'Root grant governance → principal', (c, b) => createGrant(ctx, c, b));
  edgeRoute<DelegationInput>('/v1/delegations', delegationBody, 'Delegate part of your scope (attenuation enforced)', (c, b) => createDelegation(ctx, c, b));
  edgeRoute<OwnershipInput>('/v1/ownerships', ownershipBody, 'Assign the owner of managed state', (c, b) => createOwnership(ctx, c, b));
  edgeRoute<ApprovalInput>('/v1/approvals', approvalBody, 'Let a principal approve another\'s risky actions', (c, b) => createApproval(ctx, c, b));
  edgeRoute<PreemptionInput>('/v1/preemptions', preemptionBody, 'Let a principal preempt another\'s leases during incidents', (c, b) => createPreemption(ctx, c, b));

  app.get<{ Params: { id: string } }>('/v1/edges/:id', { schema: { summary: 'Read an edge' } }, async (request) => {
    await app.caller(request);
    const edge = (await ctx.graph.current()).edge(request.params.id);
    if (!edge) throw new WritError('UNKNOWN_EDGE', `no edge "${request.params.id}"`);
    return { edge: edgeToWire(edge) };
  });

  app.delete<{ Params: { id: string }; Body: { reason?: string } | null }>('/v1/edges/:id', { schema: { body: revokeBody, summary: 'Revoke an edge; every chain through it stops counting' } }, async (request) => {
    const caller = await app.caller(request);
    const r = await revokeEdge(ctx, caller, request.params.id, request.body?.reason ?? 'revoked');
    return { edge: edgeToWire(r.edge), revoked: r.revoked, graph_revision: r.graph_revision };
  });

  app.get<{ Querystring: { at?: string; format?: string } }>('/v1/graph', {
    schema: {
      summary: 'Graph export, optionally as of a revision or time (JSON; DOT with Accept: text/vnd.graphviz)',
      querystring: { type: 'object', additionalProperties: false, properties: { at: { type: 'string' }, format: { type: 'string', enum: ['json', 'dot'] } } },
    },
  }, async (request, reply) => {
    await app.caller(request);
    const dot = request.query.format === 'dot' || (request.headers.accept ?? '').includes('text/vnd.graphviz');
    const out = await exportGraph(ctx, request.query.at, dot ? 'dot' : 'json');
    if (dot) return reply.type('text/vnd.graphviz').send(out);
    return out;
  });
}
