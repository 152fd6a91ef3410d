/** A PolicyEngine over one compiled bundle, evaluated in-process by @open-policy-agent/opa-wasm. */
import { loadPolicy, type LoadedPolicy } from '@open-policy-agent/opa-wasm';
import { WritError } from '../errors.js';
import { type BundleFiles, readLiveBundle } from './bundle-layout.js';
import { checkPolicyData } from './data-check.js';
import { POLICY_ENTRYPOINTS } from './bundle-layout.js';
import { decisionResultProblems, delegationResultProblems, probeInputs } from './result-check.js';
import type { DecisionInput, DecisionResult, DelegationInput, DelegationResult, PolicyData, PolicyEngine } from './types.js';

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
  /** `problems` says what Writ could not read in a result (result-check.ts): the policy's mistake, each output named. */
  const evaluate = <T>(input: unknown, id: number, name: string, problems: (r: unknown) => string[]): T => {
    let resultSet: { result: unknown }[];
    try {
      resultSet = policy.evaluate(input, id) as { result: unknown }[];
    } catch (e) {
      throw new WritError('INTERNAL', `policy ${bundle.revision} failed evaluating ${name}: ${describe(e)}`);
    }
    const result = resultSet[0]?.result;
    const wrong = problems(result);
    if (wrong.length > 0) {
      throw new WritError('INTERNAL', `policy ${bundle.revision} returned no complete result for ${name}: ${wrong.join('; ')}`, { result, problems: wrong });
    }
    return result as T;
  };
  const engine: PolicyEngine = {
    revision: bundle.revision,
    data: data as PolicyData,
    decide: (input: DecisionInput) => {
      const result = evaluate<DecisionResult>(input, decisionId, DECISION, (r) => decisionResultProblems(r, input));
      // An entrypoint written before approval_missing (a policy author's copy): never "with an approval".
      if (typeof result.approval_missing !== 'boolean') result.approval_missing = false;
      return result;
    },
    checkDelegation: (input: DelegationInput) => evaluate<DelegationResult>(input, delegationId, DELEGATION, delegationResultProblems),
  };
  answersProbes(engine);
  return engine;
}

/**
 * Tries each entrypoint on a well-formed input: a bundle whose results lack or mistype an output Writ
 * reads would answer every request INTERNAL (or crash an explanation); it is refused, naming the output.
 */
function answersProbes(engine: PolicyEngine): void {
  const probe = probeInputs(engine.data);
  for (const [name, run] of [[DECISION, () => engine.decide(probe.decision)], [DELEGATION, () => engine.checkDelegation(probe.delegation)]] as const) {
    try {
      run();
    } catch (e) {
      const problems = e instanceof WritError && Array.isArray(e.details?.problems) ? (e.details.problems as string[]) : null;
      throw new WritError(
        'POLICY_UNAVAILABLE',
        problems
          ? `policy bundle ${engine.revision} cannot be used: its ${name} result lacks or mistypes what Writ reads (the entrypoint must define each for every input; policies/README.md): ${problems.join('; ')}`
          : `policy bundle ${engine.revision} cannot be used: ${name} fails on a well-formed input: ${describe(e)}`,
        problems ? { entrypoint: name, problems } : { entrypoint: name },
      );
    }
  }
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
