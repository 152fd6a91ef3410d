import type { FastifyInstance } from 'fastify';
import { decide, explain, type DecisionRequestInput } from '../../service/index.js';
import { AUTHENTICATED, errorResponses, ref, WITH_INPUT } from '../components.js';
import { decisionBody, explainBody } from '../schemas.js';
import type { Decision } from '../../wire/v1.js';
import { decisionToWire, explanationToWire } from '../wire.js';

export function registerDecisionRoutes(app: FastifyInstance): void {
  const ctx = app.writ;

  app.post<{ Body: DecisionRequestInput }>('/v1/decisions', {
    schema: {
      body: decisionBody, operationId: 'decide', tags: ['Decisions'], summary: 'Ask for a signed decision (a deny is a 200 with allow:false and reasons)',
      response: { 200: { ...ref('Decision'), description: 'The decision: an allow carries the signed token, a deny the reasons' }, ...errorResponses([...WITH_INPUT, ...AUTHENTICATED, 'UNKNOWN_RESOURCE', 'UNKNOWN_PRINCIPAL', 'UNPROCESSABLE', 'FORBIDDEN', 'POLICY_UNAVAILABLE', 'BUDGET_EXCEEDED']) },
    },
  }, async (request): Promise<Decision> => {
    // The assertion's spend is queued, the decision judged and signed without waiting for it; decide() awaits it before answering.
    const { principal, spent } = await app.callerSpending(request);
    return decisionToWire(await decide(app.operation(request), principal, request.body, { requestedBy: request.ip, spent }));
  });

  app.post<{ Body: DecisionRequestInput & { principal?: string } }>('/v1/explain', {
    schema: {
      body: explainBody, operationId: 'explain', tags: ['Decisions'], summary: 'Every candidate chain with the verdict on each edge (another principal\'s: governance only)',
      response: { 200: { ...ref('Explanation'), description: 'The verdict on every candidate chain' }, ...errorResponses([...WITH_INPUT, ...AUTHENTICATED, 'UNKNOWN_RESOURCE', 'UNKNOWN_PRINCIPAL', 'UNPROCESSABLE', 'FORBIDDEN', 'POLICY_UNAVAILABLE', 'BUDGET_EXCEEDED']) },
    },
  }, async (request) => {
    const caller = await app.caller(request);
    return explanationToWire(await explain(ctx, caller, request.body));
  });
}
