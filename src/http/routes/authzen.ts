/**
 * The OpenID AuthZEN Authorization API 1.0 front door: a thin shell over src/service/authzen*.ts,
 * which calls the same `decide` as POST /v1/decisions. Callers authenticate exactly as on /v1 (a
 * caller assertion as the Bearer token). `X-Request-ID` is echoed, a 401 names the Bearer scheme.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { evaluateAccess, evaluateAccessBatch, searchActions, searchResources, searchSubjects } from '../../service/index.js';
import type { AuthzenEvaluationRequest, AuthzenEvaluationsRequest, AuthzenSearchRequest } from '../../wire/authzen.js';
import { actionSearchBody, evaluationBody, evaluationsBody, resourceSearchBody, subjectSearchBody } from '../authzen-schemas.js';
import { AUTHENTICATED, errorResponses, WITH_INPUT } from '../components.js';

/** An AuthZEN decision: `context` carries Writ's token, chain and obligations (allow) or its reasons (deny). */
const decisionReply = {
  type: 'object', required: ['decision'],
  properties: { decision: { type: 'boolean' }, context: { type: 'object', additionalProperties: true, description: 'decision_id, token, expires_at, chain, obligations and revisions (allow); reason_admin, reason_user, reasons and approval_missing (deny); error (a failed item of a batch)' } },
} as const;

const searchReply = (description: string) => ({
  type: 'object', required: ['page', 'results'], description,
  properties: {
    page: { type: 'object', required: ['next_token', 'count', 'total'], properties: { next_token: { type: 'string', description: 'empty on the last page' }, count: { type: 'integer' }, total: { type: 'integer' } } },
    results: { type: 'array', items: { type: 'object', additionalProperties: true } },
    context: {
      type: 'object', required: ['truncated'], description: 'resource and action searches',
      properties: { truncated: { type: 'boolean', description: 'true: the subject had more chains that could give the answer than Writ judges for one principal, so results may be incomplete' } },
    },
  },
});

const AUTHZEN_ERRORS = errorResponses([...WITH_INPUT, ...AUTHENTICATED, 'FORBIDDEN', 'UNKNOWN_PRINCIPAL', 'UNKNOWN_RESOURCE', 'UNPROCESSABLE', 'POLICY_UNAVAILABLE', 'BUDGET_EXCEEDED']);
const tags = ['AuthZEN'];

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

  app.get('/.well-known/authzen-configuration', {
    schema: {
      operationId: 'authzenConfiguration', summary: 'AuthZEN 1.0 policy decision point metadata', tags, security: [],
      response: {
        200: {
          type: 'object', description: 'The PDP identifier and the URL of each endpoint',
          required: ['policy_decision_point', ...Object.keys(AUTHZEN_PATHS)],
          properties: Object.fromEntries(['policy_decision_point', ...Object.keys(AUTHZEN_PATHS)].map((k) => [k, { type: 'string' }])),
        },
      },
    },
  }, async (request) => {
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

    scope.post<{ Body: AuthzenEvaluationRequest }>(AUTHZEN_PATHS.access_evaluation_endpoint, { schema: { body: evaluationBody, operationId: 'authzenEvaluation', summary: 'AuthZEN access evaluation', tags, response: { 200: { ...decisionReply, description: 'The decision' }, ...AUTHZEN_ERRORS } } }, async (request) => {
      const caller = await app.caller(request);
      return evaluateAccess(ctx, caller, request.body, request.ip);
    });

    scope.post<{ Body: AuthzenEvaluationsRequest }>(AUTHZEN_PATHS.access_evaluations_endpoint, {
      schema: {
        body: evaluationsBody, operationId: 'authzenEvaluations', summary: 'AuthZEN access evaluations (boxcarred)', tags,
        response: {
          200: {
            type: 'object', description: 'One decision per item, in order (without `evaluations`, one decision as for /evaluation)',
            properties: { ...decisionReply.properties, evaluations: { type: 'array', items: decisionReply } },
          },
          ...AUTHZEN_ERRORS,
        },
      },
    }, async (request) => {
      const caller = await app.caller(request);
      return evaluateAccessBatch(ctx, caller, request.body, request.ip);
    });

    scope.post<{ Body: AuthzenSearchRequest }>(AUTHZEN_PATHS.search_subject_endpoint, { schema: { body: subjectSearchBody, operationId: 'authzenSearchSubject', summary: 'AuthZEN subject search: who may do this', tags, response: { 200: searchReply('Subjects ({type, id}) that may do it'), ...AUTHZEN_ERRORS } } }, async (request) => {
      const caller = await app.caller(request);
      return searchSubjects(ctx, caller, request.body);
    });

    scope.post<{ Body: AuthzenSearchRequest }>(AUTHZEN_PATHS.search_resource_endpoint, { schema: { body: resourceSearchBody, operationId: 'authzenSearchResource', summary: 'AuthZEN resource search: on what may the subject do this', tags, response: { 200: searchReply('Resources ({type, id, properties.chain}); an id may be a key pattern'), ...AUTHZEN_ERRORS } } }, async (request) => {
      const caller = await app.caller(request);
      return searchResources(ctx, caller, request.body);
    });

    scope.post<{ Body: AuthzenSearchRequest }>(AUTHZEN_PATHS.search_action_endpoint, { schema: { body: actionSearchBody, operationId: 'authzenSearchAction', summary: 'AuthZEN action search: what may the subject do here', tags, response: { 200: searchReply('Actions ({name})'), ...AUTHZEN_ERRORS } } }, async (request) => {
      const caller = await app.caller(request);
      return searchActions(ctx, caller, request.body);
    });
  });
}
