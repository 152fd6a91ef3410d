/**
 * What Writ reads from the policy's results (types.ts: DecisionResult, DelegationResult), checked output
 * by output: a policy that forgets one (`risk`, `chains`) or gives it another type is the author's
 * mistake, named as such, instead of a crash further on (a response that cannot be written, an
 * explanation without verdicts). The service checks every result; a bundle is also tried on one probe
 * input per entrypoint when it is built and loaded, so such a bundle is refused before any request.
 */
import type { PolicyEdge, PolicyPrincipal } from '../graph/policy-view.js';
import { didYouMean } from '../json-schema.js';
import type { DecisionInput, DelegationInput, PolicyData } from './types.js';

type Problems = string[];

/** The problems of a `writ/authz/decision` result for `input`, one per output; empty when Writ can read it. */
export function decisionResultProblems(result: unknown, input: Pick<DecisionInput, 'chains'>): Problems {
  if (!isObject(result)) return ['it gave no result (no rule of the package was defined)'];
  const problems: Problems = [];
  const out = (name: string, ok: (v: unknown) => boolean, what: string) => {
    const v = result[name];
    if (v === undefined) problems.push(`${name} is missing (${what})`);
    else if (!ok(v)) problems.push(`${name} must be ${what}, not ${shown(v)}`);
  };
  out('allow', isBoolean, 'a boolean');
  out('reasons', Array.isArray, 'an array of strings');
  problems.push(...stringItems(result.reasons, 'reasons'));
  // An entrypoint written before approval_missing (a policy author's copy) reads as false (wasm-engine.ts).
  if (result.approval_missing !== undefined && !isBoolean(result.approval_missing)) problems.push(`approval_missing must be a boolean, not ${shown(result.approval_missing)}`);
  out('obligations', isObject, 'an object');
  if (isObject(result.obligations)) problems.push(...obligationProblems(result.obligations));
  out('risk', isInteger, 'an integer');
  const count = input.chains.length;
  out('chain_index', (v) => v === null || (isInteger(v) && v >= 0 && v < count), `null or the index of the allowing chain among the ${count} candidate(s)`);
  out('chains', (v) => Array.isArray(v) && v.length === count, `an array with a verdict for each of the ${count} candidate chain(s)`);
  if (Array.isArray(result.chains)) result.chains.forEach((v, i) => problems.push(...verdictProblems(v, `chains[${i}]`)));
  return problems;
}

/** The problems of a `writ/authz/delegation` result; empty when Writ can read it. */
export function delegationResultProblems(result: unknown): Problems {
  if (!isObject(result)) return ['it gave no result (no rule of the package was defined)'];
  const problems: Problems = [];
  if (result.allow === undefined) problems.push('allow is missing (a boolean)');
  else if (!isBoolean(result.allow)) problems.push(`allow must be a boolean, not ${shown(result.allow)}`);
  if (result.violations === undefined) problems.push('violations is missing (an array of strings)');
  else if (!Array.isArray(result.violations)) problems.push(`violations must be an array of strings, not ${shown(result.violations)}`);
  problems.push(...stringItems(result.violations, 'violations'));
  return problems;
}

const OBLIGATIONS: [string, (v: unknown) => boolean, string][] = [
  ['lease_required', isBoolean, 'a boolean'],
  ['version_required', isBoolean, 'a boolean'],
  ['approval_required', isBoolean, 'a boolean'],
  ['resource_class', isString, 'a string'],
  ['field_classes', (v) => isObject(v) && !Array.isArray(v) && Object.values(v).every(isString), 'an object of strings'],
  ['conflict_domain', (v) => v === null || isString(v), 'a string or null'],
];

const KNOWN_OBLIGATIONS = OBLIGATIONS.map(([name]) => name);

/**
 * Each obligation Writ enforces, present and typed; and no other: one Writ does not know (`notify`, a
 * misspelt `lease_requried`) would not be enforced, while the decision log and the signed decision carry it.
 */
function obligationProblems(o: Record<string, unknown>): Problems {
  const known = OBLIGATIONS.flatMap(([name, ok, what]) =>
    o[name] === undefined ? [`obligations.${name} is missing (${what})`] : ok(o[name]) ? [] : [`obligations.${name} must be ${what}, not ${shown(o[name])}`],
  );
  const unknown = Object.keys(o)
    .filter((name) => !KNOWN_OBLIGATIONS.includes(name))
    .map((name) => `obligations.${name} is not an obligation Writ enforces (${KNOWN_OBLIGATIONS.join(', ')})${didYouMean(name, KNOWN_OBLIGATIONS)}: a write would go ahead without it`);
  return [...known, ...unknown];
}

function verdictProblems(v: unknown, at: string): Problems {
  if (!isObject(v)) return [`${at} must be a chain verdict {index, ok, edges, problems}, not ${shown(v)}`];
  const problems: Problems = [];
  if (!isInteger(v.index)) problems.push(`${at}.index must be an integer, not ${shown(v.index)}`);
  if (!isBoolean(v.ok)) problems.push(`${at}.ok must be a boolean, not ${shown(v.ok)}`);
  if (!Array.isArray(v.problems) || !v.problems.every(isString)) problems.push(`${at}.problems must be an array of strings, not ${shown(v.problems)}`);
  if (!Array.isArray(v.edges)) problems.push(`${at}.edges must be an array of {id, ok, problems}, not ${shown(v.edges)}`);
  else {
    v.edges.forEach((e, j) => {
      if (!isObject(e) || !isString(e.id) || !isBoolean(e.ok) || !Array.isArray(e.problems) || !e.problems.every(isString)) {
        problems.push(`${at}.edges[${j}] must be {id: string, ok: boolean, problems: strings}, not ${shown(e)}`);
      }
    });
  }
  return problems;
}

/** Reasons and violations are sentences: a domain rule's `deny contains 42` is the policy's mistake, not a reason. */
function stringItems(v: unknown, name: string): Problems {
  if (!Array.isArray(v)) return [];
  const bad = v.find((x) => !isString(x));
  return bad === undefined ? [] : [`${name} must be strings, one is ${JSON.stringify(bad)} (a \`deny\` message of a domain rule?)`];
}

const PROBE_PRINCIPAL = 'writ-probe';
const PROBE_NOW = Date.UTC(2026, 0, 1);

/**
 * An input for each entrypoint, well formed as the service builds them, to try a bundle on before it is
 * used: one candidate chain (a grant of the first action of the catalogue in the first environment) to a
 * key no resource class has, so a policy answers it with a denial and every output.
 */
export function probeInputs(data: PolicyData): { decision: DecisionInput; delegation: DelegationInput } {
  const action = Object.keys(data.writ.actions)[0] ?? 'read';
  const environment = data.writ.environments?.[0] ?? Object.keys(data.writ.approval_threshold)[0] ?? 'production';
  const scope = { actions: [action], resources: [`${PROBE_PRINCIPAL}:**`], environments: [environment], fields: ['*'], constraints: { risk_max: 0 } };
  const edge = (id: string, kind: PolicyEdge['kind'], from: string, to: string): PolicyEdge => ({
    id, kind, from, to, scope, max_depth: 1, creator: 'governance', reason: 'Writ tries the bundle on this input before using it',
    created_at: 0, not_before: null, expires_at: null, revoked_at: null,
  });
  const principal = (id: string, kind: PolicyPrincipal['kind']): PolicyPrincipal => ({ id, kind, priority_class: kind === 'governance' ? 'governance' : 'agent', revoked_at: null });
  const principals = { governance: principal('governance', 'governance'), [PROBE_PRINCIPAL]: principal(PROBE_PRINCIPAL, 'agent'), [`${PROBE_PRINCIPAL}-2`]: principal(`${PROBE_PRINCIPAL}-2`, 'agent') };
  const chains = [{ edges: [edge(`${PROBE_PRINCIPAL}-grant`, 'grant', 'governance', PROBE_PRINCIPAL)] }];
  return {
    decision: {
      now: PROBE_NOW,
      request: { principal: PROBE_PRINCIPAL, action, resource: `${PROBE_PRINCIPAL}:1`, environment, fields: [], risk: null },
      principals,
      chains,
      owners: [{ field: '*', owner: null, edge_id: null }],
      approval: null,
      properties: { subject: {}, resource: {}, action: {} },
      context: {},
    },
    delegation: { now: PROBE_NOW, proposed: edge(`${PROBE_PRINCIPAL}-delegate`, 'delegate', PROBE_PRINCIPAL, `${PROBE_PRINCIPAL}-2`), principals, chains },
  };
}

function shown(v: unknown): string {
  const text = JSON.stringify(v) ?? String(v);
  return text.length > 60 ? `${text.slice(0, 59)}…` : text;
}

function isBoolean(v: unknown): v is boolean {
  return typeof v === 'boolean';
}

function isString(v: unknown): v is string {
  return typeof v === 'string';
}

function isInteger(v: unknown): v is number {
  return Number.isInteger(v);
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null;
}
