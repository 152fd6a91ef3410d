import { execFileSync } from 'node:child_process';
import { copyFile, cp, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { loadPolicy, type LoadedPolicy } from '@open-policy-agent/opa-wasm';
import { buildPolicyBundle, loadPolicyEngine, type DecisionInput, type DelegationInput, type PolicyEdge, type PolicyEngine, type PolicyPrincipal } from '../../src/policy/index.js';
import { WASM_FILE } from '../../src/policy/bundle-layout.js';
import { readTarGz } from '../../src/policy/tar-gz.js';

export const repoRoot = resolve(import.meta.dirname, '../..');
export const policiesDir = join(repoRoot, 'policies');

let opa: string | undefined;
export function opaPath(): string {
  opa ??= execFileSync('bash', [join(repoRoot, 'scripts/ensure-opa.sh')], { encoding: 'utf8' }).trim();
  return opa;
}

export async function tempDir(prefix: string): Promise<{ path: string; remove: () => Promise<void> }> {
  const path = await mkdtemp(join(tmpdir(), `writ-${prefix}-`));
  return { path, remove: () => rm(path, { recursive: true, force: true }) };
}

/** The shipped policies/ built with `opa build` into a temporary folder and loaded, as a service loads them; `remove` deletes the folder. */
export async function buildShippedPolicy(prefix: string): Promise<{ engine: PolicyEngine; remove: () => Promise<void> }> {
  const dir = await tempDir(prefix);
  await buildPolicyBundle({ opaPath: opaPath(), policiesDir, outDir: dir.path });
  return { engine: await loadPolicyEngine(dir.path), remove: dir.remove };
}

/** A copy of policies/ without the Rego tests, for tests that edit the policy. */
/**
 * A test module `harness` (Rego) importing the policy's lib/scope.rego (with the libs it imports), built with
 * `opa build -t wasm` for `entrypoints` (`package/rule`) and loaded in opa-wasm, as decisions are: for tests
 * that check TypeScript rules against the policy's. `remove` deletes the build directory.
 */
export async function buildScopeHarness(prefix: string, harness: string, entrypoints: string[]): Promise<{ policy: LoadedPolicy; remove: () => Promise<void> }> {
  const dir = await tempDir(prefix);
  const lib = join(dir.path, 'src', 'writ', 'authz', 'lib');
  await mkdir(lib, { recursive: true });
  for (const f of ['scope.rego', 'instant.rego', 'text.rego']) await copyFile(join(policiesDir, 'writ', 'authz', 'lib', f), join(lib, f));
  await writeFile(join(dir.path, 'src', 'harness.rego'), harness);
  const archive = join(dir.path, 'bundle.tar.gz');
  execFileSync(opaPath(), ['build', '-t', 'wasm', ...entrypoints.flatMap((e) => ['-e', e]), '-o', archive, '.'], { cwd: join(dir.path, 'src') });
  return { policy: await loadPolicy(readTarGz(await readFile(archive)).get(WASM_FILE)!), remove: dir.remove };
}

export async function copyPolicies(to: string): Promise<string> {
  const dir = join(to, 'policies');
  await cp(policiesDir, dir, { recursive: true, filter: (src) => !src.endsWith('_test.rego') });
  return dir;
}

export const MS_DAY = 86_400_000;
export const NOW = Date.UTC(2026, 0, 1);

function principal(id: string, kind: PolicyPrincipal['kind']): PolicyPrincipal {
  return { id, kind, priority_class: kind === 'human' ? 'human' : 'agent', revoked_at: null };
}

export function principals(): Record<string, PolicyPrincipal> {
  return Object.fromEntries(
    [principal('governance', 'governance'), principal('orchestrator', 'agent'), principal('seo-agent-7', 'agent'), principal('editor', 'human')].map((p) => [p.id, p]),
  );
}

export function grant(overrides: Partial<PolicyEdge> = {}): PolicyEdge {
  return {
    id: 'g-orch',
    kind: 'grant',
    from: 'governance',
    to: 'orchestrator',
    scope: { actions: ['publish_post', 'update_post'], resources: ['wp:post:*'], environments: ['production', 'staging'], fields: ['*'], constraints: { risk_max: 2 } },
    max_depth: 2,
    creator: 'governance',
    reason: 'orchestrates content',
    created_at: 0,
    not_before: null,
    expires_at: null,
    revoked_at: null,
    ...overrides,
  };
}

export function delegation(overrides: Partial<PolicyEdge> = {}): PolicyEdge {
  return {
    id: 'd-orch-seo',
    kind: 'delegate',
    from: 'orchestrator',
    to: 'seo-agent-7',
    scope: { actions: ['update_post'], resources: ['wp:post:*'], environments: ['production'], fields: ['meta_description', 'title'], constraints: { risk_max: 1 } },
    max_depth: 0,
    creator: 'orchestrator',
    reason: 'seo metadata only',
    created_at: 0,
    not_before: null,
    expires_at: null,
    revoked_at: null,
    ...overrides,
  };
}

/** seo-agent-7 asks to update the title of post 1024 in production through governance → orchestrator → seo-agent-7. */
export function decisionInput(overrides: Partial<DecisionInput> = {}, request: Partial<DecisionInput['request']> = {}): DecisionInput {
  return {
    now: NOW,
    request: { principal: 'seo-agent-7', action: 'update_post', resource: 'wp:post:1024', environment: 'production', fields: ['title'], risk: null, ...request },
    principals: principals(),
    chains: [{ edges: [grant(), delegation()] }],
    owners: [{ field: 'title', owner: 'content-control-plane', edge_id: 'o-post' }],
    approval: null,
    ...overrides,
  };
}

/** May the orchestrator (holding `grant()`) write `proposed`? */
export function delegationInput(proposed: PolicyEdge, parent: PolicyEdge = grant()): DelegationInput {
  return { now: NOW, proposed, principals: principals(), chains: [{ edges: [parent] }] };
}
