import type { FastifyInstance } from 'fastify';
import { WritError } from '../../errors.js';
import { performAction, type ActionInput } from '../../service/index.js';
import { acquireLeases, declareIncident, listLeases, releaseLease, renewLease, resolveIncident, activeIncidents, isoOrNull, type LeaseRequestInput } from '../../service/index.js';
import { formatServerTiming } from '../../wire/server-timing.js';
import { actionBody, incidentBody, leaseBody, releaseBody, renewBody } from '../schemas.js';

function header(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

export function registerCoordinationRoutes(app: FastifyInstance): void {
  const ctx = app.writ;

  app.post<{ Body: LeaseRequestInput }>('/v1/leases', { schema: { body: leaseBody, summary: 'Take leases (keys derived from allow decisions); RESOURCE_BUSY answers 423 with Retry-After and the holder' } }, async (request, reply) => {
    // Lease calls spend the assertion's jti in the lease's own transaction (or after a refusal).
    const caller = await app.unspentCaller(request);
    const g = await acquireLeases(ctx, caller, request.body);
    return reply.code(201).send({ ...g, expires_at: isoOrNull(g.expires_at) });
  });

  app.post<{ Params: { id: string }; Body: { token: string; ttl_ms?: number } }>('/v1/leases/:id/renew', { schema: { body: renewBody, summary: 'Renew a lease (token required)' } }, async (request) => {
    const caller = await app.unspentCaller(request);
    const r = await renewLease(ctx, caller, request.params.id, request.body.token, request.body.ttl_ms);
    return { ...r, expires_at: isoOrNull(r.expires_at) };
  });

  app.delete<{ Params: { id: string }; Body: { token: string } }>('/v1/leases/:id', { schema: { body: releaseBody, summary: 'Release a lease (token required); the epoch is kept' } }, async (request) => {
    const caller = await app.unspentCaller(request);
    return releaseLease(ctx, caller, request.params.id, request.body.token);
  });

  app.get<{ Querystring: { resource?: string; holder?: string } }>('/v1/leases', {
    schema: { summary: 'Leases in the Kubernetes Lease vocabulary', querystring: { type: 'object', additionalProperties: false, properties: { resource: { type: 'string' }, holder: { type: 'string' } } } },
  }, async (request) => {
    await app.caller(request);
    const filter: { key?: string; holder?: string } = {};
    if (request.query.resource) filter.key = request.query.resource;
    if (request.query.holder) filter.holder = request.query.holder;
    return { leases: await listLeases(ctx, filter) };
  });

  app.post<{ Body: ActionInput }>('/v1/actions', { schema: { body: actionBody, summary: 'The write: verified, fenced, forwarded, receipted' } }, async (request, reply) => {
    // The assertion's jti is spent in the same transaction as the write's intent (or its rejection).
    const authStarted = performance.now();
    const caller = await app.unspentCaller(request);
    const auth = performance.now() - authStarted;
    const h = request.headers;
    const out = await performAction(ctx, caller, request.body, {
      decision: header(h['writ-decision']),
      leaseToken: header(h['writ-lease-token']),
      leaseId: header(h['writ-lease-id']),
      fencingEpoch: header(h['writ-fencing-epoch']),
      idempotencyKey: header(h['idempotency-key']),
    });
    if (out.replayed) reply.header('Idempotent-Replayed', 'true');
    reply.header('Server-Timing', formatServerTiming({ auth, ...out.timings, total: reply.elapsedTime }));
    // 201 a new write; 200 an idempotent replay of a completed one; 202 while the first attempt is still PENDING.
    const status = out.receipt.status === 'PENDING' ? 202 : out.replayed ? 200 : 201;
    return reply.code(status).send({ receipt: out.receipt, replayed: out.replayed });
  });

  app.get<{ Params: { id: string } }>('/v1/receipts/:id', { schema: { summary: 'One receipt' } }, async (request) => {
    await app.caller(request);
    const r = await ctx.receipts.get(request.params.id);
    if (!r) throw new WritError('NOT_FOUND', `no receipt ${request.params.id}`);
    return { receipt: r };
  });

  app.get<{ Querystring: { resource?: string; principal?: string; status?: string; after?: number; limit?: number } }>('/v1/receipts', {
    schema: {
      summary: 'Receipts by resource and/or principal',
      querystring: {
        type: 'object', additionalProperties: false,
        properties: {
          resource: { type: 'string' }, principal: { type: 'string' }, status: { type: 'string', enum: ['PENDING', 'COMPLETED', 'FAILED', 'REJECTED'] },
          after: { type: 'integer', minimum: 0 }, limit: { type: 'integer', minimum: 1, maximum: 1000 },
        },
      },
    },
  }, async (request) => {
    await app.caller(request);
    return ctx.receipts.query(request.query as Parameters<typeof ctx.receipts.query>[0]);
  });

  app.get('/v1/audit/verify', { schema: { summary: 'Check the receipt hash chain' } }, async (request) => {
    await app.caller(request);
    // In chunks, letting writes through between them: a long log must not stall the gateway.
    return ctx.receipts.verifyChain();
  });

  app.post<{ Body: { id: string; reason: string; ttl_ms?: number; decision: string } }>('/v1/incidents', { schema: { body: incidentBody, summary: 'Declare an incident (needs an allow decision for declare_incident on incident:<id>)' } }, async (request, reply) => {
    const caller = await app.caller(request);
    return reply.code(201).send({ incident: await declareIncident(ctx, caller, request.body) });
  });

  app.delete<{ Params: { id: string } }>('/v1/incidents/:id', { schema: { summary: 'Resolve an incident' } }, async (request) => {
    const caller = await app.caller(request);
    return { incident: await resolveIncident(ctx, caller, request.params.id) };
  });

  app.get('/v1/incidents', { schema: { summary: 'Active incidents' } }, async (request) => {
    await app.caller(request);
    return { incidents: await activeIncidents(ctx) };
  });
}
