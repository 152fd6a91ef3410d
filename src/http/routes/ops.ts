import type { FastifyInstance } from 'fastify';
import type { Registry } from 'prom-client';

export function registerOpsRoutes(app: FastifyInstance, registry: Registry): void {
  const ctx = app.writ;
  app.get('/healthz', { schema: { hide: true } }, async () => ({ status: 'ok' }));
  app.get('/readyz', { schema: { hide: true } }, async (_request, reply) => {
    try {
      // Reading the graph head touches the store: ready means the store answers and a policy is loaded.
      return { status: 'ready', graph_revision: (await ctx.graph.current()).revision, policy_revision: ctx.policy.revision };
    } catch (e) {
      return reply.code(503).send({ status: 'not ready', error: (e as Error).message });
    }
  });
  app.get('/metrics', { schema: { hide: true } }, async (_request, reply) => {
    reply.type(registry.contentType);
    return registry.metrics();
  });
  app.get('/.well-known/jwks.json', { schema: { summary: 'Public keys that verify decisions', security: [] } }, async () => ctx.keys.jwks());
}
