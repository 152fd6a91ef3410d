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
  const evaluate = <T>(input: unknown, id: number, name: string, complete: (r: unknown) => boolean): T => {
    let resultSet: { result: unknown }[];
    try {
      resultSet = policy.evaluate(input, id) as { result: unknown }[];
    } catch (e) {
      throw new WritError('INTERNAL', `policy ${bundle.revision} failed evaluating ${name}: ${describe(e)}`);
    }
    const result = resultSet[0]?.result;
    if (!complete(result)) {
      throw new WritError('INTERNAL', `policy ${bundle.revision} returned no complete result for ${name} (is the input well formed?)`, { result });
    }
    return result as T;
  };
  return {
    revision: bundle.revision,
    data,
    decide: (input: DecisionInput) =>
      evaluate<DecisionResult>(input, decisionId, DECISION, (r) => isObject(r) && typeof r.allow === 'boolean' && isObject(r.obligations) && Array.isArray(r.reasons)),
    checkDelegation: (input: DelegationInput) =>
      evaluate<DelegationResult>(input, delegationId, DELEGATION, (r) => isObject(r) && typeof r.allow === 'boolean' && Array.isArray(r.violations)),
  };
}

function entrypointId(entrypoints: Record<string, number>, name: string, revision: string): number {
  const id = entrypoints[name];
  if (id === undefined) throw new WritError('POLICY_UNAVAILABLE', `policy bundle ${revision} has no entrypoint ${name}`);
  return id;
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
