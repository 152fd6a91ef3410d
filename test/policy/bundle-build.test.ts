import { cp, mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildPolicyBundle, bundleRevision, type BuiltPolicyBundle } from '../../src/policy/index.js';
import { copyPolicies, opaPath, policiesDir, tempDir } from './support.js';

let dir: { path: string; remove: () => Promise<void> };
let built: BuiltPolicyBundle;

beforeAll(async () => {
  dir = await tempDir('policy-build');
  built = await buildPolicyBundle({ opaPath: opaPath(), policiesDir, outDir: dir.path });
});
afterAll(() => dir.remove());

describe('buildPolicyBundle', () => {
  it('publishes policy.wasm and data.json under their revision and names it in the revision file', async () => {
    const wasm = await readFile(built.wasmPath);
    const data = await readFile(built.dataPath);
    expect(wasm.subarray(0, 4)).toEqual(Buffer.from([0, 0x61, 0x73, 0x6d]));
    expect(JSON.parse(data.toString()).writ.approval_threshold).toEqual({ production: 2 });
    expect(built.revision).toBe(bundleRevision(wasm, data));
    expect((await readFile(join(dir.path, 'revision'), 'utf8')).trim()).toBe(built.revision);
    expect(built.wasmPath).toBe(join(dir.path, 'bundles', built.revision.slice('sha256:'.length), 'policy.wasm'));
  });

  it('is deterministic, leaves no temporary files and keeps at most two bundles', async () => {
    const again = await buildPolicyBundle({ opaPath: opaPath(), policiesDir, outDir: dir.path });
    expect(again.revision).toBe(built.revision);
    expect((await readdir(dir.path)).sort()).toEqual(['bundles', 'revision']);
    expect(await readdir(join(dir.path, 'bundles'))).toHaveLength(1);
  });

  it('names the same revision for the same policies built from another folder (the hash depends on content only)', async () => {
    const copy = join(dir.path, 'elsewhere', 'policies');
    await cp(policiesDir, copy, { recursive: true });
    const moved = await buildPolicyBundle({ opaPath: opaPath(), policiesDir: copy, outDir: join(dir.path, 'elsewhere', 'out') });
    expect(moved.revision).toBe(built.revision);
  });

  it('surfaces opa’s own message when the policies do not compile', async () => {
    await expect(buildPolicyBundle({ opaPath: opaPath(), policiesDir: join(dir.path, 'missing'), outDir: dir.path })).rejects.toMatchObject({
      code: 'POLICY_UNAVAILABLE',
      message: expect.stringMatching(/^opa build failed:\n.*missing/s),
    });
  });

  it('refuses a bundle folder inside the policies folder (opa would read the bundles built there as data), writing nothing', async () => {
    const policies = await copyPolicies(join(dir.path, 'nested-src'));
    for (const outDir of [join(policies, 'build'), join(policies, '..build'), policies]) {
      await expect(buildPolicyBundle({ opaPath: opaPath(), policiesDir: policies, outDir })).rejects.toMatchObject({
        code: 'POLICY_UNAVAILABLE',
        message: expect.stringMatching(new RegExp(`^the bundle folder ${outDir} \\(WRIT_BUNDLE_DIR\\) is (inside )?the policies folder .*opa would read the bundles built there as policy data`)),
      });
    }
    expect((await readdir(policies)).sort()).toEqual(['README.md', 'data.json', 'writ']);
    // Beside it, as ./build/policy is beside ./policies: built, the same revision twice.
    const beside = [await buildPolicyBundle({ opaPath: opaPath(), policiesDir: policies, outDir: `${policies}-bundle` }), await buildPolicyBundle({ opaPath: opaPath(), policiesDir: policies, outDir: `${policies}-bundle` })];
    expect(beside[1]!.revision).toBe(beside[0]!.revision);
  });

  it('names the line and column of a data file that is not JSON, which opa does not', async () => {
    const policies = await copyPolicies(join(dir.path, 'not-json-src'));
    const dataFile = join(policies, 'data.json');
    const lines = (await readFile(dataFile, 'utf8')).split('\n');
    const at = lines.findIndex((l) => l.includes('"risk": 1,'));
    lines[at] = lines[at]!.replace('"risk": 1,', '"risk": 1,,');
    await writeFile(dataFile, lines.join('\n'));
    const column = lines[at]!.indexOf(',,') + 2;
    await expect(buildPolicyBundle({ opaPath: opaPath(), policiesDir: policies, outDir: join(dir.path, 'not-json') })).rejects.toMatchObject({
      code: 'POLICY_UNAVAILABLE',
      message: expect.stringMatching(new RegExp(`data\\.json: invalid character.*\\ndata\\.json:${at + 1}:${column}: Expected double-quoted property name$`, 's')),
    });
  });

  it('leaves hidden files out (an editor\'s .vscode/settings.json): they are not policy data and do not change the revision', async () => {
    const policies = await copyPolicies(join(dir.path, 'hidden-src'));
    const before = await buildPolicyBundle({ opaPath: opaPath(), policiesDir: policies, outDir: join(dir.path, 'hidden') });
    await mkdir(join(policies, '.vscode'));
    await writeFile(join(policies, '.vscode', 'settings.json'), '{"editor.tabSize": 4}');
    const after = await buildPolicyBundle({ opaPath: opaPath(), policiesDir: policies, outDir: join(dir.path, 'hidden') });
    expect(after.revision).toBe(before.revision);
    expect(Object.keys(JSON.parse(await readFile(after.dataPath, 'utf8')))).toEqual(['writ']);
  });

  it('refuses data the policy would misread and publishes nothing: the live bundle stays', async () => {
    const out = join(dir.path, 'refused');
    const policies = await copyPolicies(join(dir.path, 'refused-src'));
    const live = await buildPolicyBundle({ opaPath: opaPath(), policiesDir: policies, outDir: out });
    const data = JSON.parse(await readFile(join(policies, 'data.json'), 'utf8'));
    data.writ.resource_classes[0].class = 'WRITE_EXCLUSVE';
    await writeFile(join(policies, 'data.json'), JSON.stringify(data));
    await expect(buildPolicyBundle({ opaPath: opaPath(), policiesDir: policies, outDir: out })).rejects.toMatchObject({
      code: 'POLICY_UNAVAILABLE',
      message: expect.stringContaining('data.writ.resource_classes[0].class: "WRITE_EXCLUSVE" is not one of'),
    });
    expect((await readFile(join(out, 'revision'), 'utf8')).trim()).toBe(live.revision);
    expect(await readdir(join(out, 'bundles'))).toEqual([live.revision.slice('sha256:'.length)]);
    expect((await readdir(out)).sort()).toEqual(['bundles', 'revision']);
  });

  it('refuses a policy whose decision lacks or mistypes an output Writ reads, naming each, and publishes nothing', async () => {
    const out = join(dir.path, 'outputs');
    const policies = await copyPolicies(join(dir.path, 'outputs-src'));
    const live = await buildPolicyBundle({ opaPath: opaPath(), policiesDir: policies, outDir: out });
    const entrypoint = join(policies, 'writ', 'authz', 'decision.rego');
    const original = await readFile(entrypoint, 'utf8');
    const refusal = async (edit: (rego: string) => string) => {
      await writeFile(entrypoint, edit(original));
      const e = await buildPolicyBundle({ opaPath: opaPath(), policiesDir: policies, outDir: out }).then(() => null, (e: unknown) => e as Error & { code: string });
      expect(e).toMatchObject({ code: 'POLICY_UNAVAILABLE' });
      expect((await readFile(join(out, 'revision'), 'utf8')).trim()).toBe(live.revision);
      return e!.message;
    };
    const without = (...rules: string[]) => (rego: string) => rego.split('\n').filter((l) => !rules.some((r) => l.startsWith(`${r} := `))).join('\n');
    expect(await refusal(without('risk'))).toMatch(/^policy bundle sha256:[0-9a-f]{16} cannot be used: its writ\/authz\/decision result lacks or mistypes what Writ reads .*: risk is missing \(an integer\)$/);
    expect(await refusal(without('chains'))).toMatch(/: chains is missing \(an array with a verdict for each of the 1 candidate chain\(s\)\)$/);
    // Not the input's fault, and each output by name.
    const both = await refusal(without('allow', 'obligations'));
    expect(both).toMatch(/: allow is missing \(a boolean\); obligations is missing \(an object\)$/);
    expect(both).not.toContain('well formed');
    expect(await refusal((rego) => rego.replace('risk := decide.risk', 'risk := "high"'))).toMatch(/: risk must be an integer, not "high"$/);
    expect(await refusal((rego) => `${rego}\nchain_index := 7\n`.replace('chain_index := decide.chain_index\n', ''))).toMatch(/: chain_index must be null or the index of the allowing chain among the 1 candidate\(s\), not 7$/);
    expect(await refusal((rego) => rego.replace('obligations := decide.obligations', 'obligations := object.remove(decide.obligations, ["conflict_domain"])'))).toMatch(/: obligations.conflict_domain is missing \(a string or null\)$/);
    // An obligation Writ does not know would not be enforced (and a misspelt one beside the right one would go unseen).
    expect(await refusal((rego) => rego.replace('obligations := decide.obligations', 'obligations := object.union(decide.obligations, {"lease_requried": false, "notify": "ops"})'))).toMatch(
      /: obligations.lease_requried is not an obligation Writ enforces \(lease_required, version_required, approval_required, resource_class, field_classes, conflict_domain\) \(did you mean "lease_required"\?\): a write would go ahead without it; obligations.notify is not an obligation Writ enforces \(.*\): a write would go ahead without it$/,
    );
    const delegation = join(policies, 'writ', 'authz', 'delegation.rego');
    await writeFile(entrypoint, original);
    await writeFile(delegation, (await readFile(delegation, 'utf8')).replace(/^violations := .*$/m, ''));
    await expect(buildPolicyBundle({ opaPath: opaPath(), policiesDir: policies, outDir: out })).rejects.toThrow(/its writ\/authz\/delegation result lacks or mistypes what Writ reads .*: violations is missing \(an array of strings\)$/);
    expect(await readdir(join(out, 'bundles'))).toEqual([live.revision.slice('sha256:'.length)]);
  });
});
