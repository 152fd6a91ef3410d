/** A PolicyEngine over one compiled bundle, evaluated in-process by @open-policy-agent/opa-wasm. */
import { loadPolicy, type LoadedPolicy } from '@open-policy-agent/opa-wasm';
import { WritError } from '../errors.js';
import { type BundleFiles, readLiveBundle } from './bundle-layout.js';
import { checkPolicyData } from './data-check.js';
import { POLICY_ENTRYPOINTS } from './build.js';
import type { DecisionInput, DecisionResult, DelegationInput, DelegationResult, PolicyEngine } from './types.js';

const [DECISION, DELEGATION] = POLICY_ENTRYPOINTS;

/** Loads the live bundle of `bundleDir` (see bundle-layout.ts). */
export async function loadPolicyEngine(bundleDir: string): Promise<PolicyEngine> {
  return createPolicyEngine(await readLiveBundle(bundleDir));
}

export async function createPolicyEngine(bundle: BundleFiles): Promise<PolicyEngine> {
  let policy: LoadedPolicy;
  let data: unknown;
  try {
    data = JSON.parse(bundle.data.toString('utf8'));
  } catch (e) {
    throw new WritError('POLICY_UNAVAILABLE', `policy bundle ${bundle.revision} cannot be loaded: its data.json is not JSON: ${describe(e)}`);
  }
  checkPolicyData(data, `policy bundle ${bundle.revision}`);
  try {
    policy = await loadPolicy(bundle.wasm);
    policy.setData(data);
  } catch (e) {
    throw new WritError('POLICY_UNAVAILABLE', `policy bundle ${bundle.revision} cannot be loaded: ${describe(e)}`);
  }
  const entrypoints = policy.entrypoints as Record<string, number>;
  const decisionId = entrypointId(entrypoints, DECISION, bundle.revision);
  const delegationId = entrypointId(entrypoints, DELEGATION, bundle.revision);
  /** `problem` says what is wrong with a result, or null when it has the shape the service relies on. */
  const evaluate = <T>(input: unknown, id: number, name: string, problem: (r: unknown) => string | null): T => {
    let resultSet: { result: unknown }[];
    try {
      resultSet = policy.evaluate(input, id) as { result: unknown }[];
    } catch (e) {
      throw new WritError('INTERNAL', `policy ${bundle.revision} failed evaluating ${name}: ${describe(e)}`);
    }
    const result = resultSet[0]?.result;
    const wrong = problem(result);
    if (wrong !== null) {
      throw new WritError('INTERNAL', `policy ${bundle.revision} returned no complete result for ${name}: ${wrong}`, { result });
    }
    return result as T;
  };
  return {
    revision: bundle.revision,
    data,
    decide: (input: DecisionInput) => {
      const result = evaluate<DecisionResult>(input, decisionId, DECISION, (r) => (!isObject(r) || typeof r.allow !== 'boolean' || !isObject(r.obligations) ? 'no allow and obligations (is the input well formed?)' : strings(r.reasons, 'reasons')));
      // An entrypoint written before approval_missing (a policy author's copy): never "with an approval".
      if (typeof result.approval_missing !== 'boolean') result.approval_missing = false;
      return result;
    },
    checkDelegation: (input: DelegationInput) =>
      evaluate<DelegationResult>(input, delegationId, DELEGATION, (r) => (!isObject(r) || typeof r.allow !== 'boolean' ? 'no allow (is the input well formed?)' : strings(r.violations, 'violations'))),
  };
}

function entrypointId(entrypoints: Record<string, number>, name: string, revision: string): number {
  const id = entrypoints[name];
  if (id === undefined) throw new WritError('POLICY_UNAVAILABLE', `policy bundle ${revision} has no entrypoint ${name}`);
  return id;
}

/** Reasons and violations are sentences: a domain rule's `deny contains 42` is the policy's mistake, not a reason. */
function strings(v: unknown, name: string): string | null {
  if (!Array.isArray(v)) return `no ${name}`;
  const bad = v.find((x) => typeof x !== 'string');
  return bad === undefined ? null : `${name} must be strings, one is ${JSON.stringify(bad)} (a \`deny\` message of a domain rule?)`;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null;
}

/** opa-wasm throws strings and plain objects as well as Errors. */
function describe(e: unknown): string {
  if (e instanceof Error) return e.message;
  if (isObject(e) && typeof e.message === 'string') return e.message;
  return String(e);
}
