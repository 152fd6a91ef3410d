/** A candidate policy for impact analysis: a built bundle folder, or a policies folder built on the spot. */
import { mkdtemp, readdir, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { WritError } from '../errors.js';
import { buildPolicyBundle } from './build.js';
import { DATA_FILE, readRevision, WASM_FILE } from './bundle-layout.js';
import type { PolicyEngine } from './types.js';
import { loadPolicyEngine } from './wasm-engine.js';

/**
 * Loads the policy in `dir`: a bundle folder (`writ policy build`'s output; an extracted `opa build -t
 * wasm` bundle; a folder holding policy.wasm and data.json and no Rego) as it is, or a folder of Rego
 * policies compiled with `opaPath` into a temporary bundle that is removed again. Never touches the
 * service's own bundle folder.
 */
export async function loadCandidatePolicy(dir: string, opaPath: () => string): Promise<{ engine: PolicyEngine; built: boolean }> {
  if (!(await stat(dir).catch(() => null))?.isDirectory()) throw new WritError('UNPROCESSABLE', `${dir} is not a folder (a policy bundle or a policies folder)`);
  const entries = await readdir(dir);
  // A bundle names its revision (writ policy build writes one) or is an extracted `opa build -t wasm`
  // bundle (its .manifest; it carries its Rego sources too). Otherwise Rego wins over a policy.wasm
  // lying beside it (left there by hand or a build): judging that stale wasm instead of the Rego being
  // edited would answer for the wrong policy without a word.
  const rego = entries.some((e) => e.endsWith('.rego')) || (await hasRego(dir));
  const wasmBundle = entries.includes(WASM_FILE) && entries.includes(DATA_FILE) && (!rego || entries.includes('.manifest'));
  if ((await readRevision(dir)) !== null || wasmBundle) {
    return { engine: await loadPolicyEngine(dir), built: false };
  }
  if (!rego) throw new WritError('UNPROCESSABLE', `${dir} holds neither a policy bundle (revision + bundles/<hex>/ as writ policy build writes it, or policy.wasm + data.json) nor Rego policies`);
  const out = await mkdtemp(join(tmpdir(), 'writ-candidate-policy-'));
  try {
    await buildPolicyBundle({ opaPath: opaPath(), policiesDir: dir, outDir: out });
    return { engine: await loadPolicyEngine(out), built: true };
  } finally {
    await rm(out, { recursive: true, force: true });
  }
}

async function hasRego(dir: string): Promise<boolean> {
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    if (entry.isFile() && entry.name.endsWith('.rego')) return true;
    if (entry.isDirectory() && (await hasRego(join(dir, entry.name)))) return true;
  }
  return false;
}
