import { compilePattern, matchesSegments, type PatternSegments } from './patterns.js';
import type { Scope } from './model.js';
import { riskMax } from './edge-cover.js';

const EVERY = '*';

/** The parts of a request an edge's scope must cover, precompiled once per resolution. */
export interface CoverageRequest {
  action: string;
  key: PatternSegments;
  environment: string;
  fields: readonly string[];
  /** The risk the policy judges the request at: a scope with a lower risk_max cannot end a valid chain. */
  risk: number;
}

export function compileCoverageRequest(request: { action: string; resource: string; environment: string; fields: readonly string[]; risk: number }): CoverageRequest {
  return { action: request.action, key: compilePattern(request.resource), environment: request.environment, fields: request.fields, risk: request.risk };
}

/**
 * Whether `scope` covers the request on action, resource, environment, fields and risk. Used only to
 * prune candidates in decide mode (an edge that does not cover the request cannot be on a valid
 * chain); the policy remains the judge and checks coverage itself.
 */
export function scopeCoversRequest(scope: Scope, request: CoverageRequest): boolean {
  return (
    listCovers(scope.actions, request.action) &&
    listCovers(scope.environments, request.environment) &&
    fieldsCovered(scope.fields, request.fields) &&
    riskMax(scope.constraints) >= request.risk &&
    resourcesCover(scope.resources, request.key)
  );
}

function listCovers(list: readonly string[], value: string): boolean {
  return list.includes(value) || list.includes(EVERY);
}

/** Empty requested fields mean the whole resource, which only `*` covers. */
function fieldsCovered(scopeFields: readonly string[], requested: readonly string[]): boolean {
  if (scopeFields.includes(EVERY)) return true;
  if (requested.length === 0) return false;
  for (const f of requested) if (!scopeFields.includes(f)) return false;
  return true;
}

function resourcesCover(patterns: readonly string[], key: PatternSegments): boolean {
  for (const p of patterns) if (matchesSegments(compilePattern(p), key)) return true;
  return false;
}
