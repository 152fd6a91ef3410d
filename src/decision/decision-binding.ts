import { WritError } from '../errors.js';
import type { DecisionClaims } from './decision-claims.js';

/** The parts of a write request a decision must have been made for. */
export interface DecisionRequest {
  principal: string;
  action: string;
  resource: string;
  environment: string;
  fields: string[];
}

const SCALARS = ['principal', 'action', 'resource', 'environment'] as const;

/**
 * Throws `DECISION_MISMATCH` naming the first dimension (principal, action, resource, environment,
 * fields) on which the decision and the request differ. Fields are compared as sets.
 */
export function checkDecisionBinding(claims: DecisionClaims, request: DecisionRequest): void {
  for (const dimension of SCALARS) {
    if (claims[dimension] !== request[dimension]) {
      throw new WritError('DECISION_MISMATCH', `decision was made for ${dimension} ${claims[dimension]}, not ${request[dimension]}`, {
        dimension,
        decided: claims[dimension],
        requested: request[dimension],
      });
    }
  }
  const decided = fieldSet(claims.fields);
  const requested = fieldSet(request.fields);
  if (decided.join('\u0000') !== requested.join('\u0000')) {
    throw new WritError('DECISION_MISMATCH', `decision was made for fields [${decided.join(', ')}], not [${requested.join(', ')}]`, {
      dimension: 'fields',
      decided,
      requested,
    });
  }
}

function fieldSet(fields: string[]): string[] {
  return [...new Set(fields)].sort();
}
