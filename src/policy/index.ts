/** The policy decision point's engine: build the Rego bundle, load it, evaluate, follow rebuilds. */
export type * from './types.js';
export { buildPolicyBundle, POLICY_ENTRYPOINTS, type BuildPolicyOptions, type BuiltPolicyBundle } from './build.js';
export { bundleRevision, readLiveBundle, type BundleFiles } from './bundle-layout.js';
export { wasmCapabilities } from './capabilities.js';
export { createPolicyEngine, loadPolicyEngine } from './wasm-engine.js';
export { openReloadingPolicyEngine, RELOAD_CHECK_INPUTS, type ReloadingOptions, type ReloadingPolicyEngine } from './reloading-engine.js';
export { WASM_ALLOWED_BUILTINS } from './wasm-builtins.js';
export { loadCandidatePolicy } from './candidate.js';
export { checkPolicyData } from './data-check.js';
export { requestRisk } from './request-risk.js';
