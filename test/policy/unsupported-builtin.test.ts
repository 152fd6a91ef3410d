import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { isWritError } from '../../src/errors.js';
import { buildPolicyBundle } from '../../src/policy/index.js';
import { copyPolicies, opaPath, tempDir } from './support.js';

const dirs: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(dirs.splice(0).map((remove) => remove()));
});

async function buildWith(rego: string): Promise<unknown> {
  const dir = await tempDir('policy-builtin');
  dirs.push(dir.remove);
  const policies = await copyPolicies(dir.path);
  await writeFile(join(policies, 'writ/authz/lib/extra.rego'), rego);
  return buildPolicyBundle({ opaPath: opaPath(), policiesDir: policies, outDir: join(dir.path, 'bundle') }).then(
    () => null,
    (e: unknown) => e,
  );
}

describe('the build refuses builtins opa-wasm cannot run', () => {
  it.each([
    ['http.send', 'r := http.send({"method": "GET", "url": input.url})'],
    ['net.cidr_expand', 'r := net.cidr_expand(input.cidr)'],
    ['time.format', 'r := time.format(input.now)'],
  ])('%s fails the build with a message naming it', async (builtin, rule) => {
    const error = await buildWith(`package writ.authz.lib.extra\n\n${rule}\n`);
    expect(isWritError(error) && error.code).toBe('POLICY_UNAVAILABLE');
    const message = (error as Error).message;
    expect(message).toContain('opa build failed');
    expect(message).toContain(`undefined function ${builtin}`);
    expect(message).toContain(`${builtin}: not available to policies, which run as wasm in-process`);
  });

  it('tells a misspelt builtin or policy function from one opa-wasm cannot run', async () => {
    const error = await buildWith('package writ.authz.lib.extra\n\nr := sprintff("%d", [1])\n\ns := scope.covers(1)\n\nt := data.writ.authz.lib.nothing(1)\n');
    const message = (error as Error).message;
    expect(message).toContain('writ/authz/lib/extra.rego:3: rego_type_error: undefined function sprintff');
    expect(message).toContain('sprintff: neither a builtin nor a function of the policies (misspelt, or its package not imported?) (did you mean "sprintf"?)');
    expect(message).toContain('scope.covers: neither a builtin nor a function of the policies (misspelt, or its package not imported?)');
    expect(message).toContain('data.writ.authz.lib.nothing: no function of the policies has this name');
    expect(message).not.toContain('not available to policies');
  });

  it('builds a policy that uses only supported builtins, including sprintf from the JS SDK', async () => {
    expect(await buildWith('package writ.authz.lib.extra\n\nr := sprintf("%d", [count(input.xs)])\n')).toBeNull();
  });
});
