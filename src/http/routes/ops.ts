import type { FastifyInstance } from 'fastify';
import type { Registry } from 'prom-client';
import { isWritError } from '../../errors.js';
import { checkDatabaseClock, checkStoreAnswers } from '../../service/index.js';
import { toWireTime } from '../../wire/time.js';
import { errorResponses, ref } from '../components.js';

const open = { security: [] } as const;
const status = (name: string) => ({ type: 'object', required: ['status'], properties: { status: { type: 'string', enum: [name] } } });

export function registerOpsRoutes(app: FastifyInstance, registry: Registry): void {
  const ctx = app.writ;
  // Why the last probe was not ready (null: it was): a lost store is logged once when it goes and once when it is back, not at every probe.
  let notReady: string | null = null;
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
            clock: {
              type: 'object', required: ['peer', 'offset_ms', 'uncertainty_ms', 'measured_at'],
              description: 'PostgreSQL only: this replica\'s clock against the database\'s (lease time and single-use expiry are the database\'s clock), measured at most 10 s ago. `warning` is present when the offset is past WRIT_CLOCK_OFFSET_WARN_MS; past WRIT_CLOCK_OFFSET_MAX_MS readiness is 503 CLOCK_SKEW',
              properties: {
                peer: { type: 'string', enum: ['database'] },
                offset_ms: { type: 'integer', description: 'this replica\'s clock minus the database\'s (negative: behind)' },
                uncertainty_ms: { type: 'integer', description: 'half the measurement\'s round trip: the true offset is within offset_ms ± this' },
                measured_at: { type: 'string', format: 'date-time' },
                warning: { type: 'string' },
              },
            },
            policy_refused: {
              type: 'object', required: ['revision', 'reason', 'at'],
              description: 'Present when the latest rebuilt policy bundle was not taken (the live one stays): its revision (null when unreadable), why, and when; gone once a rebuilt bundle is taken',
              properties: { revision: { type: ['string', 'null'] }, reason: { type: 'string' }, at: { type: 'string', format: 'date-time' } },
            },
          },
        },
        503: {
          type: 'object', description: 'Not ready: the store did not answer (in time), no policy is loaded, or (PostgreSQL) this replica\'s clock is too far from the database\'s; `code` is the error code of the cause (OVERLOADED: the database cannot be reached; CLOCK_SKEW: the clocks)',
          required: ['status', 'code', 'error'],
          properties: { ...status('not ready').properties, code: { type: 'string' }, error: { type: 'string' }, clock_offset_ms: { type: 'integer', description: 'CLOCK_SKEW: this replica\'s clock minus the database\'s, ms' } },
        },
      },
    },
  }, async (request, reply) => {
    try {
      // Ready means the store answers (a round trip to it: the live graph's head may come from memory) and a policy is loaded.
      await checkStoreAnswers(ctx);
      const clock = await checkDatabaseClock(ctx);
      const clockWarning = clock && ctx.databaseClock!.problem(clock);
      const refused = ctx.policy.reloads?.().last_refused ?? null;
      const ready = {
        status: 'ready',
        graph_revision: (await ctx.graph.current()).revision,
        policy_revision: ctx.policy.revision,
        ...(clock ? {
          clock: {
            peer: 'database', offset_ms: Math.round(clock.offsetMs), uncertainty_ms: Math.round(clock.uncertaintyMs), measured_at: toWireTime(clock.at),
            ...(clockWarning ? { warning: clockWarning } : {}),
          },
        } : {}),
        ...(refused ? { policy_refused: { ...refused, at: toWireTime(refused.at) } } : {}),
      };
      if (notReady !== null) request.log.warn(`ready again (was not ready: ${notReady})`);
      notReady = null;
      return ready;
    } catch (e) {
      const code = isWritError(e) ? e.code : 'INTERNAL';
      const error = (e as Error).message;
      if (notReady === null) request.log.warn({ code }, `not ready: ${code} ${error}; /readyz answers 503 until it is back`);
      notReady = `${code} ${error}`;
      const offset = isWritError(e) ? e.details?.clock_offset_ms : undefined;
      return reply.code(503).send({ status: 'not ready', code, error, ...(typeof offset === 'number' ? { clock_offset_ms: offset } : {}) });
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
