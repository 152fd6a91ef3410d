import type { FastifyInstance } from 'fastify';
import { decide, explain, isoOrNull, type DecisionRequestInput } from '../../service/index.js';
import { decisionBody, explainBody } from '../schemas.js';
import type { Decision } from '../../wire/v1.js';

export function registerDecisionRoutes(app: FastifyInstance): void {
  const ctx = app.writ;

  app.post<{ Body: DecisionRequestInput }>('/v1/decisions', { schema: { body: decisionBody, summary: 'Ask for a signed decision' } }, async (request): Promise<Decision> => {
    const caller = await app.caller(request);
    const d = await decide(ctx, caller, request.body, { requestedBy: request.ip });
    return { ...d, issued_at: new Date(d.issued_at).toISOString(), expires_at: isoOrNull(d.expires_at) };
  });

  app.post<{ Body: DecisionRequestInput & { principal?: string } }>('/v1/explain', { schema: { body: explainBody, summary: 'Every candidate chain with the verdict on each edge' } }, async (request) => {
    const caller = await app.caller(request);
    return explain(ctx, caller, request.body);
  });
}
