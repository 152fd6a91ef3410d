/**
 * The OpenID AuthZEN Authorization API 1.0 front door: a thin shell over src/service/authzen*.ts,
 * which calls the same `decide` as POST /v1/decisions. Callers authenticate exactly as on /v1 (a
 * caller assertion as the Bearer token). `X-Request-ID` is echoed, a 401 names the Bearer scheme.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { evaluateAccess, evaluateAccessBatch, searchActions, searchResources, searchSubjects } from '../../service/index.js';
import type { AuthzenEvaluationRequest, AuthzenEvaluationsRequest, AuthzenSearchRequest } from '../../wire/authzen.js';
import { actionSearchBody, evaluationBody, evaluationsBody, resourceSearchBody, subjectSearchBody } from '../authzen-schemas.js';

export const AUTHZEN_PATHS = {
  access_evaluation_endpoint: '/access/v1/evaluation',
  access_evaluations_endpoint: '/access/v1/evaluations',
  search_subject_endpoint: '/access/v1/search/subject',
  search_resource_endpoint: '/access/v1/search/resource',
  search_action_endpoint: '/access/v1/search/action',
} as const;

/** The PDP identifier: where this request reached Writ (scheme and host, no path). */
function baseUrl(request: FastifyRequest): string {
  return `${request.protocol}://${request.host}`;
}

export async function registerAuthzenRoutes(app: FastifyInstance): Promise<void> {
  const ctx = app.writ;

  app.get('/.well-known/authzen-configuration', { schema: { summary: 'AuthZEN 1.0 policy decision point metadata', tags: ['authzen'], security: [] } }, async (request) => {
    const base = baseUrl(request);
    return {
      policy_decision_point: base,
      ...Object.fromEntries(Object.entries(AUTHZEN_PATHS).map(([k, path]) => [k, `${base}${path}`])),
    };
  });

  await app.register(async (scope) => {
    scope.addHook('onSend', async (request, reply) => {
      const id = request.headers['x-request-id'];
      if (typeof id === 'string') reply.header('X-Request-ID', id);
      if (reply.statusCode === 401) reply.header('WWW-Authenticate', 'Bearer realm="writ"');
    });

    scope.post<{ Body: AuthzenEvaluationRequest }>(AUTHZEN_PATHS.access_evaluation_endpoint, { schema: { body: evaluationBody, summary: 'AuthZEN access evaluation', tags: ['authzen'] } }, async (request) => {
      const caller = await app.caller(request);
      return evaluateAccess(ctx, caller, request.body, request.ip);
    });

    scope.post<{ Body: AuthzenEvaluationsRequest }>(AUTHZEN_PATHS.access_evaluations_endpoint, { schema: { body: evaluationsBody, summary: 'AuthZEN access evaluations (boxcarred)', tags: ['authzen'] } }, async (request) => {
      const caller = await app.caller(request);
      return evaluateAccessBatch(ctx, caller, request.body, request.ip);
    });

    scope.post<{ Body: AuthzenSearchRequest }>(AUTHZEN_PATHS.search_subject_endpoint, { schema: { body: subjectSearchBody, summary: 'AuthZEN subject search: who may do this', tags: ['authzen'] } }, async (request) => {
      const caller = await app.caller(request);
      return searchSubjects(ctx, caller, request.body);
    });

    scope.post<{ Body: AuthzenSearchRequest }>(AUTHZEN_PATHS.search_resource_endpoint, { schema: { body: resourceSearchBody, summary: 'AuthZEN resource search: on what may the subject do this', tags: ['authzen'] } }, async (request) => {
      const caller = await app.caller(request);
      return searchResources(ctx, caller, request.body);
    });

    scope.post<{ Body: AuthzenSearchRequest }>(AUTHZEN_PATHS.search_action_endpoint, { schema: { body: actionSearchBody, summary: 'AuthZEN action search: what may the subject do here', tags: ['authzen'] } }, async (request) => {
      const caller = await app.caller(request);
      return searchActions(ctx, caller, request.body);
    });
  });
}
