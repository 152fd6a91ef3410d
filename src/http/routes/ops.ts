import type { FastifyInstance } from 'fastify';
import type { Registry } from 'prom-client';
import { toWireTime } from '../../wire/time.js';
import { errorResponses, ref } from '../components.js';

const open = { security: [] } as const;
const status = (name: string) => ({ type: 'object', required: ['status'], properties: { status: { type: 'string', enum: [name] } } });

export function registerOpsRoutes(app: FastifyInstance, registry: Registry): void {
  const ctx = app.writ;
  app.get('/healthz', { schema: { ...open, operationId: 'healthz', tags: ['Operations'], summary: 'Liveness', response: { 200: { ...status('ok'), description: 'Alive' } } } }, async () => ({ status: 'ok' }));
  app.get('/readyz', {
    schema: {
      ...open, operationId: 'readyz', tags: ['Operations'], summary: 'Readiness: the store answers and a policy is loaded',
      response: {
        200: {
          type: 'object', description: 'Ready', required: ['status', 'graph_revision', 'policy_revision'],
          properties: {
            ...status('ready').properties,
            graph_revision: { type: 'integer' },
            policy_revision: { type: 'string' },
            policy_refused: {
              type: 'object', required: ['revision', 'reason', 'at'],
              description: 'Present when the latest rebuilt policy bundle was not taken (the live one stays): its revision (null when unreadable), why, and when; gone once a rebuilt bundle is taken',
              properties: { revision: { type: ['string', 'null'] }, reason: { type: 'string' }, at: { type: 'string', format: 'date-time' } },
            },
          },
        },
        503: { type: 'object', description: 'Not ready', required: ['status', 'error'], properties: { ...status('not ready').properties, error: { type: 'string' } } },
      },
    },
  }, async (_request, reply) => {
    try {
      // Reading the graph head touches the store: ready means the store answers and a policy is loaded.
      const refused = ctx.policy.reloads?.().last_refused ?? null;
      return {
        status: 'ready',
        graph_revision: (await ctx.graph.current()).revision,
        policy_revision: ctx.policy.revision,
        ...(refused ? { policy_refused: { ...refused, at: toWireTime(refused.at) } } : {}),
      };
    } catch (e) {
      return reply.code(503).send({ status: 'not ready', error: (e as Error).message });
    }
  });
  app.get('/metrics', {
    schema: { ...open, operationId: 'metrics', tags: ['Operations'], summary: 'Prometheus metrics', produces: ['text/plain'], response: { 200: { description: 'Prometheus text exposition format', content: { 'text/plain': { schema: { type: 'string' } } } } } },
  }, async (_request, reply) => {
    reply.type(registry.contentType);
    return registry.metrics();
  });
  app.get('/.well-known/jwks.json', {
    schema: {
      ...open, operationId: 'jwks', tags: ['Operations'], summary: 'Public keys that verify decisions',
      response: { 200: { type: 'object', description: 'JWKS (RFC 7517)', required: ['keys'], properties: { keys: { type: 'array', items: ref('Jwk') } } }, ...errorResponses(['INTERNAL']) },
    },
  }, async () => ctx.keys.jwks());
}
