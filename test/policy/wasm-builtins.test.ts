import { execFileSync } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { loadPolicy } from '@open-policy-agent/opa-wasm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readTarGz } from '../../src/policy/tar-gz.js';
import { WASM_ALLOWED_BUILTINS, WASM_NATIVE_BUILTINS, WASM_OPERATORS, WASM_SDK_BUILTINS } from '../../src/policy/wasm-builtins.js';
import { opaPath, tempDir } from './support.js';

interface Builtin {
  name: string;
  decl: { args?: unknown[]; result?: unknown };
}

let dir: { path: string; remove: () => Promise<void> };
beforeAll(async () => {
  dir = await tempDir('policy-builtins');
});
afterAll(() => dir.remove());

/** The JavaScript builtins of the installed opa-wasm (its package exports only the loader). */
function sdkBuiltins(): string[] {
  const require = createRequire(import.meta.url);
  const root = dirname(require.resolve('@open-policy-agent/opa-wasm'));
  return Object.keys(require(join(root, 'builtins/index.js')) as Record<string, unknown>);
}

describe('the builtin allow list matches what opa-wasm can run', () => {
  it('every allowed builtin exists in the opa in use', () => {
    const current = JSON.parse(execFileSync(opaPath(), ['capabilities', '--current'], { encoding: 'utf8', maxBuffer: 64 << 20 })) as { builtins: Builtin[] };
    const names = new Set(current.builtins.map((b) => b.name));
    expect([...WASM_ALLOWED_BUILTINS].filter((b) => !names.has(b))).toEqual([]);
  });

  it('the JS-implemented ones are implemented by the installed SDK', () => {
    expect(sdkBuiltins()).toEqual(expect.arrayContaining([...WASM_SDK_BUILTINS]));
  });

  it('a policy calling every allowed builtin compiles and imports only SDK-implemented ones', async () => {
    const current = JSON.parse(execFileSync(opaPath(), ['capabilities', '--current'], { encoding: 'utf8', maxBuffer: 64 << 20 })) as { builtins: Builtin[] };
    const operators = new Set<string>(WASM_OPERATORS);
    const calls = current.builtins
      .filter((b) => WASM_ALLOWED_BUILTINS.has(b.name) && !operators.has(b.name))
      .map((b, i) => {
        const args = (b.decl.args ?? []).map((_, j) => `input.a${j}`).join(', ');
        return b.decl.result === undefined ? `r${i} if ${b.name}(${args})` : `r${i} := ${b.name}(${args})`;
      });
    expect(calls.length).toBe(WASM_NATIVE_BUILTINS.length + WASM_SDK_BUILTINS.length);
    const rego = join(dir.path, 'probe.rego');
    await writeFile(rego, `package probe\n\n${calls.join('\n')}\n`);
    const archive = join(dir.path, 'probe.tar.gz');
    execFileSync(opaPath(), ['build', '-t', 'wasm', '-e', 'probe', '-o', archive, rego]);
    const wasm = readTarGz(await readFile(archive)).get('policy.wasm');
    expect(wasm).toBeDefined();
    const policy = await loadPolicy(wasm as Buffer);
    const exports = (policy.wasmInstance as unknown as { exports: Record<string, (...a: number[]) => number> }).exports;
    const address = exports.opa_json_dump!(exports.builtins!());
    const memory = new Uint8Array(policy.mem.buffer);
    const imported = Object.keys(JSON.parse(Buffer.from(memory.subarray(address, memory.indexOf(0, address))).toString('utf8')) as object);
    expect(imported.sort()).toEqual([...WASM_SDK_BUILTINS].sort());
  });
});
